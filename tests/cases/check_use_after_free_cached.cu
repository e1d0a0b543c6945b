// gpusan-case: check
// expect: use_after_free
// expect-leak: none
// compute-sanitizer: no
// what: a kernel reads a buffer many times (its lookups are cached), the buffer is freed,
//       200 allocations re-sort the table, and the same kernel reads it again: the stale
//       cached lookup must not hide the use after free.
#include "case.h"
__global__ void readp(const int* p, int* out) { out[threadIdx.x] = p[threadIdx.x]; }
int main() {
    int *a, *out;
    int* more[200];
    CK(cudaMalloc(&a, 4096));
    CK(cudaMalloc(&out, 4096));
    CK(cudaMemset(a, 0, 4096));
    for (int i = 0; i < 50; i++) readp<<<64, 32>>>(a, out);
    CK(cudaDeviceSynchronize());
    CK(cudaFree(a));
    for (int i = 0; i < 200; i++) CK(cudaMalloc(&more[i], 256 + 512 * i));
    readp<<<64, 32>>>(a, out);
    CK(cudaDeviceSynchronize());
    for (int i = 0; i < 200; i++) CK(cudaFree(more[i]));
    CK(cudaFree(out));
    BUG_DONE();
}
