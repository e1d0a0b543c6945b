// gpusan-case: check
// expect: clean
// expect-leak: none
// compute-sanitizer: no
// what: with peer access on, a kernel on device 0 fills a buffer of device 1 to its last
//       element, and device 1 reads it back: every access inside its allocation
#include "peer.h"
__global__ void fill_peer(int* p, int n, int v) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = v + i;
}
int main() {
    NEED_PEER_ACCESS();
    const int n = 1 << 20;
    int* remote;
    CK(cudaSetDevice(1));
    CK(cudaMalloc(&remote, n * sizeof(int)));
    CK(cudaSetDevice(0));
    CK(cudaDeviceEnablePeerAccess(1, 0));
    fill_peer<<<(n + 255) / 256, 256>>>(remote, n, 7);
    CK(cudaDeviceSynchronize());
    static int back[1 << 20];
    CK(cudaMemcpy(back, remote, n * sizeof(int), cudaMemcpyDeviceToHost));
    bool ok = back[0] == 7 && back[n - 1] == 7 + n - 1;
    CK(cudaSetDevice(1));
    CK(cudaFree(remote));
    CK(cudaSetDevice(0));
    DONE(ok);
}
