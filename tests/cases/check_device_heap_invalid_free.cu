// gpusan-case: check
// expect: invalid_free
// expect-leak: none
// accept: kernel_fault
// compute-sanitizer: yes
// native: may-fail
// what: a kernel mallocs 64 bytes on the device heap and frees p + 4, a pointer inside the
//       block that is not its start; then frees the block itself
#include "case.h"
__global__ void k(int* out) {
    char* p = (char*)malloc(64);
    if (!p) { out[0] = -1; return; }
    p[0] = 1;
    out[0] = p[0];
    char* volatile inside = p + 4;
    free(inside);  // bug: not the start of a block
    free(p);
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
