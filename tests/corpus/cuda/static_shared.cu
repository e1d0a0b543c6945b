// PTX features: several static .shared arrays of different types/alignments in one
// kernel (.shared .align N .b8 name[...]), ld.shared/st.shared with constant offsets,
// bar.sync (__syncthreads), a __shared__ scalar, shared arrays in a second kernel
// with the same local names (PTX mangles them per function).
extern "C" __global__ void static_shared_mix(const float* in, float* out, int* counts, int n) {
  __shared__ float tile[256];
  __shared__ double acc[32];
  __shared__ int hist[16];
  __shared__ unsigned char flags[256];
  __shared__ int total;
  int t = threadIdx.x;
  int i = blockIdx.x * blockDim.x + t;
  if (t < 16) hist[t] = 0;
  if (t < 32) acc[t] = 0.0;
  if (t == 0) total = 0;
  float v = i < n ? in[i] : 0.0f;
  tile[t] = v;
  flags[t] = v > 0.0f;
  __syncthreads();
  atomicAdd(&hist[(int)fabsf(v) & 15], 1);
  atomicAdd(&acc[t & 31], (double)tile[255 - t]);
  if (flags[t]) atomicAdd(&total, 1);
  __syncthreads();
  if (i < n) out[i] = tile[(t + 1) & 255] + (float)acc[t & 31];
  if (t < 16) atomicAdd(&counts[t], hist[t]);
  if (t == 0) atomicAdd(&counts[16], total);
}

extern "C" __global__ void static_shared_second(float* out) {
  __shared__ float tile[64];
  __shared__ short idx[64];
  int t = threadIdx.x & 63;
  tile[t] = (float)t * 0.5f;
  idx[t] = (short)(63 - t);
  __syncthreads();
  out[blockIdx.x * 64 + t] = tile[idx[t]];
}
