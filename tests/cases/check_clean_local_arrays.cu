// gpusan-case: check
// expect: clean
// expect-leak: none
// compute-sanitizer: no
// what: three per-thread arrays of different sizes and types (int[16], float[24], char[40])
//       indexed by run-time values, so they live in local memory, each used up to its last
//       element; the results are compared with the host's
#include "case.h"
__global__ void k(const int* idx, int* out) {
    int a[16];
    float b[24];
    char c[40];
    int t = threadIdx.x;
    for (int i = 0; i < 16; i++) a[(i * idx[0] + t) & 15] = i + t;
    for (int i = 0; i < 24; i++) b[(i * idx[1] + t) % 24] = 0.5f * i;
    for (int i = 0; i < 40; i++) c[(i * idx[2] + t) % 40] = (char)i;
    // idx[3..5] = 15, 23, 39: the last element of each.
    out[t] = a[idx[3]] + (int)(2 * b[idx[4]]) + c[idx[5]] + a[t & 15] + c[(t * 7) % 40];
}
int main() {
    const int threads = 32;
    int h[6] = {3, 5, 7, 15, 23, 39};
    int *idx, *out, res[threads];
    CK(cudaMalloc(&idx, sizeof h));
    CK(cudaMalloc(&out, sizeof res));
    CK(cudaMemcpy(idx, h, sizeof h, cudaMemcpyHostToDevice));
    k<<<1, threads>>>(idx, out);
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(res, out, sizeof res, cudaMemcpyDeviceToHost));
    bool ok = true;
    for (int t = 0; t < threads; t++) {
        int a[16];
        float b[24];
        char c[40];
        for (int i = 0; i < 16; i++) a[(i * h[0] + t) & 15] = i + t;
        for (int i = 0; i < 24; i++) b[(i * h[1] + t) % 24] = 0.5f * i;
        for (int i = 0; i < 40; i++) c[(i * h[2] + t) % 40] = (char)i;
        ok = ok && res[t] == a[h[3]] + (int)(2 * b[h[4]]) + c[h[5]] + a[t & 15] + c[(t * 7) % 40];
    }
    CK(cudaFree(idx));
    CK(cudaFree(out));
    DONE(ok);
}
