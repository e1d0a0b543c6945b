// gpusan run as a drop-in for compute-sanitizer (issue 16): two kernels, `oob` (thread n
// writes one int past an n-int allocation) and `good` (in bounds), launched in the order
// oob, good, oob, oob, good, oob, each synchronized. Prints `ok` when every launch and
// synchronization succeeded.
#include <cstdio>
#include <cuda_runtime.h>

__global__ void oob(int *p, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= n) p[i] = i;  // i == n writes past the end
}

__global__ void good(int *p, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = 2 * i;
}

int main() {
    const int n = 100;
    int *p = nullptr;
    if (cudaMalloc(&p, n * sizeof(int)) != cudaSuccess) return 2;
    const bool bad[6] = {true, false, true, true, false, true};
    for (bool b : bad) {
        if (b) oob<<<1, 128>>>(p, n);
        else good<<<1, 128>>>(p, n);
        cudaError_t e = cudaDeviceSynchronize();
        if (e != cudaSuccess) {
            std::printf("launch failed: %s\n", cudaGetErrorString(e));
            return 3;
        }
    }
    cudaFree(p);
    std::printf("ok\n");
    return 0;
}
