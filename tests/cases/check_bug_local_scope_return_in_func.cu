// gpusan-case: check
// expect: use_after_scope
// expect-leak: none
// compute-sanitizer: no
// binary: missed-by-design the dead frame lies inside the kernel's own stack allocation;
//   machine code has no stack pointer move to tell a live frame from a returned one
// what: a __noinline__ device function returns the address of its own local array to
//       another __noinline__ function, which reads through it after the call returned (its
//       frame is dead; ptxas placed it inside the kernel's stack allocation, so natively
//       nothing faults). The reader is a .func, whose callers' frames are live, so the use
//       cannot be judged there: the bug is found where the address is handed out
#include "case.h"
__device__ __noinline__ int* fill(const int* idx, int n) {
    volatile int a[16];
    for (int i = 0; i < 16; i++) a[(i * idx[0]) & 15] = i * n;
    return (int*)a;  // bug: the address of a local array outlives the call
}
__device__ __noinline__ int relay(const int* idx, int n) {
    int* p = fill(idx, n);
    return p[idx[1] & 15];  // use after scope, in a .func
}
__global__ void k(const int* idx, int* out) { out[threadIdx.x] = relay(idx, threadIdx.x); }
int main() {
    int h[2] = {3, 5};
    int *idx, *out;
    CK(cudaMalloc(&idx, sizeof h));
    CK(cudaMalloc(&out, 32 * sizeof(int)));
    CK(cudaMemcpy(idx, h, sizeof h, cudaMemcpyHostToDevice));
    k<<<1, 32>>>(idx, out);
    CK(cudaDeviceSynchronize());
    CK(cudaFree(idx));
    CK(cudaFree(out));
    BUG_DONE();
}
