// gpusan-case: api
// expect: memcpy_out_of_bounds
// expect-leak: none
// compute-sanitizer: yes
// what: cudaMemcpy with cudaMemcpyDefault (direction from the pointers) writes 8 bytes past a
//       512-byte device buffer from a pageable host buffer
#include "case.h"
int main() {
    static unsigned char h[1024];
    fill(h, sizeof h);
    void* d;
    CK(cudaMalloc(&d, 512));
    TRY(cudaMemcpy(d, h, 520, cudaMemcpyDefault));
    CK(cudaFree(d));
    BUG_DONE();
}
