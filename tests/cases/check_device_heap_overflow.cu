// gpusan-case: check
// expect: out_of_bounds_write
// expect-leak: none
// compute-sanitizer: yes
// what: device-side malloc(60) in a kernel, then an int written at byte 60 (past the 60 bytes
//       asked for, inside the heap's 16-byte rounding), then free
#include "case.h"
__global__ void k(int* out, int bytes) {
    volatile int* p = (volatile int*)malloc(bytes);  // volatile: the stores stay
    if (!p) { out[threadIdx.x] = -1; return; }
    for (int i = 0; i < bytes / 4; i++) p[i] = i;
    p[bytes / 4] = 99;  // bug: bytes 60..63
    out[threadIdx.x] = p[0];
    free((void*)p);
}
int main() {
    int* d;
    CK(cudaMalloc(&d, 32 * sizeof(int)));
    k<<<1, 32>>>(d, 60);
    CK(cudaDeviceSynchronize());
    CK(cudaFree(d));
    BUG_DONE();
}
