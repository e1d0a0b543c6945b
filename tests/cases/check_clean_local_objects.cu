// gpusan-case: check
// expect: clean
// expect-leak: none
// compute-sanitizer: no
// what: the legal ways of reaching inside a local object that object bounds must not
//       report: a 2-D array m[4][8] indexed m[j][i] up to its last element, walked flat
//       through &m[0][0] over all 32 elements, and through a row pointer &m[1][0] into the
//       rows after it; a struct of two arrays, each member indexed to its last element and
//       the whole struct walked as bytes; next to another array in the same frame. The
//       results are compared with the host's
#include "case.h"
struct S {
    int x[4];
    int y[4];
};
__device__ __host__ int body(const int* idx, int t) {
    int m[4][8];
    S s;
    int other[8];
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 8; c++) m[(r * idx[0] + t) & 3][(c * idx[1] + t) & 7] = r * 8 + c;
    for (int i = 0; i < 4; i++) {
        s.x[(i * idx[0] + t) & 3] = i + t;
        s.y[(i * idx[1] + t) & 3] = 10 * i;
    }
    for (int i = 0; i < 8; i++) other[(i * idx[2] + t) & 7] = i * t;
    int acc = m[idx[3]][idx[4]] + s.x[idx[5]] + s.y[idx[5]] + other[idx[4]];  // 3, 7, 3: the last
    const int* flat = &m[0][0];
    for (int k = 0; k < idx[6]; k++) acc += flat[k];  // idx[6] == 32: every element
    const int* row = &m[1][0];
    for (int k = 0; k < idx[7]; k++) acc += row[k];  // idx[7] == 24: rows 1 to 3
    const unsigned char* bytes = (const unsigned char*)&s;
    for (int k = 0; k < idx[8]; k++) acc += bytes[k];  // idx[8] == 32: the whole struct
    return acc;
}
__global__ void k(const int* idx, int* out) { out[threadIdx.x] = body(idx, threadIdx.x); }
int main() {
    const int threads = 32;
    int h[9] = {3, 5, 7, 3, 7, 3, 32, 24, 32};
    int *idx, *out, res[threads];
    CK(cudaMalloc(&idx, sizeof h));
    CK(cudaMalloc(&out, sizeof res));
    CK(cudaMemcpy(idx, h, sizeof h, cudaMemcpyHostToDevice));
    k<<<1, threads>>>(idx, out);
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(res, out, sizeof res, cudaMemcpyDeviceToHost));
    bool ok = true;
    for (int t = 0; t < threads; t++) ok = ok && res[t] == body(h, t);
    CK(cudaFree(idx));
    CK(cudaFree(out));
    DONE(ok);
}
