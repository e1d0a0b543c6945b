// A long-running CUDA program with two bugs early on (an off-by-one write in a kernel, a
// double free), then minutes of clean kernels: `gpusan run` is sent SIGTERM while those
// run. argv[1]: a file the program writes its pid into once the bugs are behind it.
#include <cstdio>
#include <cuda_runtime.h>
#include <ctime>
#include <unistd.h>

__global__ void fill(int *p, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= n) p[i] = i;  // the bug: i == n writes one past the end
}

__global__ void spin(float *p, int n, int rounds) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        for (int r = 0; r < rounds; r++) p[i] = p[i] * 0.999f + 1.0f;
}

int main(int argc, char **argv) {
    const int n = 1000;
    int *a, *b;
    cudaMalloc(&a, n * sizeof(int));
    cudaMalloc(&b, n * sizeof(int));
    fill<<<(n + 1 + 255) / 256, 256>>>(a, n);
    cudaDeviceSynchronize();
    cudaFree(b);
    cudaFree(b);  // the second bug: a double free
    float *f;
    cudaMalloc(&f, (1 << 20) * sizeof(float));
    cudaMemset(f, 0, (1 << 20) * sizeof(float));
    cudaDeviceSynchronize();
    if (argc > 1) {
        FILE *ready = fopen(argv[1], "w");
        fprintf(ready, "%d\n", (int)getpid());
        fclose(ready);
    }
    // Two minutes of kernels: the signal (or --timeout) comes long before the end.
    time_t start = time(nullptr);
    for (int k = 0; time(nullptr) - start < 120; k++) {
        spin<<<(1 << 20) / 256, 256>>>(f, 1 << 20, 64);
        if (k % 64 == 0) cudaDeviceSynchronize();
    }
    cudaDeviceSynchronize();
    printf("finished\n");
    return 0;
}
