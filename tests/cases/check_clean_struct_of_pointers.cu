// gpusan-case: check
// expect: clean
// expect-leak: none
// compute-sanitizer: no
// what: a struct of device pointers passed by value (a CSR matrix: row offsets, columns,
//       values) and a copy of it in device memory; a sparse matrix-vector product reads them
#include "case.h"
struct Csr {
    const int* rows;
    const int* cols;
    const float* vals;
    int n;
};
__global__ void spmv(Csr a, const Csr* again, const float* x, float* y) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= a.n) return;
    float s = 0;
    for (int k = a.rows[r]; k < again->rows[r + 1]; k++) s += a.vals[k] * x[again->cols[k]];
    y[r] = s;
}
int main() {
    const int n = 500;  // tridiagonal: 3n - 2 entries
    static int rows[n + 1], cols[3 * n];
    static float vals[3 * n], x[n], y[n];
    int nnz = 0;
    for (int r = 0; r < n; r++) {
        rows[r] = nnz;
        for (int c = r - 1; c <= r + 1; c++)
            if (c >= 0 && c < n) cols[nnz] = c, vals[nnz++] = (float)(c - r + 2);
        x[r] = 1.0f;
    }
    rows[n] = nnz;
    Csr a;
    int *dr, *dc;
    float *dv, *dx, *dy;
    CK(cudaMalloc(&dr, (n + 1) * sizeof(int)));
    CK(cudaMalloc(&dc, nnz * sizeof(int)));
    CK(cudaMalloc(&dv, nnz * sizeof(float)));
    CK(cudaMalloc(&dx, n * sizeof(float)));
    CK(cudaMalloc(&dy, n * sizeof(float)));
    CK(cudaMemcpy(dr, rows, (n + 1) * sizeof(int), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dc, cols, nnz * sizeof(int), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dv, vals, nnz * sizeof(float), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dx, x, n * sizeof(float), cudaMemcpyHostToDevice));
    a = {dr, dc, dv, n};
    Csr* da;
    CK(cudaMalloc(&da, sizeof a));
    CK(cudaMemcpy(da, &a, sizeof a, cudaMemcpyHostToDevice));
    spmv<<<(n + 127) / 128, 128>>>(a, da, dx, dy);
    CK(cudaMemcpy(y, dy, n * sizeof(float), cudaMemcpyDeviceToHost));
    bool ok = y[0] == 5.0f && y[n - 1] == 3.0f;
    for (int r = 1; r < n - 1; r++) ok &= y[r] == 6.0f;
    for (void* p : {(void*)dr, (void*)dc, (void*)dv, (void*)dx, (void*)dy, (void*)da}) CK(cudaFree(p));
    DONE(ok);
}
