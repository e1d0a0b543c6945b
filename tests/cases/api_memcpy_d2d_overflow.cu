// gpusan-case: api
// expect: memcpy_out_of_bounds
// expect-leak: none
// compute-sanitizer: yes
// what: cudaMemcpy device->device copies a 2048-byte source into a 1024-byte destination
#include "case.h"
int main() {
    void *dst, *src;
    CK(cudaMalloc(&dst, 1024));
    CK(cudaMalloc(&src, 2048));
    CK(cudaMemset(src, 3, 2048));
    TRY(cudaMemcpy(dst, src, 2048, cudaMemcpyDeviceToDevice));
    CK(cudaFree(dst));
    CK(cudaFree(src));
    BUG_DONE();
}
