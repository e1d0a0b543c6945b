// PTX features: layer normalisation forward: Welford mean/variance with warp-shuffle
// merge of (count, mean, M2) triples, rsqrtf (rsqrt.approx.f32), gamma/beta affine,
// float4-vectorised row access, saving mean/rstd side outputs, and a bf16 variant
// (cvt.rn.bf16.f32, bf16 loads as .b16) with C++ mangled template names.
#include <cuda_bf16.h>

struct Welford { float n, mean, m2; };

__device__ __forceinline__ Welford merge(Welford a, Welford b) {
  float n = a.n + b.n;
  if (n == 0.f) return a;
  float d = b.mean - a.mean, fb = b.n / n;
  return {n, a.mean + d * fb, a.m2 + b.m2 + d * d * a.n * fb};
}

template <typename T>
__global__ void layernorm_fwd(const T* __restrict__ x, const float* __restrict__ gamma,
                              const float* __restrict__ beta, T* __restrict__ y, float* mean_out,
                              float* rstd_out, int cols, float eps) {
  int row = blockIdx.x;
  const T* xr = x + (size_t)row * cols;
  Welford w{0.f, 0.f, 0.f};
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    float v = (float)xr[c];
    w = merge(w, Welford{1.f, v, 0.f});
  }
  for (int o = 16; o > 0; o >>= 1) {
    Welford other{__shfl_xor_sync(~0u, w.n, o), __shfl_xor_sync(~0u, w.mean, o), __shfl_xor_sync(~0u, w.m2, o)};
    w = merge(w, other);
  }
  __shared__ Welford part[32];
  __shared__ float s_mean, s_rstd;
  int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
  if (lane == 0) part[wid] = w;
  __syncthreads();
  if (threadIdx.x == 0) {
    Welford acc = part[0];
    for (int i = 1; i < (int)(blockDim.x + 31) / 32; ++i) acc = merge(acc, part[i]);
    s_mean = acc.mean;
    s_rstd = rsqrtf(acc.m2 / cols + eps);
    mean_out[row] = s_mean;
    rstd_out[row] = s_rstd;
  }
  __syncthreads();
  for (int c = threadIdx.x; c < cols; c += blockDim.x)
    y[(size_t)row * cols + c] = (T)(((float)xr[c] - s_mean) * s_rstd * gamma[c] + beta[c]);
}
template __global__ void layernorm_fwd<float>(const float*, const float*, const float*, float*, float*, float*, int, float);
template __global__ void layernorm_fwd<__nv_bfloat16>(const __nv_bfloat16*, const float*, const float*, __nv_bfloat16*, float*, float*, int, float);

// Vectorised two-pass variant for cols % 4 == 0, one warp per row.
extern "C" __global__ void layernorm_vec4(const float4* x, const float4* gamma, const float4* beta,
                                          float4* y, int rows, int cols4, float eps) {
  int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x & 31;
  if (row >= rows) return;
  const float4* xr = x + (size_t)row * cols4;
  float s = 0.f, ss = 0.f;
  for (int c = lane; c < cols4; c += 32) {
    float4 v = xr[c];
    s += v.x + v.y + v.z + v.w;
    ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
  }
  for (int o = 16; o > 0; o >>= 1) { s += __shfl_xor_sync(~0u, s, o); ss += __shfl_xor_sync(~0u, ss, o); }
  float n = cols4 * 4.f, mean = s / n, rstd = rsqrtf(ss / n - mean * mean + eps);
  for (int c = lane; c < cols4; c += 32) {
    float4 v = xr[c], g = gamma[c], b = beta[c];
    y[(size_t)row * cols4 + c] = make_float4((v.x - mean) * rstd * g.x + b.x, (v.y - mean) * rstd * g.y + b.y,
                                             (v.z - mean) * rstd * g.z + b.z, (v.w - mean) * rstd * g.w + b.w);
  }
}
