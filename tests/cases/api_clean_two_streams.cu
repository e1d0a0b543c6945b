// gpusan-case: api
// expect: clean
// expect-leak: none
// compute-sanitizer: no
// what: two streams working at once on disjoint halves of one buffer (copies in, a kernel,
//       copies out, each in its half's bounds), the default stream synchronizing both
#include "case.h"
__global__ void scale(float* p, int n, float k) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] *= k;
}
int main() {
    const int n = 1 << 16, half = n / 2;
    float *h, *d;
    CK(cudaMallocHost(&h, n * sizeof(float)));
    CK(cudaMalloc(&d, n * sizeof(float)));
    for (int i = 0; i < n; i++) h[i] = (float)i;
    cudaStream_t s[2];
    for (int k = 0; k < 2; k++) CK(cudaStreamCreate(&s[k]));
    for (int k = 0; k < 2; k++) {
        float* part = d + k * half;
        CK(cudaMemcpyAsync(part, h + k * half, half * sizeof(float), cudaMemcpyHostToDevice, s[k]));
        scale<<<(half + 255) / 256, 256, 0, s[k]>>>(part, half, 2.0f + k);
        CK(cudaMemcpyAsync(h + k * half, part, half * sizeof(float), cudaMemcpyDeviceToHost, s[k]));
    }
    CK(cudaDeviceSynchronize());
    bool ok = true;
    for (int i = 0; i < n; i++) ok &= h[i] == (float)i * (i < half ? 2.0f : 3.0f);
    for (int k = 0; k < 2; k++) CK(cudaStreamDestroy(s[k]));
    CK(cudaFree(d));
    CK(cudaFreeHost(h));
    DONE(ok);
}
