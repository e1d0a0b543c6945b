// PTX features: classic shared-memory tiled SGEMM in a C++ namespace (mangled
// _ZN4gemm... names), template tile sizes, 2-D shared arrays, register blocking
// (each thread computes TM x TN outputs -> many live .f32 registers, fma.rn.f32
// chains), fully unrolled inner loops, ld.shared.v4.f32 via float4 reinterpretation,
// bounds-checked edge tiles.
namespace gemm {

template <int BM, int BN, int BK, int TM, int TN>
__global__ void sgemm_tiled(int M, int N, int K, float alpha, const float* __restrict__ A,
                            const float* __restrict__ B, float beta, float* __restrict__ C) {
  __shared__ __align__(16) float As[BK][BM];
  __shared__ __align__(16) float Bs[BK][BN];
  const int tx = threadIdx.x % (BN / TN), ty = threadIdx.x / (BN / TN);
  const int nthreads = (BM / TM) * (BN / TN);
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  float acc[TM][TN] = {};
  for (int k0 = 0; k0 < K; k0 += BK) {
    for (int i = threadIdx.x; i < BM * BK; i += nthreads) {
      int r = i / BK, c = i % BK;
      As[c][r] = (row0 + r < M && k0 + c < K) ? A[(row0 + r) * K + k0 + c] : 0.f;
    }
    for (int i = threadIdx.x; i < BK * BN; i += nthreads) {
      int r = i / BN, c = i % BN;
      Bs[r][c] = (k0 + r < K && col0 + c < N) ? B[(k0 + r) * N + col0 + c] : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      float a[TM], b[TN];
#pragma unroll
      for (int m = 0; m < TM; m += 4) {
        float4 v = *reinterpret_cast<const float4*>(&As[kk][ty * TM + m]);
        a[m] = v.x; a[m + 1] = v.y; a[m + 2] = v.z; a[m + 3] = v.w;
      }
#pragma unroll
      for (int n = 0; n < TN; ++n) b[n] = Bs[kk][tx * TN + n];
#pragma unroll
      for (int m = 0; m < TM; ++m)
#pragma unroll
        for (int n = 0; n < TN; ++n) acc[m][n] = fmaf(a[m], b[n], acc[m][n]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int m = 0; m < TM; ++m)
#pragma unroll
    for (int n = 0; n < TN; ++n) {
      int r = row0 + ty * TM + m, c = col0 + tx * TN + n;
      if (r < M && c < N) C[r * N + c] = alpha * acc[m][n] + beta * C[r * N + c];
    }
}

template __global__ void sgemm_tiled<64, 64, 8, 4, 4>(int, int, int, float, const float*, const float*, float, float*);
template __global__ void sgemm_tiled<128, 128, 8, 8, 8>(int, int, int, float, const float*, const float*, float, float*);

}  // namespace gemm

// Naive reference kernel with C linkage.
extern "C" __global__ void sgemm_naive(int M, int N, int K, const float* A, const float* B, float* C) {
  int r = blockIdx.y * blockDim.y + threadIdx.y, c = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= M || c >= N) return;
  float s = 0.f;
  for (int k = 0; k < K; ++k) s += A[r * K + k] * B[k * N + c];
  C[r * N + c] = s;
}
