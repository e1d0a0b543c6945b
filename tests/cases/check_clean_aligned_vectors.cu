// gpusan-case: check
// expect: clean
// expect-leak: none
// compute-sanitizer: no
// what: vector accesses at every alignment they allow: float4 loads of 16-byte aligned
//       sub-views (p + 4k) ending at the buffer's last byte, float2 loads at odd float2
//       indices (8-byte aligned, not 16), double and int4 stores, char4 reads at 4-byte
//       steps, a float4 walk through shared memory and a local float4 array; the results
//       are compared with the host's
#include "case.h"
__global__ void k(const float* p, int n, double* d, int4* q, const char4* c, float* out) {
    __shared__ float4 tile[64];
    int t = threadIdx.x;
    float s = 0;
    // float4 sub-views starting at p + 4k, up to the last whole float4 of n floats.
    for (int v = t; v < n / 4; v += blockDim.x) {
        float4 x = reinterpret_cast<const float4*>(p)[v];
        s += x.x + x.y + x.z + x.w;
    }
    // float2 at odd indices: p + 2 * (2i + 1) is 8-byte aligned, not 16.
    for (int i = t; 4 * i + 4 <= n; i += blockDim.x) {
        float2 y = reinterpret_cast<const float2*>(p)[2 * i + 1];
        s += y.x - y.y;
    }
    for (int i = t; i < 64; i += blockDim.x) tile[i] = make_float4(i, i + 1, i + 2, i + 3);
    __syncthreads();
    float4 loc[8];
    for (int i = 0; i < 8; i++) loc[(i * 3 + t) & 7] = tile[(t + 8 * i) & 63];
    float4 l = loc[(t * 5) & 7];
    s += l.x + l.y + l.z + l.w;
    d[t] = (double)s;
    q[t] = make_int4(t, t + 1, t + 2, t + 3);
    char4 ch = c[t];
    out[t] = s + ch.x + ch.y + ch.z + ch.w;
}
int main() {
    const int n = 252, threads = 32;  // 63 float4s exactly: the last ends at the last byte
    float h[n];
    for (int i = 0; i < n; i++) h[i] = (float)(i % 7);
    float *p, *out, got[threads];
    double* d;
    int4* q;
    char4* c;
    CK(cudaMalloc(&p, sizeof h));
    CK(cudaMalloc(&d, threads * sizeof(double)));
    CK(cudaMalloc(&q, threads * sizeof(int4)));
    CK(cudaMalloc(&c, threads * sizeof(char4)));
    CK(cudaMalloc(&out, sizeof got));
    CK(cudaMemcpy(p, h, sizeof h, cudaMemcpyHostToDevice));
    CK(cudaMemset(c, 1, threads * sizeof(char4)));
    k<<<1, threads>>>(p, n, d, q, c, out);
    CK(cudaMemcpy(got, out, sizeof got, cudaMemcpyDeviceToHost));
    bool ok = true;
    for (int t = 0; t < threads; t++) {
        float s = 0;
        for (int v = t; v < n / 4; v += threads) s += h[4 * v] + h[4 * v + 1] + h[4 * v + 2] + h[4 * v + 3];
        for (int i = t; 4 * i + 4 <= n; i += threads) s += h[4 * i + 2] - h[4 * i + 3];
        float tile[64][4], loc[8][4];
        for (int i = 0; i < 64; i++)
            for (int j = 0; j < 4; j++) tile[i][j] = (float)(i + j);
        for (int i = 0; i < 8; i++)
            for (int j = 0; j < 4; j++) loc[(i * 3 + t) & 7][j] = tile[(t + 8 * i) & 63][j];
        for (int j = 0; j < 4; j++) s += loc[(t * 5) & 7][j];
        ok = ok && got[t] == s + 4;
    }
    CK(cudaFree(p));
    CK(cudaFree(d));
    CK(cudaFree(q));
    CK(cudaFree(c));
    CK(cudaFree(out));
    DONE(ok);
}
