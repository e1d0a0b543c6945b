// gpusan-case: api
// expect: mismatched_free
// expect-leak: none
// compute-sanitizer: yes
// what: cudaFreeHost on cudaMalloc memory; then, if CUDA refused it, the correct cudaFree
#include "case.h"
int main() {
    void* d;
    CK(cudaMalloc(&d, 1024));
    if (TRY(cudaFreeHost(d)) != cudaSuccess) CK(cudaFree(d));  // refused: free it properly
    BUG_DONE();
}
