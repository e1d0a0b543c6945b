// gpusan-case: check
// expect: out_of_bounds_read
// expect-leak: none
// compute-sanitizer: yes
// what: a column walk by a constant stride (one row, 1 KB) reads one row too many (`k <=
//       rows`): only the last iteration leaves `a`, into the buffer allocated after it. The
//       loop is versioned; its range check fails, and the checked loop reports the reads
#include "case.h"
__global__ void column_sums(const float* a, float* sums, int rows, int cols) {
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= cols) return;
    float s = 0.0f;
#pragma unroll 1
    for (int k = 0; k <= rows; k++) s += a[k * cols + j];
    sums[j] = s;
}
int main() {
    const int rows = 64, cols = 256;
    float *a, *next, *sums;
    CK(cudaMalloc(&a, rows * cols * sizeof(float)));
    CK(cudaMalloc(&next, rows * cols * sizeof(float)));
    CK(cudaMalloc(&sums, cols * sizeof(float)));
    CK(cudaMemset(a, 0, rows * cols * sizeof(float)));
    CK(cudaMemset(next, 0, rows * cols * sizeof(float)));
    column_sums<<<cols / 128, 128>>>(a, sums, rows, cols);
    CK(cudaFree(a));
    CK(cudaFree(next));
    CK(cudaFree(sums));
    BUG_DONE();
}
