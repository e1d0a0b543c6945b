// gpusan-case: check
// expect: use_after_free
// expect-leak: none
// compute-sanitizer: no
// what: an explicit memory pool with a release threshold (memory stays in the pool): a block
//       from cudaMallocFromPoolAsync is freed, a block of the same size allocated from the
//       pool, and a kernel reads through the stale pointer (natively: the new block's data)
#include "case.h"
__global__ void peek(const int* p, int* out) { out[threadIdx.x] = p[threadIdx.x]; }
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
    int *a, *b, *out;
    CK(cudaMalloc(&out, 128));
    CK(cudaMallocFromPoolAsync(&a, 4096, pool, s));
    CK(cudaFreeAsync(a, s));
    CK(cudaMallocFromPoolAsync(&b, 4096, pool, s));
    printf("same address: %d\n", a == b);
    peek<<<1, 32, 0, s>>>(a, out);
    CK(cudaStreamSynchronize(s));
    CK(cudaFreeAsync(b, s));
    CK(cudaStreamSynchronize(s));
    CK(cudaFree(out));
    CK(cudaMemPoolDestroy(pool));
    BUG_DONE();
}
