// gpusan-case: check
// expect: use_after_free
// expect-leak: none
// compute-sanitizer: no
// what: stream-ordered allocation: a buffer from cudaMallocAsync is freed with cudaFreeAsync,
//       another of the same size is allocated on the stream (natively the pool hands the same
//       memory out again: the case prints whether it did), then a kernel writes through the
//       stale pointer, into live data natively; gpusan holds the freed block in quarantine
#include "case.h"
__global__ void poke(int* p) { p[threadIdx.x] = 7; }
int main() {
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    int *a, *b;
    CK(cudaMallocAsync(&a, 4096, s));
    CK(cudaMemsetAsync(a, 0, 4096, s));
    CK(cudaFreeAsync(a, s));
    CK(cudaMallocAsync(&b, 4096, s));
    printf("same address: %d\n", a == b);
    poke<<<1, 32, 0, s>>>(a);
    CK(cudaStreamSynchronize(s));
    CK(cudaFreeAsync(b, s));
    CK(cudaStreamSynchronize(s));
    BUG_DONE();
}
