// gpusan-case: check
// expect: clean
// expect-leak: none
// compute-sanitizer: no
// what: a __device__ function takes a generic pointer and is called on __shared__, global and
//       local arrays (the same instructions reach three state spaces); all in bounds
#include "case.h"
__device__ __noinline__ float total(const float* p, int n) {
    float s = 0;
    for (int i = 0; i < n; i++) s += p[i];
    return s;
}
__device__ __noinline__ void scale(float* p, int n, float k) {
    for (int i = 0; i < n; i++) p[i] *= k;
}
__global__ void k(float* g, float* out, int n) {
    __shared__ float sh[64];
    float loc[16];
    int t = threadIdx.x;
    sh[t] = (float)t;
    for (int i = 0; i < 16; i++) loc[i] = (float)(i + t);
    __syncthreads();
    float* sel = (t % 3 == 0) ? sh : (t % 3 == 1) ? g : loc;  // generic: decided per thread
    int len = (t % 3 == 2) ? 16 : 64;
    float s = total(sel, len);
    scale(loc, 16, 2.0f);
    out[t] = s + total(loc, 16);
}
int main() {
    float h[64], res[64];
    for (int i = 0; i < 64; i++) h[i] = 1.0f;
    float *g, *out;
    CK(cudaMalloc(&g, sizeof h));
    CK(cudaMalloc(&out, sizeof res));
    CK(cudaMemcpy(g, h, sizeof h, cudaMemcpyHostToDevice));
    k<<<1, 64>>>(g, out, 64);
    CK(cudaMemcpy(res, out, sizeof res, cudaMemcpyDeviceToHost));
    bool ok = true;
    for (int t = 0; t < 64; t++) {
        float loc = 16.0f * t + 120.0f;  // sum of i + t for i < 16
        float s = (t % 3 == 0) ? 2016.0f : (t % 3 == 1) ? 64.0f : loc;
        ok &= res[t] == s + 2.0f * loc;
    }
    CK(cudaFree(g));
    CK(cudaFree(out));
    DONE(ok);
}
