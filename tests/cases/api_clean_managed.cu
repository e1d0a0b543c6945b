// gpusan-case: api
// expect: clean
// expect-leak: none
// compute-sanitizer: no
// also-cudart-shared: yes
// what: managed memory (cudaMallocManaged, 1 MiB): host writes, cudaMemcpy to and from device
//       memory, a kernel on it, cudaMemset of it, host reads
#include "case.h"
__global__ void twice(int* p, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] *= 2;
}
int main() {
    const int n = 1 << 18;
    int *m, *d;
    CK(cudaMallocManaged(&m, n * sizeof(int)));
    CK(cudaMalloc(&d, n * sizeof(int)));
    for (int i = 0; i < n; i++) m[i] = i;
    CK(cudaMemcpy(d, m, n * sizeof(int), cudaMemcpyDefault));
    twice<<<(n + 255) / 256, 256>>>(d, n);
    CK(cudaMemcpy(m, d, n * sizeof(int), cudaMemcpyDefault));
    twice<<<(n + 255) / 256, 256>>>(m, n);
    CK(cudaDeviceSynchronize());
    bool ok = true;
    for (int i = 0; i < n; i++) ok &= m[i] == 4 * i;
    CK(cudaMemset(m, 0, n * sizeof(int)));
    CK(cudaDeviceSynchronize());
    ok = ok && m[n - 1] == 0;
    CK(cudaFree(m));
    CK(cudaFree(d));
    DONE(ok);
}
