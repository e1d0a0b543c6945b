// A finding as a user reads it (issue 16, readable findings): a C++ program built with
// `nvcc -g -lineinfo` whose template kernel writes one element past its buffer and whose
// host code copies past the same buffer. The report must name the device source line, the
// host file:line of the allocation, the launch and the copy, with no mangled name.
// The `LINE:` comments mark the lines readable_findings.sh looks for.
#include <cstdio>
#include <cuda_runtime.h>

template <typename T>
__global__ void scale(T *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= n) out[i] = T(2) * T(i);  // LINE:oob (one past the end: `<=`)
}

int main() {
    const int n = 256;
    float *d = nullptr;
    if (cudaMalloc(&d, n * sizeof(float)) != cudaSuccess) return 2;  // LINE:alloc
    scale<float><<<3, 128>>>(d, n);  // LINE:launch
    cudaError_t launched = cudaDeviceSynchronize();
    static float host[n + 8] = {};
    cudaError_t copied = cudaMemcpy(d, host, (n + 8) * sizeof(float), cudaMemcpyHostToDevice);  // LINE:copy
    std::printf("launch=%s copy=%s\n", cudaGetErrorName(launched), cudaGetErrorName(copied));
    cudaFree(d);
    return 0;
}
