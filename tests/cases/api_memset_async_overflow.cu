// gpusan-case: api
// expect: memset_out_of_bounds
// expect-leak: none
// compute-sanitizer: yes
// what: cudaMemsetAsync on a stream sets 4 bytes past the end of a 4096-byte buffer
#include "case.h"
int main() {
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    void* d;
    CK(cudaMalloc(&d, 4096));
    TRY(cudaMemsetAsync(d, 0x11, 4100, s));
    CK(cudaStreamSynchronize(s));
    CK(cudaFree(d));
    CK(cudaStreamDestroy(s));
    BUG_DONE();
}
