// gpusan-case: api
// expect: memcpy_out_of_bounds
// expect-leak: none
// compute-sanitizer: yes
// what: cudaMemcpyToSymbol writes 257 floats into a __device__ float[256]
#include "case.h"
__device__ float table[256];
__device__ float after[256];  // likely right behind `table`: what the overflow would hit
__global__ void touch(float* out) { out[0] = table[0] + after[0]; }
int main() {
    static float h[257];
    for (int i = 0; i < 257; i++) h[i] = 1.0f + i;
    float* out;
    CK(cudaMalloc(&out, sizeof(float)));
    touch<<<1, 1>>>(out);  // loads the module
    TRY(cudaMemcpyToSymbol(table, h, sizeof h));
    CK(cudaFree(out));
    BUG_DONE();
}
