// Global atomics: a 4096-bin histogram of 32M hashed keys, one atomicAdd on global memory per
// key (no shared-memory privatization). The bins are never cleared between runs, so after
// all runs each bin holds (warm-ups + runs) times its count; the host recounts every key.
#include "workload.h"

constexpr uint32_t kBins = 4096;

__global__ void make_keys(uint32_t* keys, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        keys[i] = mix32((uint32_t)i * 2654435761u + 17) % kBins;
}

__global__ void histogram(const uint32_t* __restrict__ keys, size_t n, unsigned* __restrict__ bins) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        atomicAdd(&bins[keys[i]], 1u);
}

int main() {
    const size_t n = 32ull << 20;
    const int grid = sm_count() * 8, block = 512;
    uint32_t* keys;
    unsigned* bins;
    CK(cudaMalloc(&keys, n * sizeof(uint32_t)));
    CK(cudaMalloc(&bins, kBins * sizeof(unsigned)));
    make_keys<<<grid, block>>>(keys, n);
    CK(cudaMemset(bins, 0, kBins * sizeof(unsigned)));
    auto ms = time_runs([&] { histogram<<<grid, block>>>(keys, n, bins); });
    std::vector<unsigned> got(kBins), want(kBins, 0);
    CK(cudaMemcpy(got.data(), bins, kBins * sizeof(unsigned), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++) want[mix32((uint32_t)i * 2654435761u + 17) % kBins] += kWarmups + kRuns;
    bool ok = got == want;
    Metrics m;
    add_times(m, "histogram.ms", ms);
    m.add("histogram.gatomics_per_s", n / (median(ms) * 1e-3) / 1e9);
    CK(cudaFree(keys));
    CK(cudaFree(bins));
    m.print("histogram", ok, "\"n\": 33554432, \"bins\": 4096, \"runs\": 25");
    return ok ? 0 : 1;
}
