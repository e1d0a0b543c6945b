// Kernel time: a bandwidth-bound saxpy-like kernel z = a*x + y over 64M floats (768 MiB moved
// per run: two arrays read, one written), 25 runs timed by CUDA events after 3 warm-ups;
// median ms and GB/s. Inputs are non-zero and checked on a sample afterwards. Under
// `gpusan run --mode api` no kernel is instrumented, so this should not move.
#include "bench.h"
#include <cmath>

__global__ void init(float* p, size_t n, unsigned seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        unsigned h = (unsigned)i * 2654435761u ^ seed;
        h ^= h >> 13;
        p[i] = (float)(h & 0xffff) / 65536.0f + 0.5f;
    }
}

__global__ void saxpy(size_t n, float a, const float* __restrict__ x, const float* __restrict__ y,
                      float* __restrict__ z) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        z[i] = a * x[i] + y[i];
}

int main() {
    const size_t n = 64ull << 20;
    const int runs = 25;
    const float a = 1.5f;
    float *x, *y, *z;
    CK(cudaMalloc(&x, n * sizeof(float)));
    CK(cudaMalloc(&y, n * sizeof(float)));
    CK(cudaMalloc(&z, n * sizeof(float)));
    int sms = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    int grid = sms * 8, block = 512;
    init<<<grid, block>>>(x, n, 1);
    init<<<grid, block>>>(y, n, 2);
    CK(cudaMemset(z, 0xff, n * sizeof(float)));  // NaN poison: unwritten output fails the check
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (int i = 0; i < 3; i++) saxpy<<<grid, block>>>(n, a, x, y, z);
    std::vector<double> ms;
    for (int r = 0; r < runs; r++) {
        CK(cudaEventRecord(e0));
        saxpy<<<grid, block>>>(n, a, x, y, z);
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float t = 0;
        CK(cudaEventElapsedTime(&t, e0, e1));
        ms.push_back(t);
    }
    CK(cudaGetLastError());
    bool ok = true;
    for (size_t i = 0; i < n; i += n / 97 + 1) {
        float hx, hy, hz;
        CK(cudaMemcpy(&hx, x + i, 4, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(&hy, y + i, 4, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(&hz, z + i, 4, cudaMemcpyDeviceToHost));
        ok &= std::fabs(hz - (a * hx + hy)) <= 1e-6f * std::fabs(hz) && hx != 0;  // FMA vs not
    }
    float last;
    CK(cudaMemcpy(&last, z + n - 1, 4, cudaMemcpyDeviceToHost));
    ok &= last == last;  // not the NaN poison
    Metrics m;
    double med = median(ms);
    m.add("saxpy_64M.ms", med);
    m.add("saxpy_64M.ms_min", *std::min_element(ms.begin(), ms.end()));
    m.add("saxpy_64M.gb_per_s", 3.0 * n * sizeof(float) / (med * 1e-3) / 1e9);
    CK(cudaFree(x));
    CK(cudaFree(y));
    CK(cudaFree(z));
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    m.print("kernel", ok, "\"n\": 67108864, \"runs\": 25, \"bytes_per_run\": 805306368");
    return ok ? 0 : 1;
}
