// Shared by the check-overhead workloads of bench/workloads/ (README.md there): timing of a
// kernel launch sequence with CUDA events (warm-ups first, then the median of >= 20 runs),
// deterministic input hashing that host and device compute alike, and the JSON line of
// bench/runtime/bench.h. The first metric a workload prints is its headline (the one the
// overhead script judges); metric names end in their unit.
#pragma once
#include "../runtime/bench.h"
#include <cmath>
#include <cstdint>

constexpr int kWarmups = 3;
constexpr int kRuns = 25;

// Milliseconds per run of `launch` (which enqueues one run's kernels on the default stream),
// timed by events around each run; `kWarmups` untimed runs first absorb module loading and,
// under gpusan, the instrumented module's JIT.
template <class F>
std::vector<double> time_runs(F launch, int runs = kRuns, int warmups = kWarmups) {
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (int i = 0; i < warmups; i++) launch();
    CK(cudaDeviceSynchronize());
    std::vector<double> ms;
    for (int r = 0; r < runs; r++) {
        CK(cudaEventRecord(e0));
        launch();
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float t = 0;
        CK(cudaEventElapsedTime(&t, e0, e1));
        ms.push_back(t);
    }
    CK(cudaGetLastError());
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    return ms;
}

// The headline metric `name` (median) and its minimum; adds the run count to `params`.
static inline void add_times(Metrics& m, const std::string& name, const std::vector<double>& v) {
    m.add(name, median(v));
    m.add(name + "_min", *std::min_element(v.begin(), v.end()));
}

// A 32-bit mix (lowbias32): inputs are a function of the index, so the host can recompute
// any element without copying the input back.
__host__ __device__ inline uint32_t mix32(uint32_t x) {
    x ^= x >> 16;
    x *= 0x7feb352dU;
    x ^= x >> 15;
    x *= 0x846ca68bU;
    x ^= x >> 16;
    return x;
}

// A float in [0.5, 1.5) from an index and a seed.
__host__ __device__ inline float value_at(uint64_t i, uint32_t seed) {
    return (float)(mix32((uint32_t)i ^ mix32(seed + (uint32_t)(i >> 32))) & 0xffffff) / 16777216.0f + 0.5f;
}

__global__ void fill_values(float* p, size_t n, uint32_t seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = value_at(i, seed);
}

static inline int sm_count() {
    int sms = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    return sms;
}

// |a - b| within `rel` of |b| (or of 1 near zero).
static inline bool close(double a, double b, double rel) {
    return std::fabs(a - b) <= rel * std::max(1.0, std::fabs(b));
}
