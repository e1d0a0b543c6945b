// gpusan-case: api
// expect: double_free
// expect-leak: none
// compute-sanitizer: yes
// native: may-fail
// what: cudaFreeAsync twice on the same cudaMallocAsync buffer, on one stream
//       (what the driver does with the second is recorded; it may poison the stream)
#include "case.h"
int main() {
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    void* d;
    CK(cudaMallocAsync(&d, 4096, s));
    CK(cudaMemsetAsync(d, 0, 4096, s));
    CK(cudaFreeAsync(d, s));
    TRY(cudaFreeAsync(d, s));
    TRY(cudaStreamSynchronize(s));
    cudaStreamDestroy(s);
    BUG_DONE();
}
