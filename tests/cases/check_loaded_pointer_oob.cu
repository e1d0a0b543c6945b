// gpusan-case: check
// expect: out_of_bounds_read
// expect-leak: none
// compute-sanitizer: yes
// what: a kernel loads a buffer's pointer from a device-side table and reads one int past that
//       buffer's end (the root is a pointer loaded from memory, not a kernel parameter)
#include "case.h"
__global__ void k(int* const* table, int which, int n, int* out) {
    const int* p = table[which];
    int t = threadIdx.x;
    out[t] = p[n - 32 + t + 1];  // bug: thread 31 reads p[n]
}
int main() {
    int* bufs[4];
    for (int b = 0; b < 4; b++) {
        CK(cudaMalloc(&bufs[b], 256 * sizeof(int)));
        CK(cudaMemset(bufs[b], 0, 256 * sizeof(int)));
    }
    int **table, *out;
    CK(cudaMalloc(&table, sizeof bufs));
    CK(cudaMalloc(&out, 32 * sizeof(int)));
    CK(cudaMemcpy(table, bufs, sizeof bufs, cudaMemcpyHostToDevice));
    k<<<1, 32>>>(table, 2, 256, out);
    CK(cudaDeviceSynchronize());
    for (int b = 0; b < 4; b++) CK(cudaFree(bufs[b]));
    CK(cudaFree(table));
    CK(cudaFree(out));
    BUG_DONE();
}
