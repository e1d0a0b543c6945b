// gpusan-case: api
// expect: memset_out_of_bounds
// expect-leak: none
// compute-sanitizer: yes
// what: cudaMemset sets 1025 bytes of a 1024-byte buffer
#include "case.h"
int main() {
    void* d;
    CK(cudaMalloc(&d, 1024));
    TRY(cudaMemset(d, 0x5a, 1025));
    CK(cudaFree(d));
    BUG_DONE();
}
