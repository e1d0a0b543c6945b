// gpusan-case: check
// expect: clean
// expect-leak: none
// compute-sanitizer: no
// what: loops the check pass versions, over buffers of exactly their size: a GEMM inner loop
//       (unrolled count-down, a row walk, a column walk by one row, an invariant store), a
//       count-up grid-stride loop, a count-down loop with a negative stride, loops whose
//       trip count is 0 and 1, and a loop that waits on a flag and stores to one place
#include "case.h"
__global__ void gemm(const float* a, const float* b, float* c, int n) {
    int j = blockIdx.x * blockDim.x + threadIdx.x, i = blockIdx.y;
    if (j >= n) return;
    c[i * n + j] = 0.0f;
    for (int k = 0; k < n; k++) c[i * n + j] += a[i * n + k] * b[k * n + j];
}
__global__ void scale(float* y, const float* x, int n) {
#pragma unroll 1
    for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x) y[k] = 2.0f * x[k];
}
__global__ void reverse(float* y, const float* x, int n) {
    int t = threadIdx.x;
#pragma unroll 1
    for (int k = n - 1 - t; k >= 0; k -= 32) y[k] = x[n - 1 - k];
}
__global__ void steps(float* y, int n, int step) {
#pragma unroll 1
    for (int k = threadIdx.x; k < n; k += step) y[k] += 1.0f;
}
__global__ void wait_flag(const volatile int* flag, int* out) {
    int spins = 0;
    do {
        spins++;
        out[1] = spins;
    } while (*flag != 0 && spins < 4);
}
int main() {
    const int n = 96;
    float *a, *b, *c, *x, *y;
    int *flag, *out;
    CK(cudaMalloc(&a, n * n * sizeof(float)));
    CK(cudaMalloc(&b, n * n * sizeof(float)));
    CK(cudaMalloc(&c, n * n * sizeof(float)));
    CK(cudaMalloc(&x, n * sizeof(float)));
    CK(cudaMalloc(&y, n * sizeof(float)));
    CK(cudaMalloc(&flag, sizeof(int)));
    CK(cudaMalloc(&out, 2 * sizeof(int)));
    static float ha[n * n], hb[n * n], hc[n * n], hx[n], hy[n];
    for (int i = 0; i < n * n; i++) ha[i] = (float)(i % 7), hb[i] = (float)(i % 5);
    for (int i = 0; i < n; i++) hx[i] = (float)i;
    CK(cudaMemcpy(a, ha, sizeof ha, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(b, hb, sizeof hb, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(x, hx, sizeof hx, cudaMemcpyHostToDevice));
    CK(cudaMemset(flag, 0, sizeof(int)));
    gemm<<<dim3(1, n), n>>>(a, b, c, n);
    scale<<<1, 32>>>(y, x, n);
    CK(cudaMemcpy(hy, y, sizeof hy, cudaMemcpyDeviceToHost));
    bool ok = true;
    for (int i = 0; i < n; i++) ok &= hy[i] == 2.0f * i;
    reverse<<<1, 32>>>(y, x, n);
    steps<<<1, 32>>>(y, 0, 32);   // trip count 0: the loop is not entered
    steps<<<1, 32>>>(y, 32, 64);  // trip count 1
    wait_flag<<<1, 1>>>(flag, out);
    CK(cudaMemcpy(hc, c, sizeof hc, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hy, y, sizeof hy, cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) ok &= hy[i] == (float)(n - 1 - i) + (i < 32 ? 1.0f : 0.0f);
    for (int i = 0; i < n; i += 13)
        for (int j = 0; j < n; j += 11) {
            float s = 0.0f;
            for (int k = 0; k < n; k++) s += ha[i * n + k] * hb[k * n + j];
            ok &= hc[i * n + j] == s;
        }
    int hout[2] = {0, 0};
    CK(cudaMemcpy(hout, out, sizeof hout, cudaMemcpyDeviceToHost));
    ok &= hout[1] == 1;
    CK(cudaFree(a));
    CK(cudaFree(b));
    CK(cudaFree(c));
    CK(cudaFree(x));
    CK(cudaFree(y));
    CK(cudaFree(flag));
    CK(cudaFree(out));
    DONE(ok);
}
