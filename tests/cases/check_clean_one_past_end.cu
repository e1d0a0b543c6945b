// gpusan-case: check
// expect: clean
// expect-leak: none
// compute-sanitizer: no
// what: kernels compute one-past-the-end pointers (loop bounds `p < end`, `end - 1`) and pass
//       `base + n` as an argument without dereferencing it; every access is in bounds
#include "case.h"
__global__ void sum(const int* begin, const int* end, int* out) {
    int s = 0;
    for (const int* p = begin + threadIdx.x; p < end; p += blockDim.x) s += *p;
    atomicAdd(out, s);
    if (threadIdx.x == 0) atomicAdd(out + 1, *(end - 1));
}
int main() {
    const int n = 1000;
    static int h[n];
    int expect = 0;
    for (int i = 0; i < n; i++) expect += h[i] = i % 7;
    int *d, *out;
    CK(cudaMalloc(&d, n * sizeof(int)));
    CK(cudaMalloc(&out, 2 * sizeof(int)));
    CK(cudaMemset(out, 0, 2 * sizeof(int)));
    CK(cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice));
    sum<<<1, 128>>>(d, d + n, out);
    int got[2];
    CK(cudaMemcpy(got, out, sizeof got, cudaMemcpyDeviceToHost));
    CK(cudaFree(d));
    CK(cudaFree(out));
    DONE(got[0] == expect && got[1] == h[n - 1]);
}
