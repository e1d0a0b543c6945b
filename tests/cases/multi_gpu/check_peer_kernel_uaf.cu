// gpusan-case: check
// expect: use_after_free
// expect-leak: none
// compute-sanitizer: yes
// native: may-fail
// what: device 1 frees a buffer; then a kernel on device 0 reads it through peer access
#include "peer.h"
__global__ void sum(const int* p, int n, int* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(out, p[i]);
}
int main() {
    NEED_PEER_ACCESS();
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
