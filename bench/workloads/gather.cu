// Random gather: out[i] = in[idx[i]] over 32M floats with a hashed index array (uncoalesced
// reads through a data-dependent pointer). Every element is checked on the host.
#include "workload.h"

__global__ void make_index(uint32_t* idx, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        idx[i] = mix32((uint32_t)i ^ 0x5bd1e995u) % (uint32_t)n;
}

__global__ void gather(const uint32_t* __restrict__ idx, const float* __restrict__ in, size_t n,
                       float* __restrict__ out) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = in[idx[i]];
}

int main() {
    const size_t n = 32ull << 20;
    const int grid = sm_count() * 8, block = 512;
    uint32_t* idx;
    float *in, *out;
    CK(cudaMalloc(&idx, n * sizeof(uint32_t)));
    CK(cudaMalloc(&in, n * sizeof(float)));
    CK(cudaMalloc(&out, n * sizeof(float)));
    make_index<<<grid, block>>>(idx, n);
    fill_values<<<grid, block>>>(in, n, 31);
    CK(cudaMemset(out, 0xff, n * sizeof(float)));
    auto ms = time_runs([&] { gather<<<grid, block>>>(idx, in, n, out); });
    std::vector<float> h(n);
    CK(cudaMemcpy(h.data(), out, n * sizeof(float), cudaMemcpyDeviceToHost));
    bool ok = true;
    for (size_t i = 0; i < n && ok; i++) ok = h[i] == value_at(mix32((uint32_t)i ^ 0x5bd1e995u) % (uint32_t)n, 31);
    Metrics m;
    add_times(m, "gather.ms", ms);
    m.add("gather.gelems_per_s", n / (median(ms) * 1e-3) / 1e9);
    CK(cudaFree(idx));
    CK(cudaFree(in));
    CK(cudaFree(out));
    m.print("gather", ok, "\"n\": 33554432, \"runs\": 25");
    return ok ? 0 : 1;
}
