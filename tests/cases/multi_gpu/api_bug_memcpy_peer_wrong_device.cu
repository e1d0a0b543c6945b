// gpusan-case: api
// expect: device_mismatch
// expect-leak: none
// compute-sanitizer: no
// native: may-fail
// what: cudaMemcpyPeer names the devices swapped: device 0 for a destination allocated on
//       device 1 and device 1 for a source on device 0 (with unified addressing the driver
//       may copy anyway, to where the addresses really are)
#include "../case.h"
int main() {
    int devices = 0;
    CK(cudaGetDeviceCount(&devices));
    if (devices < 2) { printf("FAIL needs 2 GPUs\n"); return 1; }
    const size_t n = 4096;
    void *a, *c;
    CK(cudaSetDevice(1));
    CK(cudaMalloc(&c, n));
    CK(cudaSetDevice(0));
    CK(cudaMalloc(&a, n));
    TRY(cudaMemcpyPeer(c, 0, a, 1, n));
    CK(cudaDeviceSynchronize());
    CK(cudaFree(a));
    CK(cudaSetDevice(1));
    CK(cudaFree(c));
    BUG_DONE();
}
