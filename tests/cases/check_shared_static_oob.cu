// gpusan-case: check
// expect: shared_out_of_bounds
// expect-leak: none
// compute-sanitizer: no
// binary: missed-by-design first[32] lands in `second` or the dynamic tail, inside the block's
//   shared window; the cubin has no bounds per __shared__ array (only the window's size),
//   so a patched access sees a valid shared address
// what: two static __shared__ arrays; a thread writes first[32], i.e. past `first` (into
//       `second`, or into the 128 bytes of dynamic shared memory the launch adds behind the
//       static arrays): inside the block's shared window, so no hardware fault
#include "case.h"
__global__ void k(int* out, int over) {
    __shared__ int first[32];
    __shared__ int second[32];
    extern __shared__ int tail[];  // 32 ints: keeps first[32] inside the window whatever the layout
    int t = threadIdx.x;
    first[t] = t;
    second[t] = -t;
    tail[t] = 0;
    __syncthreads();
    if (t == 0) first[32 + over] = 7;  // over = 0 at run time: first[32]
    __syncthreads();
    out[t] = first[t] + second[t] + tail[t];
}
int main() {
    int* d;
    CK(cudaMalloc(&d, 32 * sizeof(int)));
    k<<<1, 32, 32 * sizeof(int)>>>(d, 0);
    CK(cudaDeviceSynchronize());
    CK(cudaFree(d));
    BUG_DONE();
}
