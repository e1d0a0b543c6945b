// PTX features: block reduction through shared memory with a strided loop and
// bar.sync, warp reduction with shfl.sync.down.b32 / shfl.sync.bfly.b32 on f32 and
// f64 (split into two 32-bit shuffles, mov.b64 {lo,hi}), templated block size
// (mangled names), grid-stride loop, final atomicAdd of per-block partials.
template <int BLOCK>
__global__ void reduce_sum_shared(const float* __restrict__ in, float* __restrict__ out, int n) {
  __shared__ float sdata[BLOCK];
  int t = threadIdx.x;
  float sum = 0.f;
  for (int i = blockIdx.x * BLOCK + t; i < n; i += gridDim.x * BLOCK) sum += in[i];
  sdata[t] = sum;
  __syncthreads();
  for (int s = BLOCK / 2; s > 0; s >>= 1) {
    if (t < s) sdata[t] += sdata[t + s];
    __syncthreads();
  }
  if (t == 0) atomicAdd(out, sdata[0]);
}
template __global__ void reduce_sum_shared<128>(const float*, float*, int);
template __global__ void reduce_sum_shared<512>(const float*, float*, int);

__device__ __forceinline__ double warp_sum_d(double v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
  return v;
}
__device__ __forceinline__ float warp_max_f(float v) {
  for (int m = 16; m > 0; m >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, m));
  return v;
}

extern "C" __global__ void reduce_warp_shuffle(const double* in, double* sum_out, float* max_out, int n) {
  __shared__ double warp_sums[32];
  __shared__ float warp_max[32];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
  double v = i < n ? in[i] : 0.0;
  double s = warp_sum_d(v);
  float m = warp_max_f((float)v);
  if (lane == 0) { warp_sums[wid] = s; warp_max[wid] = m; }
  __syncthreads();
  if (wid == 0) {
    int nw = (blockDim.x + 31) >> 5;
    s = lane < nw ? warp_sums[lane] : 0.0;
    m = lane < nw ? warp_max[lane] : -INFINITY;
    s = warp_sum_d(s);
    m = warp_max_f(m);
    if (lane == 0) { atomicAdd(sum_out, s); atomicMax((int*)max_out, __float_as_int(fmaxf(m, 0.f))); }
  }
}
