// gpusan-case: api
// expect: clean
// expect-leak: none
// compute-sanitizer: no
// what: cudaMemcpyPeer of whole buffers: device 0 to device 0 always; device 0 to device 1 and
//       back when a second GPU exists (skipped, and said so, on one GPU)
#include "case.h"
int main() {
    const size_t n = 1 << 16;
    static unsigned char h[n], back[n];
    fill(h, n);
    int devices = 0;
    CK(cudaGetDeviceCount(&devices));
    void *a, *b;
    CK(cudaMalloc(&a, n));
    CK(cudaMalloc(&b, n));
    CK(cudaMemcpy(a, h, n, cudaMemcpyHostToDevice));
    CK(cudaMemcpyPeer(b, 0, a, 0, n));
    CK(cudaMemcpy(back, b, n, cudaMemcpyDeviceToHost));
    bool ok = memcmp(h, back, n) == 0;
    if (devices >= 2) {
        void* c;
        CK(cudaSetDevice(1));
        CK(cudaMalloc(&c, n));
        CK(cudaSetDevice(0));
        CK(cudaMemcpyPeer(c, 1, a, 0, n));
        CK(cudaMemset(b, 0, n));
        CK(cudaMemcpyPeerAsync(b, 0, c, 1, n, 0));
        CK(cudaMemcpy(back, b, n, cudaMemcpyDeviceToHost));
        ok = ok && memcmp(h, back, n) == 0;
        CK(cudaSetDevice(1));
        CK(cudaFree(c));
        CK(cudaSetDevice(0));
        printf("peer copy across 2 GPUs done\n");
    } else {
        printf("one GPU: cross-device peer copy skipped\n");
    }
    CK(cudaFree(a));
    CK(cudaFree(b));
    DONE(ok);
}
