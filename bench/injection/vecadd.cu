// Runtime-API program for the injection probe: allocations (sync, async), copies, a
// memset, launches, frees. Prints OK when the result is right.
#include <cstdio>
#include <cuda_runtime.h>
__global__ void add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
int main() {
    const int n = 1 << 20;
    float *a, *b, *c, *h = new float[n];
    for (int i = 0; i < n; i++) h[i] = i;
    cudaMalloc(&a, n * 4); cudaMalloc(&b, n * 4);
    cudaStream_t s; cudaStreamCreate(&s);
    cudaMallocAsync(&c, n * 4, s);
    cudaMemcpy(a, h, n * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(b, h, n * 4, cudaMemcpyHostToDevice);
    cudaMemsetAsync(c, 0, n * 4, s);
    for (int k = 0; k < 10; k++) add<<<(n + 255) / 256, 256, 0, s>>>(a, b, c, n);
    cudaStreamSynchronize(s);
    cudaMemcpy(h, c, n * 4, cudaMemcpyDeviceToHost);
    bool ok = true;
    for (int i = 0; i < n; i++) ok &= h[i] == 2.0f * i;
    cudaFreeAsync(c, s); cudaStreamSynchronize(s);
    cudaFree(a); cudaFree(b);
    printf("%s\n", ok && cudaGetLastError() == cudaSuccess ? "OK" : "WRONG");
    return ok ? 0 : 1;
}
