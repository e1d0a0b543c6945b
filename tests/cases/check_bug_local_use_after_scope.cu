// gpusan-case: check
// expect: use_after_scope
// expect-leak: none
// compute-sanitizer: no
// binary: missed-by-design the dead frames lie inside the kernel's own stack allocation;
//   a patched local access sees an address inside the thread's local window and no stack
//   pointer to tell a live frame from a returned one
// what: two __noinline__ device functions hand the kernel the address of their own local
//       array, one as its return value, one stored into the kernel's variable; the kernel
//       reads through both after the functions returned (their frames are dead; ptxas
//       placed them inside the kernel's stack allocation, so natively nothing faults)
#include "case.h"
__device__ __noinline__ int* fill(const int* idx, int n) {
    volatile int a[16];
    for (int i = 0; i < 16; i++) a[(i * idx[0]) & 15] = i * n;
    return (int*)a;  // bug: the address of a local array outlives the call
}
__device__ __noinline__ void make(int** out, const int* idx, int n) {
    volatile int b[16];
    for (int i = 0; i < 16; i++) b[(i * idx[0]) & 15] = i + n;
    *out = (int*)b;  // bug: the same, through the caller's variable
}
__global__ void k(const int* idx, int* out) {
    int t = threadIdx.x;
    int* p = fill(idx, t);
    int v = p[idx[1] & 15];  // use after scope (returned address)
    int* q;
    make(&q, idx, t);
    v += q[idx[2] & 15];  // use after scope (stored address)
    out[t] = v;
}
int main() {
    int h[3] = {3, 5, 7};
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
