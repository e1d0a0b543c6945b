// gpusan-case: check
// expect: out_of_bounds_write
// expect-leak: none
// compute-sanitizer: no
// what: a kernel indexes buffer `a` far past its end, into another live buffer `b` (the index
//       is b - a + 5 elements): the address is valid memory, only its provenance is wrong
#include "case.h"
__global__ void poke(int* a, long long idx) { a[idx] = 42; }
int main() {
    int *a, *b;
    CK(cudaMalloc(&a, 4096));
    CK(cudaMalloc(&b, 1 << 20));
    CK(cudaMemset(b, 0, 1 << 20));
    long long idx = (long long)(b - a) + 5;
    poke<<<1, 1>>>(a, idx);
    int h = 0;
    CK(cudaMemcpy(&h, b + 5, sizeof h, cudaMemcpyDeviceToHost));
    printf("b[5] %s\n", h == 42 ? "overwritten" : "intact");
    CK(cudaFree(a));
    CK(cudaFree(b));
    BUG_DONE();
}
