// gpusan-case: check
// expect: clean
// expect-leak: none
// compute-sanitizer: no
// what: clean twin of check_use_after_free_pool: an explicit pool with a release threshold
//       (memory stays in the pool), blocks from cudaMallocFromPoolAsync freed and allocated
//       again (natively the same memory: the case prints whether it was), each kernel using
//       only the live block; the pool trimmed, then destroyed right after its last frees
//       (gpusan still holds them in quarantine and must give them back first)
#include "case.h"
__global__ void fill(int* p, int n, int v) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) p[i] = v + i;
}
__global__ void sum(const int* p, int n, unsigned long long* out) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        atomicAdd(out, (unsigned long long)p[i]);
}
int main() {
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    cudaMemPoolProps props = {};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    cudaMemPool_t pool;
    CK(cudaMemPoolCreate(&pool, &props));
    uint64_t threshold = UINT64_MAX;
    CK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
    unsigned long long* out;
    CK(cudaMalloc(&out, sizeof *out));
    CK(cudaMemset(out, 0, sizeof *out));
    const int n = 1024;
    unsigned long long expect = 0;
    int* first = nullptr;
    bool reused = false;
    for (int r = 0; r < 50; r++) {
        int* p;
        CK(cudaMallocFromPoolAsync(&p, n * sizeof(int), pool, s));
        if (r == 0) first = p;
        reused |= r > 0 && p == first;
        fill<<<4, 128, 0, s>>>(p, n, r);
        sum<<<4, 128, 0, s>>>(p, n, out);
        expect += (unsigned long long)n * r + (unsigned long long)n * (n - 1) / 2;
        CK(cudaFreeAsync(p, s));
        if (r == 25) CK(cudaMemPoolTrimTo(pool, 0));
    }
    printf("same address again: %d\n", reused);
    unsigned long long got = 0;
    CK(cudaMemcpyAsync(&got, out, sizeof got, cudaMemcpyDeviceToHost, s));
    CK(cudaStreamSynchronize(s));
    CK(cudaMemPoolDestroy(pool));
    CK(cudaFree(out));
    CK(cudaStreamDestroy(s));
    DONE(got == expect);
}
