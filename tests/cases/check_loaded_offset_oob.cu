// gpusan-case: check
// expect: out_of_bounds_read
// expect-leak: none
// compute-sanitizer: yes
// what: a gather through 64-bit offsets read from memory (`base + off[i]`: both operands
//       may be pointers to the analysis, so the address has two roots); one offset is the
//       buffer's length, one past its end
#include "case.h"
__global__ void gather(const char* base, const size_t* off, char* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = base[off[i]];
}
int main() {
    const int n = 256, len = 1000;
    char *base, *out;
    size_t* off;
    CK(cudaMalloc(&base, len));
    CK(cudaMalloc(&out, n));
    CK(cudaMalloc(&off, n * sizeof(size_t)));
    size_t h[n];
    for (int i = 0; i < n; i++) h[i] = (i * 37) % len;
    h[200] = len;  // bug: one past the end
    CK(cudaMemcpy(off, h, sizeof h, cudaMemcpyHostToDevice));
    gather<<<1, n>>>(base, off, out, n);
    CK(cudaDeviceSynchronize());
    CK(cudaFree(base));
    CK(cudaFree(out));
    CK(cudaFree(off));
    BUG_DONE();
}
