// gpusan-case: check
// expect: clean
// expect-leak: none
// compute-sanitizer: no
// what: a tiled matrix product through two static 16x16 shared tiles and a padded 16x17
//       transpose tile, each used up to its last element, then a block sum in dynamic
//       shared memory launched with exactly blockDim.x floats, read to its last float4;
//       the results are compared with the host's
#include "case.h"
#include <cmath>
#include <vector>
#define T 16
__global__ void gemm(const float* a, const float* b, float* c, float* ct, int n) {
    __shared__ float as[T][T];
    __shared__ float bs[T][T];
    __shared__ float tr[T][T + 1];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * T + ty, col = blockIdx.x * T + tx;
    float acc = 0;
    for (int k0 = 0; k0 < n; k0 += T) {
        as[ty][tx] = a[row * n + k0 + tx];
        bs[ty][tx] = b[(k0 + ty) * n + col];
        __syncthreads();
        for (int k = 0; k < T; k++) acc += as[ty][k] * bs[k][tx];
        __syncthreads();
    }
    c[row * n + col] = acc;
    tr[ty][tx] = acc;
    __syncthreads();
    ct[(blockIdx.x * T + ty) * n + blockIdx.y * T + tx] = tr[tx][ty];
}
__global__ void block_sum(const float* x, float* sums) {
    extern __shared__ float buf[];  // exactly blockDim.x floats
    int t = threadIdx.x;
    buf[t] = x[blockIdx.x * blockDim.x + t];
    __syncthreads();
    if (t == 0) {
        float s = 0;
        const float4* v = reinterpret_cast<const float4*>(buf);
        for (int i = 0; i < (int)blockDim.x / 4; i++) s += v[i].x + v[i].y + v[i].z + v[i].w;  // last: buf[n-4..n-1]
        sums[blockIdx.x] = s;
    }
}
int main() {
    const int n = 64, threads = 128, blocks = n * n / threads;
    std::vector<float> a(n * n), b(n * n), c(n * n), ct(n * n), sums(blocks);
    for (int i = 0; i < n * n; i++) {
        a[i] = (float)(i % 7) - 3.0f;
        b[i] = (float)(i % 5) * 0.5f;
    }
    float *da, *db, *dc, *dct, *ds;
    CK(cudaMalloc(&da, n * n * sizeof(float)));
    CK(cudaMalloc(&db, n * n * sizeof(float)));
    CK(cudaMalloc(&dc, n * n * sizeof(float)));
    CK(cudaMalloc(&dct, n * n * sizeof(float)));
    CK(cudaMalloc(&ds, blocks * sizeof(float)));
    CK(cudaMemcpy(da, a.data(), n * n * sizeof(float), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(db, b.data(), n * n * sizeof(float), cudaMemcpyHostToDevice));
    gemm<<<dim3(n / T, n / T), dim3(T, T)>>>(da, db, dc, dct, n);
    block_sum<<<blocks, threads, threads * sizeof(float)>>>(dc, ds);
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(c.data(), dc, n * n * sizeof(float), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(ct.data(), dct, n * n * sizeof(float), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(sums.data(), ds, blocks * sizeof(float), cudaMemcpyDeviceToHost));
    bool ok = true;
    for (int i = 0; i < n && ok; i++)
        for (int j = 0; j < n && ok; j++) {
            float r = 0;
            for (int k = 0; k < n; k++) r += a[i * n + k] * b[k * n + j];
            ok = std::fabs(c[i * n + j] - r) < 1e-3f && ct[j * n + i] == c[i * n + j];
        }
    for (int blk = 0; blk < blocks && ok; blk++) {
        float r = 0;
        for (int i = 0; i < threads; i++) r += c[blk * threads + i];
        ok = std::fabs(sums[blk] - r) < 1e-2f * (1 + std::fabs(r));
    }
    CK(cudaFree(da));
    CK(cudaFree(db));
    CK(cudaFree(dc));
    CK(cudaFree(dct));
    CK(cudaFree(ds));
    DONE(ok);
}
