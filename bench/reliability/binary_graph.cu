// Patched kernels launched through CUDA graphs (issue 14's binary route), built
// machine-code only. Every kernel here runs in graphs: captured from a stream (with a
// stream-ordered allocation inside the capture: memory nodes), uploaded before the first
// launch, and added as a kernel node by hand; `scale` is also launched directly, before
// and after. `./prog clean` prints a checksum of what the graphs computed, then "ok";
// `./prog oob` does the same with the captured `saxpy` writing one float past the end of
// its output (inside the allocation's 256-byte tail: natively silent, it must be found).
#include <cstdio>
#include <cstring>
#include <cuda_runtime.h>

#define CHECK(x)                                                                                  \
    do {                                                                                          \
        cudaError_t e_ = (x);                                                                     \
        if (e_ != cudaSuccess) {                                                                  \
            std::printf("CUDA error %s at line %d: %s\n", cudaGetErrorName(e_), __LINE__, #x);    \
            return 1;                                                                             \
        }                                                                                         \
    } while (0)

__global__ void fill(float *x, int n, float v) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = v + (float)(i % 7);
}

// `extra` is 1 in the oob scenario: the last thread writes y[n].
__global__ void saxpy(const float *x, float *y, int n, float a, int extra) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n + extra) y[i] = a * x[i < n ? i : 0] + (i < n ? y[i] : 0.0f);
}

__global__ void scale(float *y, int n, float s) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] *= s;
}

__global__ void sum(const float *y, int n, float *out) {
    __shared__ float part[256];
    float acc = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) acc += y[i];
    part[threadIdx.x] = acc;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s /= 2) {
        if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) *out += part[0];
}

int main(int argc, char **argv) {
    bool oob = argc > 1 && !std::strcmp(argv[1], "oob");
    const int n = 1000, threads = 256, blocks = (n + threads) / threads;
    float *x, *y, *out;
    CHECK(cudaMalloc(&x, n * sizeof(float)));
    CHECK(cudaMalloc(&y, n * sizeof(float)));
    CHECK(cudaMalloc(&out, sizeof(float)));
    CHECK(cudaMemset(out, 0, sizeof(float)));
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    scale<<<blocks, threads, 0, s>>>(y, 0, 1.0f);  // a direct launch of a kernel graphs launch too
    CHECK(cudaStreamSynchronize(s));

    // Captured: fill, a temporary made and freed inside the graph, saxpy, scale, sum.
    cudaGraph_t g;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    float *tmp;
    CHECK(cudaMallocAsync(&tmp, n * sizeof(float), s));
    fill<<<blocks, threads, 0, s>>>(tmp, n, 1.0f);
    fill<<<blocks, threads, 0, s>>>(y, n, 2.0f);
    saxpy<<<blocks, threads, 0, s>>>(tmp, y, n, 0.5f, oob ? 1 : 0);
    CHECK(cudaFreeAsync(tmp, s));
    scale<<<blocks, threads, 0, s>>>(y, n, 0.25f);
    sum<<<1, 256, 0, s>>>(y, n, out);
    CHECK(cudaStreamEndCapture(s, &g));
    cudaGraphExec_t e;
    CHECK(cudaGraphInstantiate(&e, g, 0));
    CHECK(cudaGraphUpload(e, s));
    for (int r = 0; r < 5; r++) CHECK(cudaGraphLaunch(e, s));
    CHECK(cudaStreamSynchronize(s));

    // Built by hand: one kernel node.
    cudaGraph_t h;
    CHECK(cudaGraphCreate(&h, 0));
    int nn = n;
    float sc = 2.0f;
    void *args[] = {&y, &nn, &sc};
    cudaKernelNodeParams p = {};
    p.func = (void *)scale;
    p.gridDim = dim3(blocks);
    p.blockDim = dim3(threads);
    p.kernelParams = args;
    cudaGraphNode_t node;
    CHECK(cudaGraphAddKernelNode(&node, h, nullptr, 0, &p));
    cudaGraphExec_t he;
    CHECK(cudaGraphInstantiate(&he, h, 0));
    CHECK(cudaGraphLaunch(he, s));
    sum<<<1, 256, 0, s>>>(y, n, out);  // direct, after the graphs
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaDeviceSynchronize());

    float total = 0;
    CHECK(cudaMemcpy(&total, out, sizeof(float), cudaMemcpyDeviceToHost));
    std::printf("sum=%.3f\n", total);
    CHECK(cudaGraphExecDestroy(he));
    CHECK(cudaGraphDestroy(h));
    CHECK(cudaGraphExecDestroy(e));
    CHECK(cudaGraphDestroy(g));
    CHECK(cudaStreamDestroy(s));
    CHECK(cudaFree(x));
    CHECK(cudaFree(y));
    CHECK(cudaFree(out));
    std::printf("ok\n");
    return 0;
}
