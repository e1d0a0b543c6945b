// gpusan-case: api
// expect: memcpy_out_of_bounds
// expect-leak: none
// compute-sanitizer: yes
// what: cudaMemcpy2D into a cudaMallocPitch buffer of 16 rows copies 17 rows: the last row
//       lies wholly past the end of the allocation (pitch * 16 bytes)
#include "case.h"
int main() {
    const size_t width = 200, rows = 16;
    void* d;
    size_t pitch;
    CK(cudaMallocPitch(&d, &pitch, width, rows));
    static unsigned char h[200 * 17];
    fill(h, sizeof h);
    printf("pitch %s\n", pitch >= width ? "ok" : "small");
    TRY(cudaMemcpy2D(d, pitch, h, width, width, rows + 1, cudaMemcpyHostToDevice));
    CK(cudaFree(d));
    BUG_DONE();
}
