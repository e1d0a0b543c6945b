// Launch overhead: batches of 1000 launches of an empty kernel and of a small saxpy (4096
// floats), 25 timed batches after warm-up. Per batch: host time per launch call
// (std::chrono around the launch loop, no sync: what interposition adds to every launch),
// device time per launch (CUDA events around the batch), wall per launch (loop + sync). Also
// 200 single launch + cudaStreamSynchronize round trips. Medians over the batches.
#include "bench.h"

__global__ void empty_kernel() {}

__global__ void saxpy(int n, float a, const float* x, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

int main() {
    const int launches = 1000, reps = 25, n = 4096, sync_iters = 200;
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    float *x, *y;
    CK(cudaMalloc(&x, n * sizeof(float)));
    CK(cudaMalloc(&y, n * sizeof(float)));
    CK(cudaMemset(x, 0x3f, n * sizeof(float)));  // 0x3f3f3f3f: about 0.75
    CK(cudaMemset(y, 0, n * sizeof(float)));
    auto launch = [&](int which) {
        if (which == 0)
            empty_kernel<<<1, 32, 0, s>>>();
        else
            saxpy<<<n / 256, 256, 0, s>>>(n, 1e-6f, x, y);
    };
    Metrics m;
    const char* names[2] = {"empty", "saxpy4k"};
    for (int which = 0; which < 2; which++) {
        for (int i = 0; i < 200; i++) launch(which);  // warm-up: module load, first-launch costs
        CK(cudaStreamSynchronize(s));
        std::vector<double> host, dev, wall;
        for (int r = 0; r < reps; r++) {
            CK(cudaEventRecord(e0, s));
            double t0 = now_ns();
            for (int i = 0; i < launches; i++) launch(which);
            double t1 = now_ns();
            CK(cudaEventRecord(e1, s));
            CK(cudaEventSynchronize(e1));
            double t2 = now_ns();
            float ms = 0;
            CK(cudaEventElapsedTime(&ms, e0, e1));
            host.push_back((t1 - t0) / launches / 1000.0);
            dev.push_back(ms * 1000.0 / launches);
            wall.push_back((t2 - t0) / launches / 1000.0);
        }
        CK(cudaGetLastError());
        std::string k = names[which];
        m.add(k + ".host_us_per_launch", median(host));
        m.add(k + ".host_us_per_launch_min", *std::min_element(host.begin(), host.end()));
        m.add(k + ".device_us_per_launch", median(dev));
        m.add(k + ".wall_us_per_launch", median(wall));
        std::vector<double> rt;
        for (int i = 0; i < sync_iters; i++) {
            double t0 = now_ns();
            launch(which);
            CK(cudaStreamSynchronize(s));
            rt.push_back((now_ns() - t0) / 1000.0);
        }
        m.add(k + ".launch_sync_us", median(rt));
    }
    float h[4];
    CK(cudaMemcpy(h, y, sizeof h, cudaMemcpyDeviceToHost));
    bool ok = h[0] > 0;  // saxpy ran
    CK(cudaFree(x));
    CK(cudaFree(y));
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    CK(cudaStreamDestroy(s));
    char params[160];
    snprintf(params, sizeof params, "\"launches_per_batch\": %d, \"batches\": %d, \"saxpy_n\": %d, \"sync_iters\": %d",
             launches, reps, n, sync_iters);
    m.print("launch", ok, params);
    return ok ? 0 : 1;
}
