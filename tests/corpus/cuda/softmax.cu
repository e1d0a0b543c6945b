// PTX features: row-wise numerically stable softmax: one block per row, warp-level
// max/sum reductions (shfl.sync.bfly), shared-memory cross-warp combine, ex2.approx via
// __expf, online-softmax single pass (running max rescaling), half-precision I/O
// variant (cvt.f32.f16 / cvt.rn.f16.f32) templated on the element type.
#include <cuda_fp16.h>

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ float block_reduce(float v, bool is_max) {
  __shared__ float red[32];
  int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
  v = is_max ? warp_max(v) : warp_sum(v);
  __syncthreads();
  if (lane == 0) red[wid] = v;
  __syncthreads();
  int nw = (blockDim.x + 31) >> 5;
  v = lane < nw ? red[lane] : (is_max ? -INFINITY : 0.f);
  return is_max ? warp_max(v) : warp_sum(v);
}

template <typename T>
__global__ void softmax_rows(const T* __restrict__ in, T* __restrict__ out, int cols) {
  const T* x = in + (size_t)blockIdx.x * cols;
  T* y = out + (size_t)blockIdx.x * cols;
  float m = -INFINITY;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, (float)x[c]);
  m = block_reduce(m, true);
  float s = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) s += __expf((float)x[c] - m);
  s = block_reduce(s, false);
  float inv = 1.f / s;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) y[c] = (T)(__expf((float)x[c] - m) * inv);
}
template __global__ void softmax_rows<float>(const float*, float*, int);
template __global__ void softmax_rows<__half>(const __half*, __half*, int);

// Online softmax: one warp per row, a single pass computing max and sum together.
extern "C" __global__ void softmax_online_warp(const float* in, float* out, int rows, int cols) {
  int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x & 31;
  if (row >= rows) return;
  const float* x = in + (size_t)row * cols;
  float m = -INFINITY, d = 0.f;
  for (int c = lane; c < cols; c += 32) {
    float v = x[c], nm = fmaxf(m, v);
    d = d * __expf(m - nm) + __expf(v - nm);
    m = nm;
  }
  for (int o = 16; o > 0; o >>= 1) {
    float om = __shfl_xor_sync(0xffffffffu, m, o), od = __shfl_xor_sync(0xffffffffu, d, o);
    float nm = fmaxf(m, om);
    d = d * __expf(m - nm) + od * __expf(om - nm);
    m = nm;
  }
  for (int c = lane; c < cols; c += 32) out[(size_t)row * cols + c] = __expf(x[c] - m) / d;
}
