// gpusan-case: check
// expect: local_out_of_bounds
// expect-leak: none
// compute-sanitizer: no
// binary: missed-by-design the write stays inside the thread's stack frame; the cubin gives
//   the frame's size, not where one local array ends and the next begins
// what: two per-thread arrays, a[8] and b[8], in one stack frame (indexed by run-time
//       values, so they live in local memory); a is written at index 8, one past its end,
//       which lands on b[0] (nvcc places b right after a): inside the frame, so frame bounds
//       alone (cuCatch's) do not see it, and natively the result is silently wrong
#include "case.h"
__global__ void k(const int* idx, int* out) {
    int a[8], b[8];
    int t = threadIdx.x;
    for (int i = 0; i < 8; i++) {
        a[(i * idx[0] + t) & 7] = i;
        b[(i * idx[1] + t) & 7] = 2 * i;
    }
    a[idx[2]] = 99;  // idx[2] == 8
    out[t] = a[(t + idx[3]) & 7] + b[(t + idx[4]) & 7];
}
int main() {
    int h[5] = {3, 5, 8, 1, 2};
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
