// Kernels run through a CUDA graph and directly, for the report's coverage (issue 13): the
// program knows how often each ran (printed on its last line), and gpusan's coverage must
// count the same, once per graph replay, not once at capture.
#include <cstdio>
#include <cuda_runtime.h>

template <typename T>
__global__ void scale(T *x, T a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}

extern "C" __global__ void add_one(float *x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += 1.0f;
}

#define CK(call)                                                                   \
    do {                                                                           \
        cudaError_t e_ = (call);                                                   \
        if (e_ != cudaSuccess) {                                                   \
            printf("fail: %s: %s\n", #call, cudaGetErrorString(e_));               \
            return 1;                                                              \
        }                                                                          \
    } while (0)

int main() {
    const int n = 1 << 16, replays = 50, direct = 3;
    float *x;
    CK(cudaMalloc(&x, n * sizeof(float)));
    CK(cudaMemset(x, 0, n * sizeof(float)));
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaGraph_t g;
    cudaGraphExec_t e;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    add_one<<<n / 256, 256, 0, s>>>(x, n);
    add_one<<<n / 256, 256, 0, s>>>(x, n);
    scale<float><<<n / 256, 256, 0, s>>>(x, 1.0f, n);
    CK(cudaStreamEndCapture(s, &g));
    CK(cudaGraphInstantiate(&e, g, 0));
    for (int i = 0; i < replays; i++) CK(cudaGraphLaunch(e, s));
    for (int i = 0; i < direct; i++) scale<float><<<n / 256, 256, 0, s>>>(x, 1.0f, n);
    CK(cudaGetLastError());
    CK(cudaStreamSynchronize(s));
    float h[4];
    CK(cudaMemcpy(h, x + n - 4, sizeof h, cudaMemcpyDeviceToHost));
    if (h[3] != 2.0f * replays) {
        printf("fail: x=%g, expected %g\n", h[3], 2.0f * replays);
        return 1;
    }
    CK(cudaGraphExecDestroy(e));
    CK(cudaGraphDestroy(g));
    CK(cudaStreamDestroy(s));
    CK(cudaFree(x));
    printf("ok: add_one=%d scale<float>=%d\n", 2 * replays, replays + direct);
    return 0;
}
