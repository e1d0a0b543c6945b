// gpusan-case: api
// expect: use_after_free_host
// expect-leak: none
// compute-sanitizer: yes
// what: cudaMemcpy device->host from a buffer already released with cudaFree
#include "case.h"
int main() {
    static unsigned char h[1024];
    void* d;
    CK(cudaMalloc(&d, 1024));
    CK(cudaMemset(d, 1, 1024));
    CK(cudaFree(d));
    TRY(cudaMemcpy(h, d, 1024, cudaMemcpyDeviceToHost));
    BUG_DONE();
}
