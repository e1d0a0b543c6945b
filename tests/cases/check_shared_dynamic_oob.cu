// gpusan-case: check
// expect: shared_out_of_bounds
// expect-leak: none
// compute-sanitizer: yes
// what: a kernel with 1000 bytes of dynamic shared memory (250 floats) writes float 250, the
//       4 bytes right after it (inside the 128-byte allocation granule: no hardware fault)
#include "case.h"
__global__ void k(float* out, int n) {
    extern __shared__ float buf[];
    int t = threadIdx.x;
    if (t < n) buf[t] = (float)t;
    __syncthreads();
    if (t == 0) buf[n] = 1.0f;  // bug: n floats were asked for
    __syncthreads();
    if (t < n) out[t] = buf[t];
}
int main() {
    const int n = 250;
    float* d;
    CK(cudaMalloc(&d, n * sizeof(float)));
    k<<<1, 256, n * sizeof(float)>>>(d, n);
    CK(cudaDeviceSynchronize());
    CK(cudaFree(d));
    BUG_DONE();
}
