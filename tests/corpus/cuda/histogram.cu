// PTX features: privatised histogram with shared-memory atomics (atom.shared.add.u32 /
// .u64), per-warp sub-histograms (2-D shared array), uchar4 loads through __ldg
// (ld.global.nc.v4.u8), grid-stride loops, merge to global with atom.global.add, and a
// 64-bit-bin variant in dynamic shared memory.
extern "C" __global__ void histogram256(const uchar4* __restrict__ data, int n4, unsigned* hist) {
  __shared__ unsigned local[8][256];
  int warp = threadIdx.x / 32;
  for (int i = threadIdx.x; i < 8 * 256; i += blockDim.x) (&local[0][0])[i] = 0;
  __syncthreads();
  unsigned* mine = local[warp & 7];
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += gridDim.x * blockDim.x) {
    uchar4 v = __ldg(&data[i]);
    atomicAdd(&mine[v.x], 1u);
    atomicAdd(&mine[v.y], 1u);
    atomicAdd(&mine[v.z], 1u);
    atomicAdd(&mine[v.w], 1u);
  }
  __syncthreads();
  for (int b = threadIdx.x; b < 256; b += blockDim.x) {
    unsigned s = 0;
#pragma unroll
    for (int w = 0; w < 8; ++w) s += local[w][b];
    if (s) atomicAdd(&hist[b], s);
  }
}

extern "C" __global__ void histogram_weighted64(const float* values, const float* weights, int n,
                                                float lo, float hi, unsigned long long* hist, int nbins) {
  extern __shared__ unsigned long long bins[];
  for (int b = threadIdx.x; b < nbins; b += blockDim.x) bins[b] = 0;
  __syncthreads();
  float scale = nbins / (hi - lo);
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    int b = (int)((values[i] - lo) * scale);
    b = min(max(b, 0), nbins - 1);
    atomicAdd(&bins[b], (unsigned long long)(weights[i] * 1000.f));
  }
  __syncthreads();
  for (int b = threadIdx.x; b < nbins; b += blockDim.x) atomicAdd(&hist[b], bins[b]);
}
