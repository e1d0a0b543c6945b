// gpusan-case: check
// expect: clean
// expect-leak: none
// compute-sanitizer: no
// what: float4 loads up to the last whole vector of a 1020-byte buffer (bytes 992..1007) and
//       scalar loads for the 3-float tail: every byte read is inside the buffer
#include "case.h"
__global__ void sum(const float* p, int n, float* out) {
    int t = threadIdx.x, vecs = n / 4;
    float s = 0;
    for (int v = t; v < vecs; v += blockDim.x) {
        float4 q = reinterpret_cast<const float4*>(p)[v];
        s += q.x + q.y + q.z + q.w;
    }
    if (t == 0)
        for (int i = vecs * 4; i < n; i++) s += p[i];
    atomicAdd(out, s);
}
int main() {
    const int n = 255;
    float h[n];
    for (int i = 0; i < n; i++) h[i] = 1.0f;
    float *d, *out, got = 0;
    CK(cudaMalloc(&d, n * sizeof(float)));
    CK(cudaMalloc(&out, sizeof(float)));
    CK(cudaMemset(out, 0, sizeof(float)));
    CK(cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice));
    sum<<<1, 32>>>(d, n, out);
    CK(cudaMemcpy(&got, out, sizeof got, cudaMemcpyDeviceToHost));
    CK(cudaFree(d));
    CK(cudaFree(out));
    DONE(got == (float)n);
}
