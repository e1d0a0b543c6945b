// gpusan-case: check
// expect: out_of_bounds_write
// expect-leak: none
// compute-sanitizer: no
// what: each thread picks one of two 64-int buffers by its lane (`selp`: the address has two
//       roots) and writes element 64 of it, one past the end and into the next buffer,
//       which is live: caught only because the metadata travels with the picked pointer
#include "case.h"
__global__ void pick(int* a, int* b) {
    int* p = (threadIdx.x & 1) ? a : b;
    p[64 + (threadIdx.x >> 1) - 15] = 7;  // bug: threads 30 and 31 write p[64]
}
int main() {
    int *a, *b;
    CK(cudaMalloc(&a, 64 * sizeof(int)));
    CK(cudaMalloc(&b, 64 * sizeof(int)));
    pick<<<1, 32>>>(a, b);
    CK(cudaDeviceSynchronize());
    CK(cudaFree(a));
    CK(cudaFree(b));
    BUG_DONE();
}
