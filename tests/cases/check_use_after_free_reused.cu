// gpusan-case: check
// expect: use_after_free
// expect-leak: none
// accept: kernel_fault
// compute-sanitizer: no
// native: may-fail
// what: a kernel writes through a pointer whose buffer was freed; the driver has (usually)
//       handed the same memory to a new allocation, so the stale write lands in live data.
//       Natively, if the memory was not reused and was unmapped, the write may fault.
#include "case.h"
__global__ void stale(int* p) { p[threadIdx.x] = -1; }
int main() {
    int *a, *b;
    CK(cudaMalloc(&a, 1 << 20));
    CK(cudaFree(a));
    CK(cudaMalloc(&b, 1 << 20));
    CK(cudaMemset(b, 0, 1 << 20));
    printf("memory %s\n", a == b ? "reused" : "not reused");
    stale<<<1, 32>>>(a);
    CK(cudaDeviceSynchronize());
    CK(cudaFree(b));
    BUG_DONE();
}
