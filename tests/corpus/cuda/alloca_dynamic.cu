// PTX features: dynamic stack allocation: `alloca.u64 %rd, %size, align;` (PTX 7.3+),
// in a kernel and in a non-inlined .func, with the result used as a generic pointer;
// variable-length buffers indexed in loops.
extern "C" __global__ void alloca_buffer(const int* sizes, const float* in, float* out) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  int n = sizes[t] & 63;
  float* buf = static_cast<float*>(__builtin_alloca(sizeof(float) * (n + 1)));
  for (int k = 0; k <= n; ++k) buf[k] = in[t + k];
  float s = 0.f;
  for (int k = n; k >= 0; --k) s = s * 0.5f + buf[k];
  out[t] = s;
}

__device__ __noinline__ float sum_vla(const float* src, int n) {
  float* tmp = static_cast<float*>(__builtin_alloca(n * sizeof(float)));
  for (int i = 0; i < n; ++i) tmp[i] = src[i] * src[i];
  float s = 0.f;
  for (int i = 0; i < n; ++i) s += tmp[(i * 7) % n];
  return s;
}

extern "C" __global__ void alloca_in_call(const float* in, float* out, int n) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  out[t] = sum_vla(in + t, (n + t) % 32 + 1);
}
