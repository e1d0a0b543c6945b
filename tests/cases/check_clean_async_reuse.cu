// gpusan-case: check
// expect: clean
// expect-leak: none
// compute-sanitizer: no
// what: clean twin of check_use_after_free_async_reused: the same cudaMallocAsync /
//       cudaFreeAsync / cudaMallocAsync of the same size on one stream (natively the pool
//       hands the freed block out again: the case prints whether it did), each kernel using
//       the buffer live at its launch only, to its last element; then 200 rounds of 4 MiB
//       on two streams, so freed blocks leave gpusan's quarantine (256 MiB) while kernels
//       still run
#include "case.h"
__global__ void fill(int* p, int n, int v) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) p[i] = v + i;
}
__global__ void check(const int* p, int n, int v, int* bad) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        if (p[i] != v + i) atomicAdd(bad, 1);
}
int main() {
    cudaStream_t s[2];
    CK(cudaStreamCreate(&s[0]));
    CK(cudaStreamCreate(&s[1]));
    int *a, *b, *bad;
    CK(cudaMalloc(&bad, sizeof(int)));
    CK(cudaMemset(bad, 0, sizeof(int)));
    const int n = 1024;
    CK(cudaMallocAsync(&a, n * sizeof(int), s[0]));
    fill<<<4, 128, 0, s[0]>>>(a, n, 1);
    check<<<4, 128, 0, s[0]>>>(a, n, 1, bad);
    CK(cudaFreeAsync(a, s[0]));
    CK(cudaMallocAsync(&b, n * sizeof(int), s[0]));
    printf("same address: %d\n", a == b);
    fill<<<4, 128, 0, s[0]>>>(b, n, 2);
    check<<<4, 128, 0, s[0]>>>(b, n, 2, bad);
    CK(cudaFreeAsync(b, s[0]));
    for (int r = 0; r < 200; r++) {
        cudaStream_t st = s[r % 2];
        int m = (1 << 20) + 1024 * (r % 5), *p; // 4 MiB: 200 of them overflow the quarantine
        CK(cudaMallocAsync(&p, m * sizeof(int), st));
        fill<<<256, 256, 0, st>>>(p, m, r);
        check<<<256, 256, 0, st>>>(p, m, r, bad);
        CK(cudaFreeAsync(p, st));
    }
    int hbad = -1;
    CK(cudaStreamSynchronize(s[1]));
    CK(cudaMemcpyAsync(&hbad, bad, sizeof(int), cudaMemcpyDeviceToHost, s[0]));
    CK(cudaStreamSynchronize(s[0]));
    CK(cudaFree(bad));
    CK(cudaStreamDestroy(s[0]));
    CK(cudaStreamDestroy(s[1]));
    DONE(hbad == 0);
}
