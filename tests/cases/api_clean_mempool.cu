// gpusan-case: api
// expect: clean
// expect-leak: none
// compute-sanitizer: no
// what: an explicit memory pool (cudaMemPoolCreate, release threshold set), 100 rounds of
//       cudaMallocFromPoolAsync / copies / cudaFreeAsync, then cudaMemPoolDestroy
#include "case.h"
int main() {
    cudaMemPoolProps props = {};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    cudaMemPool_t pool;
    CK(cudaMemPoolCreate(&pool, &props));
    uint64_t threshold = 64 << 20;
    CK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    static unsigned char h[65536], back[65536];
    bool ok = true;
    for (int r = 0; r < 100; r++) {
        size_t n = 1024 + (size_t)r * 600;
        fill(h, n, r);
        void *a, *b;
        CK(cudaMallocFromPoolAsync(&a, n, pool, s));
        CK(cudaMallocFromPoolAsync(&b, n, pool, s));
        CK(cudaMemcpyAsync(a, h, n, cudaMemcpyHostToDevice, s));
        CK(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice, s));
        CK(cudaMemcpyAsync(back, b, n, cudaMemcpyDeviceToHost, s));
        CK(cudaFreeAsync(a, s));
        CK(cudaFreeAsync(b, s));
        CK(cudaStreamSynchronize(s));
        ok &= memcmp(h, back, n) == 0;
    }
    CK(cudaStreamDestroy(s));
    CK(cudaMemPoolDestroy(pool));
    DONE(ok);
}
