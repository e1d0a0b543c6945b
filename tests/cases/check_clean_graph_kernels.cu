// gpusan-case: check
// expect: clean
// expect-leak: none
// compute-sanitizer: no
// what: a CUDA graph captured from a stream (memset, two kernels, a copy back) is launched 20
//       times; between launches other buffers are allocated and freed
#include "case.h"
__global__ void scale(float* x, int n, float a) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = x[i] * a + 1.0f;
}
__global__ void sum_pairs(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] + x[n - 1 - i];
}
int main() {
    const int n = 1 << 16;
    float *x, *y, *h;
    CK(cudaMalloc(&x, n * sizeof(float)));
    CK(cudaMalloc(&y, n * sizeof(float)));
    CK(cudaMallocHost(&h, n * sizeof(float)));
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CK(cudaMemsetAsync(x, 0, n * sizeof(float), s));
    scale<<<n / 256, 256, 0, s>>>(x, n, 2.0f);
    sum_pairs<<<n / 256, 256, 0, s>>>(x, y, n);
    CK(cudaMemcpyAsync(h, y, n * sizeof(float), cudaMemcpyDeviceToHost, s));
    CK(cudaStreamEndCapture(s, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    bool ok = true;
    for (int r = 0; r < 20; r++) {
        void* other;
        CK(cudaMalloc(&other, 4096 * (r + 1)));
        CK(cudaGraphLaunch(ge, s));
        CK(cudaStreamSynchronize(s));
        CK(cudaFree(other));
        ok &= h[0] == 2.0f && h[n - 1] == 2.0f;
    }
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(g));
    CK(cudaStreamDestroy(s));
    CK(cudaFree(x));
    CK(cudaFree(y));
    CK(cudaFreeHost(h));
    DONE(ok);
}
