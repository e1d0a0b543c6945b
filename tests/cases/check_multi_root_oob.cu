// gpusan-case: check
// expect: out_of_bounds_write
// expect-leak: none
// compute-sanitizer: yes
// what: each thread picks one of two 128-int buffers by its lane (`selp`: the address has
//       two roots) and two threads write element 128 of theirs, one past the end: into the
//       other buffer, live, where the allocator placed them side by side (the case prints
//       it), which only a check against the picked pointer's own allocation sees; the
//       write past the second lands in no allocation, which memcheck sees too
#include "case.h"
__global__ void pick(int* a, int* b) {
    int* p = (threadIdx.x & 1) ? a : b;
    p[128 + (threadIdx.x >> 1) - 15] = 7;  // bug: threads 30 and 31 write p[128]
}
int main() {
    int *a, *b;
    CK(cudaMalloc(&a, 128 * sizeof(int)));
    CK(cudaMalloc(&b, 128 * sizeof(int)));
    long gap = (char*)b - (char*)a;
    printf("b - a = %ld bytes (%s)\n", gap, gap == 512 || gap == -512 ? "side by side" : "apart");
    pick<<<1, 32>>>(a, b);
    CK(cudaDeviceSynchronize());
    CK(cudaFree(a));
    CK(cudaFree(b));
    BUG_DONE();
}
