// gpusan-case: api
// expect: memcpy_out_of_bounds
// expect-leak: none
// compute-sanitizer: yes
// also-cudart-shared: yes
// what: cudaMemcpy host->device writes 1 byte past the end of a 1024-byte buffer
#include "case.h"
int main() {
    static unsigned char h[2048];
    fill(h, sizeof h);
    void* d;
    CK(cudaMalloc(&d, 1024));
    TRY(cudaMemcpy(d, h, 1025, cudaMemcpyHostToDevice));
    CK(cudaFree(d));
    BUG_DONE();
}
