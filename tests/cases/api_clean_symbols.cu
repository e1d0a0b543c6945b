// gpusan-case: api
// expect: clean
// expect-leak: none
// compute-sanitizer: no
// what: in-bounds copies to and from __device__ / __constant__ variables: cudaMemcpyToSymbol
//       of the whole array and of its last 16 bytes (offset), cudaMemcpyFromSymbol, and
//       cudaMemcpy through cudaGetSymbolAddress; a kernel reads them
#include "case.h"
__device__ float table[256];
__constant__ int coeffs[16];
__global__ void combine(float* out) {
    int i = threadIdx.x;
    out[i] = table[i] * coeffs[i % 16];
}
int main() {
    static float h[256], back[256];
    int c[16];
    for (int i = 0; i < 256; i++) h[i] = 0.5f * i;
    for (int i = 0; i < 16; i++) c[i] = i + 1;
    CK(cudaMemcpyToSymbol(table, h, sizeof h));
    CK(cudaMemcpyToSymbol(table, h + 252, 16, 252 * sizeof(float)));
    CK(cudaMemcpyToSymbol(coeffs, c, sizeof c));
    float* p;
    CK(cudaGetSymbolAddress((void**)&p, table));
    size_t size = 0;
    CK(cudaGetSymbolSize(&size, table));
    CK(cudaMemcpy(p, h, size, cudaMemcpyHostToDevice));
    CK(cudaMemcpyFromSymbol(back, table, sizeof back));
    bool ok = memcmp(h, back, sizeof h) == 0;
    float* out;
    CK(cudaMalloc(&out, 256 * sizeof(float)));
    combine<<<1, 256>>>(out);
    CK(cudaMemcpy(back, out, sizeof back, cudaMemcpyDeviceToHost));
    for (int i = 0; i < 256; i++) ok &= back[i] == h[i] * c[i % 16];
    CK(cudaFree(out));
    DONE(ok);
}
