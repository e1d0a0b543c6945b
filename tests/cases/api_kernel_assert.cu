// gpusan-case: api
// expect: kernel_fault
// expect-leak: none
// compute-sanitizer: yes
// native: may-fail
// what: a device-side assert() fails: the context ends with cudaErrorAssert (710); gpusan
//       reports the fault as CUDA_ERROR_ASSERT with its kernel, grid and block, in every
//       mode, checked or not (the assertion is no memory access the checker could stop)
#include <cassert>
#include "case.h"
__global__ void positive(const int* n) {
    assert(*n >= 0);
}
int main() {
    int* n;
    CK(cudaMalloc(&n, sizeof(int)));
    int minus = -1;
    CK(cudaMemcpy(n, &minus, sizeof(int), cudaMemcpyHostToDevice));
    positive<<<1, 32>>>(n);
    TRY(cudaDeviceSynchronize());
    cudaFree(n);
    BUG_DONE();
}
