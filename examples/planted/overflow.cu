// gpusan's demo program (scripts/demo.sh): a small CUDA program with ONE PLANTED BUG.
//
// PLANTED BUG, on the line marked `BUG` below: `scale` guards its write with `i <= n`
// instead of `i < n`, so thread n writes one float past the end of `out` (on the next line,
// which is where gpusan reports it).
//
// `out` and `weights` are allocated one after the other, and the CUDA allocator places
// small allocations back to back: the float past `out` is `weights[0]`. The stray write
// lands in another live allocation, so compute-sanitizer's memcheck sees an access to valid
// memory and reports nothing, and the program silently computes with a changed weight.
// gpusan checks each access against the allocation its pointer came from and reports the
// write: kernel, thread, address, the allocation it ran past, and this file's line.
//
// Build: nvcc -g -lineinfo -o overflow overflow.cu     Run: gpusan run -- ./overflow
#include <cstdio>
#include <cuda_runtime.h>

__global__ void scale(float *out, const float *in, float factor, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= n)                               // BUG: should be i < n
        out[i] = in[i < n ? i : 0] * factor;  // the write gpusan reports: thread n writes out[n]
}

static int check(cudaError_t e, const char *what) {
    if (e != cudaSuccess) {
        std::printf("%s failed: %s\n", what, cudaGetErrorString(e));
        return 1;
    }
    return 0;
}

int main() {
    const int n = 256;
    float host[n];
    for (int i = 0; i < n; i++) host[i] = 1.0f;
    float *in = nullptr, *out = nullptr, *weights = nullptr;
    if (check(cudaMalloc(&in, n * sizeof(float)), "cudaMalloc in") ||
        check(cudaMalloc(&out, n * sizeof(float)), "cudaMalloc out") ||
        check(cudaMalloc(&weights, n * sizeof(float)), "cudaMalloc weights"))
        return 2;
    if (check(cudaMemcpy(in, host, sizeof host, cudaMemcpyHostToDevice), "cudaMemcpy in") ||
        check(cudaMemcpy(weights, host, sizeof host, cudaMemcpyHostToDevice), "cudaMemcpy weights"))
        return 2;

    scale<<<(n + 127) / 128 + 1, 128>>>(out, in, 3.0f, n);  // enough threads to reach i == n
    if (check(cudaDeviceSynchronize(), "scale")) return 3;

    float w0 = 0.0f;
    if (check(cudaMemcpy(&w0, weights, sizeof w0, cudaMemcpyDeviceToHost), "cudaMemcpy weights[0]")) return 2;
    std::printf("out ends at %p, weights starts at %p (%s)\n", (void *)(out + n), (void *)weights,
                out + n == weights ? "adjacent: the stray write hits weights[0]" : "not adjacent");
    std::printf("weights[0] = %g (it should still be 1)\n", w0);
    cudaFree(in);
    cudaFree(out);
    cudaFree(weights);
    return 0;
}
