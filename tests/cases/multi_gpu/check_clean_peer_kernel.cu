// gpusan-case: check
// expect: clean
// expect-leak: none
// compute-sanitizer: no
// what: with peer access on, a kernel on device 0 fills a buffer of device 1 to its last
//       element, and device 1 reads it back: every access inside its allocation
#include "../case.h"
__global__ void fill_peer(int* p, int n, int v) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = v + i;
}
int main() {
    int devices = 0, can = 0;
    CK(cudaGetDeviceCount(&devices));
    if (devices < 2) { printf("FAIL needs 2 GPUs\n"); return 1; }
    CK(cudaDeviceCanAccessPeer(&can, 0, 1));
    if (!can) { printf("FAIL no peer access 0 -> 1\n"); return 1; }
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
