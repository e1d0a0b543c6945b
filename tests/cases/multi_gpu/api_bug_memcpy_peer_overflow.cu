// gpusan-case: api
// expect: memcpy_out_of_bounds
// expect-leak: none
// compute-sanitizer: yes
// what: cudaMemcpyPeer from device 0 to device 1 copies 64 bytes more than the device-0
//       buffer holds (it reads past the end of its source)
#include "../case.h"
int main() {
    int devices = 0;
    CK(cudaGetDeviceCount(&devices));
    if (devices < 2) { printf("FAIL needs 2 GPUs\n"); return 1; }
    const size_t n = 1 << 16;
    void *a, *c;
    CK(cudaSetDevice(1));
    CK(cudaMalloc(&c, n + 64));
    CK(cudaSetDevice(0));
    CK(cudaMalloc(&a, n));
    TRY(cudaMemcpyPeer(c, 1, a, 0, n + 64));
    CK(cudaDeviceSynchronize());
    CK(cudaFree(a));
    CK(cudaSetDevice(1));
    CK(cudaFree(c));
    BUG_DONE();
}
