// gpusan-case: api
// expect: invalid_pitch
// expect-leak: none
// compute-sanitizer: yes
// what: cudaMemcpy2D with rows (256 bytes) wider than the destination pitch (128 bytes)
//       (CUDA refuses it with cudaErrorInvalidPitchValue: a bug all the same)
#include "case.h"
int main() {
    void* d;
    CK(cudaMalloc(&d, 128 * 8));
    static unsigned char h[256 * 8];
    fill(h, sizeof h);
    TRY(cudaMemcpy2D(d, 128, h, 256, 256, 4, cudaMemcpyHostToDevice));
    CK(cudaFree(d));
    BUG_DONE();
}
