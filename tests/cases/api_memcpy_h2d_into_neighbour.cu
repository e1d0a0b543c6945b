// gpusan-case: api
// expect: memcpy_out_of_bounds
// expect-leak: none
// compute-sanitizer: yes
// what: cudaMemcpy host->device runs 4 KB past a 4 KB buffer, into the next live allocation
//       (the lower of two buffers; the copy covers the gap and 4 KB of the upper one)
#include "case.h"
#include <vector>
int main() {
    char *a, *b;
    CK(cudaMalloc(&a, 4096));
    CK(cudaMalloc(&b, 4096));
    char* lo = a < b ? a : b;
    char* hi = a < b ? b : a;
    size_t gap = (size_t)(hi - lo);
    size_t n = gap <= (1 << 20) ? gap + 4096 : 8192;  // far apart: still 4 KB past the end
    std::vector<unsigned char> h(n);
    fill(h.data(), n);
    printf("neighbour %s\n", gap <= (1 << 20) ? "reached" : "far away");
    TRY(cudaMemcpy(lo, h.data(), n, cudaMemcpyHostToDevice));
    CK(cudaFree(a));
    CK(cudaFree(b));
    BUG_DONE();
}
