// gpusan-case: api
// expect: mismatched_free
// expect-leak: none
// compute-sanitizer: yes
// what: cudaFree on cudaMallocHost (pinned host) memory; then, if CUDA refused it (the suite
//       records whether it does), the correct cudaFreeHost
#include "case.h"
int main() {
    void* h;
    CK(cudaMallocHost(&h, 4096));
    if (TRY(cudaFree(h)) != cudaSuccess) CK(cudaFreeHost(h));  // refused: free it properly
    BUG_DONE();
}
