// gpusan-case: check
// expect: out_of_bounds_write
// expect-leak: none
// compute-sanitizer: yes
// what: a non-inlined device function receives a pointer and an index and writes one int past
//       the end of a 100-int buffer (the pointer arrives as a .func parameter, not a kernel one)
#include "case.h"
__device__ __noinline__ void put(int* p, int i, int v) { p[i] = v; }
__global__ void k(int* p, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= n) put(p, i, i);  // bug: i == n writes p[100]
}
int main() {
    int* d;
    CK(cudaMalloc(&d, 100 * sizeof(int)));
    k<<<1, 128>>>(d, 100);
    CK(cudaDeviceSynchronize());
    CK(cudaFree(d));
    BUG_DONE();
}
