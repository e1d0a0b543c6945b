// PTX features: C++ mangled .entry names from function templates (several
// instantiations: float, double, int, __half-free integer types), template
// device functions inlined per type, .param of different widths (u32/u64/f32/f64),
// ld.global/st.global of .f32/.f64/.s32/.u8, cvt between types.
#include <cstdint>

template <typename T>
__device__ __forceinline__ T clamp_val(T v, T lo, T hi) {
  return v < lo ? lo : (v > hi ? hi : v);
}

template <typename T, int UNROLL>
__global__ void saxpy_t(T alpha, const T* __restrict__ x, T* __restrict__ y, int n) {
  int base = (blockIdx.x * blockDim.x + threadIdx.x) * UNROLL;
#pragma unroll
  for (int u = 0; u < UNROLL; ++u) {
    int i = base + u;
    if (i < n) y[i] = clamp_val<T>(alpha * x[i] + y[i], T(-1000), T(1000));
  }
}

template <typename In, typename Out>
__global__ void convert_t(const In* in, Out* out, size_t n) {
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = static_cast<Out>(in[i]);
}

template <typename T>
struct Pair { T a; T b; };

template <typename T>
__global__ void pair_swap_t(Pair<T>* p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { T t = p[i].a; p[i].a = p[i].b; p[i].b = t; }
}

template __global__ void saxpy_t<float, 1>(float, const float*, float*, int);
template __global__ void saxpy_t<float, 4>(float, const float*, float*, int);
template __global__ void saxpy_t<double, 2>(double, const double*, double*, int);
template __global__ void saxpy_t<int, 2>(int, const int*, int*, int);
template __global__ void convert_t<float, int>(const float*, int*, size_t);
template __global__ void convert_t<double, float>(const double*, float*, size_t);
template __global__ void convert_t<uint8_t, float>(const uint8_t*, float*, size_t);
template __global__ void convert_t<int64_t, double>(const int64_t*, double*, size_t);
template __global__ void pair_swap_t<short>(Pair<short>*, int);
template __global__ void pair_swap_t<long long>(Pair<long long>*, int);
