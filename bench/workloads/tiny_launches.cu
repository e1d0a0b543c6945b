// Tiny launches: one run is 1000 launches of an almost empty kernel (one warp, one global
// store), so the time per run in ms is the device time per launch in microseconds. What this
// shows is the fixed cost per launch: instrumentation prologue, and gpusan's work between
// launches where it delays them. `tiny.host_us_per_launch` is the host's side of it (the
// time to enqueue a run): when it is as long as the device's, launches are host-bound.
#include <chrono>

#include "workload.h"

constexpr int kLaunches = 1000;

__global__ void tiny(int* p, int v) {
    if (threadIdx.x == 0) p[blockIdx.x] = v;
}

int main() {
    int* p;
    CK(cudaMalloc(&p, sizeof(int)));
    CK(cudaMemset(p, 0, sizeof(int)));
    int v = 0;
    std::vector<double> host_us;
    auto ms = time_runs([&] {
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < kLaunches; i++) tiny<<<1, 32>>>(p, ++v);
        host_us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
                          kLaunches);
    });
    host_us.erase(host_us.begin(), host_us.begin() + kWarmups);
    int got = 0;
    CK(cudaMemcpy(&got, p, sizeof got, cudaMemcpyDeviceToHost));
    bool ok = got == v && v == kLaunches * (kWarmups + kRuns);
    Metrics m;
    // ms per 1000 launches == us per launch.
    add_times(m, "tiny.us_per_launch", ms);
    m.add("tiny.host_us_per_launch", median(host_us));
    CK(cudaFree(p));
    m.print("tiny_launches", ok, "\"launches_per_run\": 1000, \"runs\": 25");
    return ok ? 0 : 1;
}
