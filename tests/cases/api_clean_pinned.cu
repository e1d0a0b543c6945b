// gpusan-case: api
// expect: clean
// expect-leak: none
// compute-sanitizer: no
// what: pinned host memory: cudaMallocHost, cudaHostAlloc(mapped) read by a kernel through
//       its device pointer, cudaHostRegister of malloc'd memory; copies of whole buffers
#include "case.h"
#include <cstdlib>
__global__ void copy(const int* src, int* dst, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = src[i] + 1;
}
int main() {
    const int n = 10000;
    const size_t bytes = n * sizeof(int);
    int *pinned, *mapped, *mapped_dev, *d;
    CK(cudaMallocHost(&pinned, bytes));
    CK(cudaHostAlloc(&mapped, bytes, cudaHostAllocMapped));
    CK(cudaHostGetDevicePointer((void**)&mapped_dev, mapped, 0));
    CK(cudaMalloc(&d, bytes));
    for (int i = 0; i < n; i++) mapped[i] = 3 * i;
    copy<<<(n + 255) / 256, 256>>>(mapped_dev, d, n);
    CK(cudaMemcpy(pinned, d, bytes, cudaMemcpyDeviceToHost));
    bool ok = true;
    for (int i = 0; i < n; i++) ok &= pinned[i] == 3 * i + 1;
    int* reg = (int*)malloc(bytes);
    for (int i = 0; i < n; i++) reg[i] = -i;
    CK(cudaHostRegister(reg, bytes, cudaHostRegisterDefault));
    CK(cudaMemcpy(d, reg, bytes, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(pinned, d, bytes, cudaMemcpyDefault));
    CK(cudaHostUnregister(reg));
    for (int i = 0; i < n; i++) ok &= pinned[i] == -i;
    free(reg);
    CK(cudaFree(d));
    CK(cudaFreeHost(pinned));
    CK(cudaFreeHost(mapped));
    DONE(ok);
}
