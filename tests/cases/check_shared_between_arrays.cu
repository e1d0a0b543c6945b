// gpusan-case: check
// expect: shared_out_of_bounds
// expect-leak: none
// compute-sanitizer: no
// binary: missed-by-design machine code addresses shared memory as offsets into the block's
//   one window (static + dynamic bytes); the cubin keeps the window's size, not where `lower`
//   ends and `upper` begins, so the write from one array into the other is a valid shared
//   address to a patched access (as to memcheck)
// what: two static __shared__ arrays of 32 ints and no dynamic shared memory; thread 0
//       writes index 32 of whichever array ptxas placed lower, so the write lands in the
//       other array (or the alignment gap before it): inside the block's static shared
//       memory, where the hardware and memcheck see a valid address
#include "case.h"
__global__ void k(int* out, int over) {
    __shared__ int lower[32];
    __shared__ int upper[32];
    int t = threadIdx.x;
    lower[t] = t;
    upper[t] = 100 + t;
    __syncthreads();
    if (t == 0) {
        // Two different instructions (a store, an atomic) so the compiler cannot merge the
        // branches into one store through a selected pointer.
        if (lower < upper)
            lower[32 + over] = -1;  // over = 0 at run time: lower[32]
        else
            atomicExch(&upper[32 + over], -1);
    }
    __syncthreads();
    out[t] = lower[t] + upper[t];
}
int main() {
    int* d;
    CK(cudaMalloc(&d, 32 * sizeof(int)));
    k<<<1, 32>>>(d, 0);
    CK(cudaDeviceSynchronize());
    CK(cudaFree(d));
    BUG_DONE();
}
