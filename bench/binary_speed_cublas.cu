// The binary route's fixed costs on a big library (bench/binary-speed.sh): cuBLAS SGEMM,
// whose kernels exist as machine code only for this GPU. The first call loads cuBLAS's
// modules (lazily) and, under gpusan's binary route, patches them (sanitizerPatchModule)
// and makes each kernel's params block: its wall time against native's is that cost; the
// median of 9 later calls (CUDA events) is the patched GEMM's steady cost.
//
// Prints `cublas first_ms=F kernel_ms=M accesses=0`, `checksum cublas=...` and `ok`.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

int main() {
    const int n = 2048;
    std::vector<float> h((size_t)n * n);
    for (size_t i = 0; i < h.size(); i++) h[i] = (float)((i * 7919) % 1000) / 1000.0f;
    float *a, *b, *c;
    if (cudaMalloc(&a, h.size() * 4) || cudaMalloc(&b, h.size() * 4) || cudaMalloc(&c, h.size() * 4)) return 1;
    cudaMemcpy(a, h.data(), h.size() * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(b, h.data(), h.size() * 4, cudaMemcpyHostToDevice);
    cublasHandle_t handle;
    if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) return 1;
    // Plain FP32 (no TF32): the same kernels natively and under every tool.
    cublasSetMathMode(handle, CUBLAS_PEDANTIC_MATH);
    const float one = 1, zero = 0;
    auto gemm = [&] { return cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, n, b, n, &zero, c, n); };
    auto t0 = std::chrono::steady_clock::now();
    if (gemm() != CUBLAS_STATUS_SUCCESS || cudaDeviceSynchronize()) return 1;
    double first = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0), cudaEventCreate(&e1);
    std::vector<float> ms;
    for (int r = 0; r < 9; r++) {
        cudaEventRecord(e0);
        gemm();
        cudaEventRecord(e1);
        if (cudaEventSynchronize(e1)) return 1;
        float m;
        cudaEventElapsedTime(&m, e0, e1);
        ms.push_back(m);
    }
    std::sort(ms.begin(), ms.end());
    printf("cublas first_ms=%.3f kernel_ms=%.4f accesses=0\n", first, ms[4]);
    cudaMemcpy(h.data(), c, h.size() * 4, cudaMemcpyDeviceToHost);
    double s = 0;
    for (size_t i = 0; i < h.size(); i += 97) s += h[i];
    printf("checksum cublas=%.6g\n", s);
    cublasDestroy(handle);
    printf("ok\n");
    return 0;
}
