// gpusan-case: check
// expect: local_out_of_bounds
// expect-leak: none
// compute-sanitizer: no
// binary: missed-by-design a[32] stays inside the thread's local memory (its frame); the
//   cubin gives the frame's size, not the array's bounds in it, and a patched access sees
//   an address, not the array it was derived from
// what: a per-thread array of 32 ints indexed by run-time values (so it lives in local
//       memory, not registers) is read at index 32, one past its end, inside the thread's
//       local memory window
#include "case.h"
__global__ void k(const int* idx, int* out) {
    int a[32];
    for (int i = 0; i < 32; i++) a[(i * idx[0]) & 31] = i * idx[i % 8];
    out[threadIdx.x] = a[idx[8]];  // idx[8] == 32
}
int main() {
    int h[9] = {1, 2, 3, 4, 5, 6, 7, 8, 32};
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
