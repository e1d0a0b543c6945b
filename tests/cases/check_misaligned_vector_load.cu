// gpusan-case: check
// expect: misaligned_access
// expect-leak: none
// accept: kernel_fault
// compute-sanitizer: yes
// native: may-fail
// what: a float4 load (one 16-byte ld.global.v4.f32) at p + 1 float: 4-byte aligned, not
//       16, inside the buffer; the hardware faults with a misaligned address, gpusan reports
//       it before the load and skips it
#include "case.h"
__global__ void k(const float* p, int off, float* out) {
    float4 q = *reinterpret_cast<const float4*>(p + off);  // off == 1: p + 4 bytes
    out[threadIdx.x] = q.x + q.y + q.z + q.w;
}
int main() {
    float *d, *out;
    CK(cudaMalloc(&d, 1024));
    CK(cudaMalloc(&out, 32 * sizeof(float)));
    CK(cudaMemset(d, 0, 1024));
    k<<<1, 1>>>(d, 1, out);
    cudaError_t e = cudaDeviceSynchronize();
    printf("bug call k<<<>>> -> %s\n", cudaGetErrorName(e));
    if (e != cudaSuccess) {
        printf("done (%s)\n", cudaGetErrorName(e));
        return 2;
    }
    CK(cudaFree(d));
    CK(cudaFree(out));
    BUG_DONE();
}
