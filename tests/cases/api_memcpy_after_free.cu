// gpusan-case: api
// expect: use_after_free_host
// expect-leak: none
// compute-sanitizer: yes
// native: may-fail
// what: cudaMemcpy device->host from a buffer already released with cudaFree (CUDA is expected
//       to refuse it; if the memory was unmapped and it does not, the copy may fault)
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
