// 20,000 allocations: 20,000 separately cudaMalloc'd 16 KiB buffers, their addresses in a
// device table; one kernel run sums every buffer (one block per buffer, read through the
// table), so each run touches every allocation and gpusan's table holds 20,000+ entries.
// Also reports the device memory the process uses (cudaMemGetInfo), whose difference
// between native and gpusan runs bounds gpusan's device-side metadata. Each buffer's sum
// is checked on the host.
#include "workload.h"

constexpr int kBuffers = 20000;
constexpr int kElems = 4096;  // 16 KiB each

__global__ void fill_buffers(float* const* table, int buffers) {
    for (int b = blockIdx.x; b < buffers; b += gridDim.x)
        for (int j = threadIdx.x; j < kElems; j += blockDim.x) table[b][j] = value_at((size_t)b * kElems + j, 41);
}

__global__ void sum_buffers(const float* const* __restrict__ table, float* __restrict__ out) {
    __shared__ float warps[32];
    const float* buf = table[blockIdx.x];
    float v = 0;
    for (int j = threadIdx.x; j < kElems; j += blockDim.x) v += buf[j];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    if (threadIdx.x % 32 == 0) warps[threadIdx.x / 32] = v;
    __syncthreads();
    if (threadIdx.x < 32) {
        v = threadIdx.x < blockDim.x / 32 ? warps[threadIdx.x] : 0;
        for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
        if (threadIdx.x == 0) out[blockIdx.x] = v;
    }
}

int main() {
    CK(cudaFree(0));  // context first, so the baseline below excludes it
    size_t free0 = 0, total = 0, free1 = 0;
    CK(cudaMemGetInfo(&free0, &total));
    std::vector<float*> bufs(kBuffers);
    for (auto& b : bufs) CK(cudaMalloc(&b, kElems * sizeof(float)));
    float **table, *out;
    CK(cudaMalloc(&table, kBuffers * sizeof(float*)));
    CK(cudaMalloc(&out, kBuffers * sizeof(float)));
    CK(cudaMemcpy(table, bufs.data(), kBuffers * sizeof(float*), cudaMemcpyHostToDevice));
    fill_buffers<<<sm_count() * 8, 256>>>(table, kBuffers);
    CK(cudaMemset(out, 0xff, kBuffers * sizeof(float)));
    auto ms = time_runs([&] { sum_buffers<<<kBuffers, 256>>>(table, out); });
    CK(cudaMemGetInfo(&free1, &total));
    std::vector<float> h(kBuffers);
    CK(cudaMemcpy(h.data(), out, kBuffers * sizeof(float), cudaMemcpyDeviceToHost));
    bool ok = true;
    for (int b = 0; b < kBuffers && ok; b++) {
        double want = 0;
        for (int j = 0; j < kElems; j++) want += value_at((size_t)b * kElems + j, 41);
        ok = close(h[b], want, 1e-4);
    }
    Metrics m;
    add_times(m, "many_allocs.ms", ms);
    m.add("many_allocs.gb_per_s", (double)kBuffers * kElems * sizeof(float) / (median(ms) * 1e-3) / 1e9);
    // Device memory taken from just before the 20,000 allocations to after the last kernel:
    // the buffers and table natively; under gpusan also its table, error buffer and modules.
    m.add("many_allocs.mem_delta_mib", (double)(free0 - free1) / (1 << 20));
    m.add("many_allocs.mem_used_mib", (double)(total - free1) / (1 << 20));
    for (auto b : bufs) CK(cudaFree(b));
    CK(cudaFree(table));
    CK(cudaFree(out));
    m.print("many_allocs", ok, "\"buffers\": 20000, \"bytes_each\": 16384, \"runs\": 25");
    return ok ? 0 : 1;
}
