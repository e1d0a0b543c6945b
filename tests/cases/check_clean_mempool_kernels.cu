// gpusan-case: check
// expect: clean
// expect-leak: none
// compute-sanitizer: no
// what: stream-ordered allocations from a memory pool (cudaMallocAsync / cudaFreeAsync) used by
//       kernels on the same stream, 100 rounds; the pool hands the same memory out again, each
//       time to a buffer of a different size, which kernels fill to its exact end
#include "case.h"
__global__ void fill(int* p, int n, int v) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) p[i] = v + i;
}
__global__ void check(const int* p, int n, int v, int* bad) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        if (p[i] != v + i) atomicAdd(bad, 1);
}
int main() {
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    int* bad;
    CK(cudaMalloc(&bad, sizeof(int)));
    CK(cudaMemset(bad, 0, sizeof(int)));
    for (int r = 0; r < 100; r++) {
        int n = 1000 + 333 * (r % 7);
        int* p;
        CK(cudaMallocAsync(&p, n * sizeof(int), s));
        fill<<<8, 128, 0, s>>>(p, n, r);
        check<<<8, 128, 0, s>>>(p, n, r, bad);
        CK(cudaFreeAsync(p, s));
    }
    int hbad = -1;
    CK(cudaMemcpyAsync(&hbad, bad, sizeof(int), cudaMemcpyDeviceToHost, s));
    CK(cudaStreamSynchronize(s));
    CK(cudaFree(bad));
    CK(cudaStreamDestroy(s));
    DONE(hbad == 0);
}
