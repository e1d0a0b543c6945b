// gpusan-case: api
// expect: invalid_free
// expect-leak: none
// compute-sanitizer: yes
// what: cudaFree(p + 16), a pointer inside a live allocation but not its start; then, if CUDA
//       refused it, the correct cudaFree(p)
#include "case.h"
int main() {
    char* d;
    CK(cudaMalloc(&d, 1024));
    if (TRY(cudaFree(d + 16)) != cudaSuccess) CK(cudaFree(d));  // refused: free it properly
    BUG_DONE();
}
