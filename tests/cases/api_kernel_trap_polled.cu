// gpusan-case: api
// expect: kernel_fault
// expect-leak: none
// compute-sanitizer: yes
// native: may-fail
// what: a kernel traps and the program learns of it only by polling its stream with
//       cudaStreamQuery (as PyTorch's allocator polls events): the fault is found from the
//       query's result, the program's own error passing through
#include "case.h"
__global__ void guard(const int* n) {
    if (threadIdx.x == 3 && *n < 0) asm volatile("trap;");
}
int main() {
    int* n;
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    CK(cudaMalloc(&n, sizeof(int)));
    int minus = -1;
    CK(cudaMemcpy(n, &minus, sizeof(int), cudaMemcpyHostToDevice));
    guard<<<2, 32, 0, s>>>(n);
    cudaError_t e;
    while ((e = cudaStreamQuery(s)) == cudaErrorNotReady) {
    }
    try_report("cudaStreamQuery(s)", e);
    cudaFree(n);
    printf("done (%s)\n", cudaGetErrorName(e));
    return e == cudaSuccess ? 0 : 2;
}
