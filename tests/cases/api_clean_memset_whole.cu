// gpusan-case: api
// expect: clean
// expect-leak: none
// compute-sanitizer: no
// what: cudaMemset and cudaMemsetAsync of whole buffers (odd sizes), a kernel then checks them
#include "case.h"
__global__ void count(const unsigned char* p, size_t n, unsigned char v, unsigned* bad) {
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        if (p[i] != v) atomicAdd(bad, 1u);
}
int main() {
    const size_t n = (1 << 20) + 3;
    unsigned char *a, *b;
    unsigned* bad;
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    CK(cudaMalloc(&a, n));
    CK(cudaMalloc(&b, 777));
    CK(cudaMalloc(&bad, sizeof(unsigned)));
    CK(cudaMemset(bad, 0, sizeof(unsigned)));
    CK(cudaMemset(a, 0xab, n));
    CK(cudaMemsetAsync(b, 0xcd, 777, s));
    CK(cudaStreamSynchronize(s));
    count<<<64, 256>>>(a, n, 0xab, bad);
    count<<<1, 256>>>(b, 777, 0xcd, bad);
    unsigned h = 1;
    CK(cudaMemcpy(&h, bad, sizeof h, cudaMemcpyDeviceToHost));
    CK(cudaFree(a));
    CK(cudaFree(b));
    CK(cudaFree(bad));
    CK(cudaStreamDestroy(s));
    DONE(h == 0);
}
