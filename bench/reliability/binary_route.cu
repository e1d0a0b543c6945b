// The binary route's first cases (issue 14), built machine-code only
// (`-gencode arch=compute_90,code=sm_90`: no PTX, so only the Compute Sanitizer patching
// route can check it). One streaming kernel, y[i] = a * x[i] + y[i] for i < touched, over
// 16M floats, launched 7 times, each launch timed with CUDA events (the median printed as
// kernel_ms=…); every thread also makes a generic access into shared or local memory
// (`touch`), which the binary route must not report. The scenario decides the buffers:
//   clean       x and y of n floats, touched = n: no error;
//   tail        y of n - 24 floats, touched = n - 23: one write 0 bytes past y's end, in the
//               96 bytes before the next 256-byte boundary (no allocation can start there);
//   neighbour   y of n floats and z allocated right after (adjacent=1 when z == y + n);
//               touched = n + 1: one write past y's end lands on z[0], a live neighbour;
//   reuse       x freed, then y2 allocated with x's size (reused=1 when the driver hands
//               x's address out again); the kernel reads the stale x: a use after free
//               that natively reads y2's memory.
// Prints `scenario=… kernel_ms=… [facts]`, and `ok` last when the program itself finished.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <cuda_runtime.h>
#include <vector>

// A generic access (the callee cannot know the space): into the block's shared memory for
// odd threads, the thread's local frame for even ones. Neither is in any allocation, and
// the binary route must stay silent about both (and not count them as unknown memory).
__device__ __noinline__ float touch(float *p, int i) {
    p[i] = 1.0f;
    return p[i];
}

__global__ void saxpy(const float *x, float *y, int touched, float a) {
    __shared__ float tile[64];
    float frame[8];
    float *g = (threadIdx.x & 1) ? tile : frame;
    float one = touch(g, threadIdx.x & 7);
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < touched) y[i] = a * x[i] + y[i] + (one - 1.0f);
}

#define CK(call)                                                                   \
    do {                                                                           \
        cudaError_t e_ = (call);                                                   \
        if (e_ != cudaSuccess) {                                                   \
            printf("fail: %s: %s\n", #call, cudaGetErrorString(e_));               \
            return 1;                                                              \
        }                                                                          \
    } while (0)

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    const char *s = argv[1];
    const int n = 1 << 24, reps = 7;
    size_t bytes = (size_t)n * sizeof(float);
    float *x = 0, *y = 0, *z = 0, *y2 = 0;
    int touched = n;
    char facts[128] = "";
    if (!strcmp(s, "clean")) {
        CK(cudaMalloc(&x, bytes));
        CK(cudaMalloc(&y, bytes));
    } else if (!strcmp(s, "tail")) {
        CK(cudaMalloc(&x, bytes));
        CK(cudaMalloc(&y, bytes - 24 * sizeof(float)));
        touched = n - 23;
    } else if (!strcmp(s, "neighbour")) {
        CK(cudaMalloc(&x, bytes + sizeof(float)));
        CK(cudaMalloc(&y, bytes));
        CK(cudaMalloc(&z, bytes));
        CK(cudaMemset(z, 0, bytes));
        snprintf(facts, sizeof facts, " adjacent=%d", z == y + n);
        touched = n + 1;
    } else if (!strcmp(s, "reuse")) {
        float *stale;
        CK(cudaMalloc(&stale, bytes));
        CK(cudaFree(stale));
        CK(cudaMalloc(&y2, bytes));
        CK(cudaMemset(y2, 0, bytes));
        CK(cudaMalloc(&y, bytes));
        snprintf(facts, sizeof facts, " reused=%d", y2 == stale);
        x = stale;
    } else {
        return 2;
    }
    // The stale pointer is never touched by the host: only the kernel's read is the bug.
    if (strcmp(s, "reuse")) CK(cudaMemset(x, 0, std::min(bytes, (size_t)touched * sizeof(float))));
    CK(cudaMemset(y, 0, !strcmp(s, "tail") ? bytes - 24 * sizeof(float) : bytes));
    cudaEvent_t start, stop;
    CK(cudaEventCreate(&start));
    CK(cudaEventCreate(&stop));
    std::vector<float> ms;
    for (int r = 0; r < reps; r++) {
        CK(cudaEventRecord(start));
        saxpy<<<(touched + 255) / 256, 256>>>(x, y, touched, 2.0f);
        CK(cudaEventRecord(stop));
        CK(cudaEventSynchronize(stop));
        float t = 0;
        CK(cudaEventElapsedTime(&t, start, stop));
        ms.push_back(t);
    }
    CK(cudaDeviceSynchronize());
    std::sort(ms.begin(), ms.end());
    printf("scenario=%s kernel_ms=%.4f%s\n", s, ms[reps / 2], facts);
    CK(cudaFree(y));
    if (z) CK(cudaFree(z));
    if (y2) CK(cudaFree(y2));
    if (x && !y2) CK(cudaFree(x));
    printf("ok\n");
    return 0;
}
