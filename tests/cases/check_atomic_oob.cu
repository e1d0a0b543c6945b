// gpusan-case: check
// expect: out_of_bounds_atomic
// expect-leak: none
// compute-sanitizer: yes
// what: a histogram kernel does atomicAdd on bin `nbins` (one past the last) for values equal
//       to the upper limit
#include "case.h"
__global__ void hist(const int* v, int n, unsigned* bins, int nbins, int max) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(&bins[v[i] * nbins / max], 1u);  // bug: v == max gives bin nbins
}
int main() {
    const int n = 1024, nbins = 16, max = 64;
    static int h[n];
    for (int i = 0; i < n; i++) h[i] = i % (max + 1);  // includes max
    int* v;
    unsigned* bins;
    CK(cudaMalloc(&v, sizeof h));
    CK(cudaMalloc(&bins, nbins * sizeof(unsigned)));
    CK(cudaMemset(bins, 0, nbins * sizeof(unsigned)));
    CK(cudaMemcpy(v, h, sizeof h, cudaMemcpyHostToDevice));
    hist<<<n / 256, 256>>>(v, n, bins, nbins, max);
    CK(cudaDeviceSynchronize());
    CK(cudaFree(v));
    CK(cudaFree(bins));
    BUG_DONE();
}
