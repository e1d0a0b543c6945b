// gpusan-case: check
// expect: use_after_free
// expect-leak: none
// compute-sanitizer: no
// what: a kernel mallocs a block on the device heap, fills it, frees it, then reads it
//       through the same pointer (volatile: the read stays after the free)
#include "case.h"
__global__ void k(int* out) {
    volatile int* p = (volatile int*)malloc(16 * sizeof(int));
    if (!p) { out[0] = -1; return; }
    for (int i = 0; i < 16; i++) p[i] = i;
    free((void*)p);
    out[0] = p[3];  // bug: read after free
}
int main() {
    int* d;
    CK(cudaMalloc(&d, sizeof(int)));
    k<<<1, 1>>>(d);
    CK(cudaDeviceSynchronize());
    CK(cudaFree(d));
    BUG_DONE();
}
