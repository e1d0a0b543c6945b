// gpusan-case: api
// expect: memset_out_of_bounds
// expect-leak: none
// compute-sanitizer: yes
// what: cudaMemset2D sets 17 rows of a 16-row cudaMallocPitch buffer
#include "case.h"
int main() {
    void* d;
    size_t pitch;
    CK(cudaMallocPitch(&d, &pitch, 300, 16));
    TRY(cudaMemset2D(d, pitch, 0x22, 300, 17));
    CK(cudaFree(d));
    BUG_DONE();
}
