// A CUDA program run under a user's LD_PRELOAD shim that forwards getenv through
// dlsym(RTLD_NEXT) (crates/cli/tests/fake_cuda/getenv_shim.c): prints what getenv answers,
// then runs a kernel, in bounds or (argv[1] == "bug") one element past the end.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

__global__ void scale(float *p, int n, int extra) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n + extra) p[i] = 2.0f * i;
}

int main(int argc, char **argv) {
    const char *probe = getenv("GETENV_SHIM_PROBE"), *home = getenv("HOME");
    printf("%s %s\n", probe ? probe : "(unset)", home ? home : "(unset)");
    int extra = argc > 1 && strcmp(argv[1], "bug") == 0 ? 1 : 0;
    const int n = 4096;
    float *d, h[n];
    cudaMalloc(&d, n * sizeof(float));
    scale<<<(n + 255) / 256 + 1, 256>>>(d, n, extra);
    cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost);
    cudaFree(d);
    for (int i = 0; i < n; i++)
        if (h[i] != 2.0f * i) { printf("wrong result at %d\n", i); return 1; }
    printf("ok\n");
    return 0;
}
