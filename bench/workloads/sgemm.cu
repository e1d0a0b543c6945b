// Shared-memory tiled SGEMM: C = A * B for 2048 x 2048 floats, 32 x 32 tiles staged in shared
// memory, one thread per output element (17 GFLOP per run). 2048 entries of C, spread over
// every tile row and column, are checked on the host against a double-precision dot product.
#include "workload.h"

constexpr int T = 32;

__global__ void sgemm_tiled(int n, const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c) {
    __shared__ float as[T][T];
    __shared__ float bs[T][T + 1];  // padded: column reads hit distinct banks
    int row = blockIdx.y * T + threadIdx.y, col = blockIdx.x * T + threadIdx.x;
    float acc = 0;
    for (int k0 = 0; k0 < n; k0 += T) {
        as[threadIdx.y][threadIdx.x] = a[(size_t)row * n + k0 + threadIdx.x];
        bs[threadIdx.y][threadIdx.x] = b[(size_t)(k0 + threadIdx.y) * n + col];
        __syncthreads();
#pragma unroll
        for (int k = 0; k < T; k++) acc += as[threadIdx.y][k] * bs[k][threadIdx.x];
        __syncthreads();
    }
    c[(size_t)row * n + col] = acc;
}

int main() {
    const int n = 2048;  // a multiple of T: the kernel has no edge handling
    const size_t nn = (size_t)n * n;
    float *a, *b, *c;
    CK(cudaMalloc(&a, nn * sizeof(float)));
    CK(cudaMalloc(&b, nn * sizeof(float)));
    CK(cudaMalloc(&c, nn * sizeof(float)));
    fill_values<<<sm_count() * 8, 512>>>(a, nn, 11);
    fill_values<<<sm_count() * 8, 512>>>(b, nn, 12);
    CK(cudaMemset(c, 0xff, nn * sizeof(float)));
    dim3 block(T, T), grid(n / T, n / T);
    auto ms = time_runs([&] { sgemm_tiled<<<grid, block>>>(n, a, b, c); });
    std::vector<float> h(nn);
    CK(cudaMemcpy(h.data(), c, nn * sizeof(float), cudaMemcpyDeviceToHost));
    bool ok = true;
    for (int s = 0; s < 2048 && ok; s++) {
        int i = (int)(mix32(2 * s) % n), j = (int)(mix32(2 * s + 1) % n);
        double want = 0;
        for (int k = 0; k < n; k++) want += (double)value_at((size_t)i * n + k, 11) * value_at((size_t)k * n + j, 12);
        ok = close(h[(size_t)i * n + j], want, 1e-4);
    }
    Metrics m;
    add_times(m, "sgemm.ms", ms);
    m.add("sgemm.tflop_per_s", 2.0 * n * nn / (median(ms) * 1e-3) / 1e12);
    CK(cudaFree(a));
    CK(cudaFree(b));
    CK(cudaFree(c));
    m.print("sgemm", ok, "\"n\": 2048, \"tile\": 32, \"runs\": 25");
    return ok ? 0 : 1;
}
