// Force-included (`nvcc -include`) into the third-party programs that bench/third-party.sh
// prepares (PolyBench-ACC, Rodinia): their kernel region, patched to call bench_begin() and
// bench_end(), is timed by CUDA events; their GPU function, patched to run
// BENCH_WARMUPS + BENCH_RUNS times, re-copies its inputs each time, so every run computes the
// same result. Their own result check reports to bench_checked(mismatches). At exit the
// workload's JSON line (bench/runtime/bench.h) is printed: headline `<name>.ms` is the median
// kernel-region time; ok needs every run timed, the check to have run and passed, and no
// CUDA error.
#pragma once
#include "../runtime/bench.h"

#ifndef BENCH_NAME
#error "BENCH_NAME must name the workload"
#endif
#define BENCH_STR2(x) #x
#define BENCH_STR(x) BENCH_STR2(x)

// CUDA 12 removed the old spelling the PolyBench sources use.
#define cudaThreadSynchronize cudaDeviceSynchronize

constexpr int BENCH_WARMUPS = 3;
constexpr int BENCH_RUNS = 25;

struct BenchState {
    cudaEvent_t e0 = nullptr, e1 = nullptr;
    int calls = 0;
    std::vector<double> ms;
    long checks = 0, mismatches = 0;
    cudaError_t error = cudaSuccess;
    const char* error_name = "cudaSuccess";

    // Printed when the program exits; no CUDA call here (the runtime may be torn down).
    ~BenchState() {
        bool ok = error == cudaSuccess && (int)ms.size() == BENCH_RUNS && checks > 0 && mismatches == 0;
        Metrics m;
        if (!ms.empty()) {
            m.add(BENCH_STR(BENCH_NAME) ".ms", median(ms));
            m.add(BENCH_STR(BENCH_NAME) ".ms_min", *std::min_element(ms.begin(), ms.end()));
        }
        char params[200];
        snprintf(params, sizeof params, "\"runs\": %zu, \"checks\": %ld, \"mismatches\": %ld, \"cuda_error\": \"%s\"",
                 ms.size(), checks, mismatches, error_name);
        fflush(stdout);
        m.print(BENCH_STR(BENCH_NAME), ok, params);
        fflush(stdout);
    }
};
static BenchState bench_state;

static inline void bench_note(cudaError_t e) {
    if (e != cudaSuccess && bench_state.error == cudaSuccess) {
        bench_state.error = e;
        bench_state.error_name = cudaGetErrorName(e);
    }
}

static inline void bench_begin() {
    if (!bench_state.e0) {
        bench_note(cudaEventCreate(&bench_state.e0));
        bench_note(cudaEventCreate(&bench_state.e1));
    }
    bench_note(cudaEventRecord(bench_state.e0));
}

static inline void bench_end() {
    bench_note(cudaEventRecord(bench_state.e1));
    bench_note(cudaEventSynchronize(bench_state.e1));
    float t = 0;
    bench_note(cudaEventElapsedTime(&t, bench_state.e0, bench_state.e1));
    bench_note(cudaGetLastError());
    // A run whose timing failed is not a sample (ok then reports fewer runs than asked).
    if (bench_state.calls++ >= BENCH_WARMUPS && bench_state.error == cudaSuccess) bench_state.ms.push_back(t);
}

static inline void bench_checked(long mismatches) {
    bench_state.checks++;
    bench_state.mismatches += mismatches;
}

// Rodinia pathfinder: the minimum-cost path sums, recomputed on the host (the program
// itself checks nothing). `wall` is rows x cols, row 0 the start; `result` the GPU's last row.
static inline void bench_check_pathfinder(const int* wall, const int* result, int rows, int cols) {
    std::vector<int> prev(wall, wall + cols), next(cols);
    for (int r = 1; r < rows; r++) {
        for (int c = 0; c < cols; c++) {
            int best = prev[c];
            if (c > 0) best = std::min(best, prev[c - 1]);
            if (c < cols - 1) best = std::min(best, prev[c + 1]);
            next[c] = best + wall[(size_t)r * cols + c];
        }
        prev.swap(next);
    }
    long bad = 0;
    for (int c = 0; c < cols; c++) bad += prev[c] != result[c];
    bench_checked(bad);
}
