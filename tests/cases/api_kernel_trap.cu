// gpusan-case: api
// expect: kernel_fault
// expect-leak: none
// compute-sanitizer: yes
// native: may-fail
// what: a kernel traps (a failed device-side check, `asm("trap;")`): the launch fails with
//       cudaErrorLaunchFailure; gpusan reports the fault, its kernel, grid and block, in
//       every mode, whether or not the kernel was instrumented
#include "case.h"
__global__ void guard(const int* n) {
    if (threadIdx.x == 3 && *n < 0) asm volatile("trap;");
}
int main() {
    int* n;
    CK(cudaMalloc(&n, sizeof(int)));
    int minus = -1;
    CK(cudaMemcpy(n, &minus, sizeof(int), cudaMemcpyHostToDevice));
    guard<<<2, 32>>>(n);
    TRY(cudaDeviceSynchronize());
    cudaFree(n);
    BUG_DONE();
}
