// gpusan-case: api
// expect: double_free
// expect-leak: none
// compute-sanitizer: yes
// also-cudart-shared: yes
// what: cudaFree twice on the same cudaMalloc buffer
#include "case.h"
int main() {
    void* d;
    CK(cudaMalloc(&d, 1024));
    CK(cudaFree(d));
    TRY(cudaFree(d));
    BUG_DONE();
}
