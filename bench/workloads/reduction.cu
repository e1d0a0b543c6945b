// Reduction: the sum of 64M floats in two kernels: per block, a grid-stride accumulation,
// warp shuffles, then one shared-memory slot per warp; a single block folds the partial sums
// the same way. Checked against a double-precision sum on the host.
#include "workload.h"

__device__ inline float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    return v;
}

// Sum of `in` into one value per block, `out[blockIdx.x]`. blockDim.x is a multiple of 32.
__global__ void block_sum(const float* __restrict__ in, size_t n, float* __restrict__ out) {
    __shared__ float warps[32];
    float v = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        v += in[i];
    v = warp_sum(v);
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (lane == 0) warps[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < blockDim.x / 32 ? warps[lane] : 0;
        v = warp_sum(v);
        if (lane == 0) out[blockIdx.x] = v;
    }
}

int main() {
    const size_t n = 64ull << 20;
    const int grid = sm_count() * 4, block = 1024;
    float *in, *partial, *total;
    CK(cudaMalloc(&in, n * sizeof(float)));
    CK(cudaMalloc(&partial, grid * sizeof(float)));
    CK(cudaMalloc(&total, sizeof(float)));
    fill_values<<<sm_count() * 8, 512>>>(in, n, 21);
    CK(cudaMemset(total, 0xff, sizeof(float)));
    auto ms = time_runs([&] {
        block_sum<<<grid, block>>>(in, n, partial);
        block_sum<<<1, block>>>(partial, grid, total);
    });
    float got = 0;
    CK(cudaMemcpy(&got, total, sizeof got, cudaMemcpyDeviceToHost));
    double want = 0;
    for (size_t i = 0; i < n; i++) want += value_at(i, 21);
    bool ok = close(got, want, 1e-4);
    Metrics m;
    add_times(m, "reduction.ms", ms);
    m.add("reduction.gb_per_s", n * sizeof(float) / (median(ms) * 1e-3) / 1e9);
    CK(cudaFree(in));
    CK(cudaFree(partial));
    CK(cudaFree(total));
    m.print("reduction", ok, "\"n\": 67108864, \"runs\": 25");
    return ok ? 0 : 1;
}
