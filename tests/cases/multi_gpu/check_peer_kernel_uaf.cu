// gpusan-case: check
// expect: use_after_free
// expect-leak: none
// compute-sanitizer: yes
// native: may-fail
// what: device 1 frees a buffer; then a kernel on device 0 reads it through peer access
#include "../case.h"
__global__ void sum(const int* p, int n, int* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(out, p[i]);
}
int main() {
    int devices = 0, can = 0;
    CK(cudaGetDeviceCount(&devices));
    if (devices < 2) { printf("FAIL needs 2 GPUs\n"); return 1; }
    CK(cudaDeviceCanAccessPeer(&can, 0, 1));
    if (!can) { printf("FAIL no peer access 0 -> 1\n"); return 1; }
    const int n = 1024;
    int *remote, *out;
    CK(cudaSetDevice(1));
    CK(cudaMalloc(&remote, n * sizeof(int)));
    CK(cudaMemset(remote, 0, n * sizeof(int)));
    CK(cudaFree(remote));
    CK(cudaSetDevice(0));
    CK(cudaDeviceEnablePeerAccess(1, 0));
    CK(cudaMalloc(&out, sizeof(int)));
    sum<<<4, 256>>>(remote, n, out);
    cudaError_t e = cudaDeviceSynchronize();
    printf("bug kernel -> %s\n", cudaGetErrorName(e));
    cudaFree(out);
    BUG_DONE();
}
