// gpusan-case: api
// expect: memcpy_out_of_bounds
// expect-leak: none
// compute-sanitizer: yes
// what: cudaMemcpy device->host reads 4 bytes past the end of the 1024-byte device source
#include "case.h"
int main() {
    static unsigned char h[2048];
    void* d;
    CK(cudaMalloc(&d, 1024));
    CK(cudaMemset(d, 7, 1024));
    TRY(cudaMemcpy(h, d, 1028, cudaMemcpyDeviceToHost));
    CK(cudaFree(d));
    BUG_DONE();
}
