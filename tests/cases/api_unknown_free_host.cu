// gpusan-case: api
// expect: unknown_free
// expect-leak: none
// compute-sanitizer: yes
// what: cudaFree of a stack address and of a malloc'd host address (the suite records what
//       CUDA returns for each)
#include "case.h"
#include <cstdlib>
int main() {
    int on_stack[16] = {1};
    void* heap = malloc(256);
    CK(cudaFree(nullptr));  // a no-op, not a bug: must not be reported
    TRY(cudaFree(on_stack));
    TRY(cudaFree(heap));
    free(heap);
    printf("stack %d\n", on_stack[0]);
    BUG_DONE();
}
