// gpusan-case: check
// expect: double_free
// expect-leak: none
// accept: kernel_fault
// compute-sanitizer: yes
// native: may-fail
// what: a kernel mallocs a block on the device heap, frees it, and frees it again (the
//       pointer copied through a volatile so both calls stay)
#include "case.h"
__global__ void k(int* out) {
    int* p = (int*)malloc(64);
    if (!p) { out[0] = -1; return; }
    p[0] = 7;
    out[0] = p[0];
    int* volatile again = p;
    free(p);
    free(again);  // bug: the block is already freed
}
int main() {
    int* d;
    CK(cudaMalloc(&d, sizeof(int)));
    k<<<1, 1>>>(d);
    printf("kernel -> %s\n", cudaGetErrorName(cudaDeviceSynchronize()));
    cudaGetLastError();
    CK(cudaFree(d));
    BUG_DONE();
}
