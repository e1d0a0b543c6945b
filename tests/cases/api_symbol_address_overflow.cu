// gpusan-case: api
// expect: memcpy_out_of_bounds
// expect-leak: none
// accept: unknown_device_address
// compute-sanitizer: yes
// what: cudaMemcpy to the address of a __device__ int[64] (cudaGetSymbolAddress) copies 65 ints
#include "case.h"
__device__ int vals[64];
__device__ int next_vals[64];
__global__ void touch(int* out) { out[0] = vals[0] + next_vals[0]; }
int main() {
    static int h[65];
    for (int i = 0; i < 65; i++) h[i] = i + 1;
    int* out;
    CK(cudaMalloc(&out, sizeof(int)));
    touch<<<1, 1>>>(out);
    void* p;
    CK(cudaGetSymbolAddress(&p, vals));
    TRY(cudaMemcpy(p, h, sizeof h, cudaMemcpyHostToDevice));
    CK(cudaFree(out));
    BUG_DONE();
}
