// gpusan-case: check
// expect: out_of_bounds_write
// expect-leak: none
// compute-sanitizer: yes
// also-cudart-shared: yes
// what: a kernel writes element n of an n-int buffer (4 bytes past its end; the usual
//       off-by-one `i <= n` guard)
#include "case.h"
__global__ void init(int* p, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= n) p[i] = i;  // bug: should be i < n
}
int main() {
    const int n = 1000;
    int* d;
    CK(cudaMalloc(&d, n * sizeof(int)));
    init<<<(n + 256) / 256, 256>>>(d, n);
    CK(cudaDeviceSynchronize());
    CK(cudaFree(d));
    BUG_DONE();
}
