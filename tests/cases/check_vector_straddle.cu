// gpusan-case: check
// expect: out_of_bounds_read
// expect-leak: none
// compute-sanitizer: yes
// what: a 16-byte float4 load at byte 1008 of a 1020-byte buffer: 12 bytes inside, 4 past
#include "case.h"
__global__ void k(const float4* p, float* out, int last) {
    float4 q = p[last];  // all four lanes used: one 16-byte load
    out[0] = q.x + q.y + q.z + q.w;
}
int main() {
    float *d, *out;
    CK(cudaMalloc(&d, 1020));  // 255 floats; the last whole float4 is number 62
    CK(cudaMalloc(&out, sizeof(float)));
    CK(cudaMemset(d, 0, 1020));
    k<<<1, 1>>>((const float4*)d, out, 63);
    CK(cudaDeviceSynchronize());
    CK(cudaFree(d));
    CK(cudaFree(out));
    BUG_DONE();
}
