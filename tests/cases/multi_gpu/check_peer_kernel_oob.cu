// gpusan-case: check
// expect: out_of_bounds_write
// expect-leak: none
// compute-sanitizer: yes
// what: with peer access on, a kernel on device 0 writes one int past the end of a buffer of
//       device 1 (the grid is one thread too many, and no bound check)
#include "peer.h"
__global__ void fill_peer(int* p, int v) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    p[i] = v;
}
int main() {
    NEED_PEER_ACCESS();
    const int n = 255;
    int* remote;
    CK(cudaSetDevice(1));
    CK(cudaMalloc(&remote, n * sizeof(int)));
    CK(cudaSetDevice(0));
    CK(cudaDeviceEnablePeerAccess(1, 0));
    fill_peer<<<1, 256>>>(remote, 7);
    cudaError_t e = cudaDeviceSynchronize();
    printf("bug kernel -> %s\n", cudaGetErrorName(e));
    CK(cudaSetDevice(1));
    CK(cudaFree(remote));
    CK(cudaSetDevice(0));
    BUG_DONE();
}
