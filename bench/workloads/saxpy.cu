// Streaming: z = a*x + y over 64M floats (768 MiB moved per run), grid-stride loop. Every
// element is checked on the host against the same arithmetic.
#include "workload.h"

__global__ void saxpy(size_t n, float a, const float* __restrict__ x, const float* __restrict__ y,
                      float* __restrict__ z) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        z[i] = a * x[i] + y[i];
}

int main() {
    const size_t n = 64ull << 20;
    const float a = 1.5f;
    float *x, *y, *z;
    CK(cudaMalloc(&x, n * sizeof(float)));
    CK(cudaMalloc(&y, n * sizeof(float)));
    CK(cudaMalloc(&z, n * sizeof(float)));
    const int grid = sm_count() * 8, block = 512;
    fill_values<<<grid, block>>>(x, n, 1);
    fill_values<<<grid, block>>>(y, n, 2);
    CK(cudaMemset(z, 0xff, n * sizeof(float)));  // NaN: an unwritten element fails the check
    auto ms = time_runs([&] { saxpy<<<grid, block>>>(n, a, x, y, z); });
    std::vector<float> h(n);
    CK(cudaMemcpy(h.data(), z, n * sizeof(float), cudaMemcpyDeviceToHost));
    bool ok = true;
    for (size_t i = 0; i < n && ok; i++) ok = close(h[i], a * value_at(i, 1) + value_at(i, 2), 1e-6);
    Metrics m;
    add_times(m, "saxpy.ms", ms);
    m.add("saxpy.gb_per_s", 3.0 * n * sizeof(float) / (median(ms) * 1e-3) / 1e9);
    CK(cudaFree(x));
    CK(cudaFree(y));
    CK(cudaFree(z));
    m.print("saxpy", ok, "\"n\": 67108864, \"runs\": 25");
    return ok ? 0 : 1;
}
