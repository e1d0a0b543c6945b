// gpusan-case: check
// expect: local_out_of_bounds
// expect-leak: none
// compute-sanitizer: no
// what: a per-thread array of 8 ints indexed by a run-time value (so it lives in local
//       memory) is read at index 8, one past its end, inside the thread's stack frame
#include "case.h"
__global__ void k(const int* idx, int* out) {
    int a[8];
    for (int i = 0; i < 8; i++) a[i] = i * idx[i];
    out[threadIdx.x] = a[idx[8]];  // idx[8] == 8
}
int main() {
    int h[9] = {1, 2, 3, 4, 5, 6, 7, 8, 8};
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
