// gpusan-case: check
// expect: use_after_free
// expect-leak: none
// accept: kernel_fault
// compute-sanitizer: yes
// native: may-fail
// what: a kernel reads a buffer right after it was freed, with no allocation in between (the
//       memory is not reused: gpusan keeps it in quarantine; natively it may be unmapped)
#include "case.h"
__global__ void late(const int* p, int* out) { out[threadIdx.x] = p[threadIdx.x]; }
int main() {
    int *a, *out;
    CK(cudaMalloc(&a, 4096));
    CK(cudaMalloc(&out, 32 * sizeof(int)));
    CK(cudaMemset(a, 0, 4096));
    CK(cudaFree(a));
    late<<<1, 32>>>(a, out);
    cudaDeviceSynchronize();
    cudaGetLastError();
    cudaFree(out);
    BUG_DONE();
}
