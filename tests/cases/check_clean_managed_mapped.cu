// gpusan-case: check
// expect: clean
// expect-leak: none
// compute-sanitizer: no
// what: kernels read and write managed memory (cudaMallocManaged) and host-mapped pinned memory
//       (cudaHostAlloc + cudaHostGetDevicePointer) to their exact ends
#include "case.h"
__global__ void inc(int* p, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] += 1;
}
int main() {
    const int n = 3000;
    int *m, *h, *hd;
    CK(cudaMallocManaged(&m, n * sizeof(int)));
    CK(cudaHostAlloc(&h, n * sizeof(int), cudaHostAllocMapped));
    CK(cudaHostGetDevicePointer(&hd, h, 0));
    for (int i = 0; i < n; i++) m[i] = h[i] = i;
    inc<<<(n + 255) / 256, 256>>>(m, n);
    inc<<<(n + 255) / 256, 256>>>(hd, n);
    CK(cudaDeviceSynchronize());
    bool ok = true;
    for (int i = 0; i < n; i++) ok &= m[i] == i + 1 && h[i] == i + 1;
    CK(cudaFree(m));
    CK(cudaFreeHost(h));
    DONE(ok);
}
