// PTX features: half and bfloat16 arithmetic, mostly as inline asm from cuda_fp16.hpp /
// cuda_bf16.hpp: { } blocks with .reg .b16/.b32 temporaries, fma.rn.f16x2, max.f16x2,
// min.NaN.f16x2, set.gt.u32.f16x2, max.bf16x2, ex2.approx.f16x2 (hexp), cvt.rn.f16.f32,
// cvt.rn.bf16.f32, cvt.f32.f16, comparisons through predicate temporaries (__$tempN), and
// fp8 conversions (sm_89+): cvt.rn.satfinite.e4m3x2.f32, cvt.rn.f16x2.e5m2x2.
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>

extern "C" __global__ void half2_math(const __half2* a, const __half2* b, __half2* c, __half* hs, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  __half2 x = a[i], y = b[i];
  __half2 r = __hfma2(x, y, __float2half2_rn(1.0f));
  r = __hadd2(r, __hmul2(x, x));
  r = __hmax2(r, h2exp(__hneg2(y)));
  r = __hmin2_nan(r, h2sqrt(__habs2(x)));
  __half s = __hadd(__low2half(r), __high2half(r));
  if (__hgt(s, __float2half(2.0f))) s = hrcp(s);
  bool both = __hbgt2(x, y);
  c[i] = both ? r : __lowhigh2highlow(r);
  hs[i] = __hmul(s, __int2half_rn(i & 15));
}

extern "C" __global__ void bf16_math(const __nv_bfloat162* a, const float* f, __nv_bfloat162* out,
                                     __nv_bfloat16* os, float* of, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  __nv_bfloat162 x = a[i];
  __nv_bfloat162 y = __floats2bfloat162_rn(f[i], -f[i]);
  __nv_bfloat162 r = __hfma2(x, y, x);
  r = __hmul2(r, __float2bfloat162_rn(0.5f));
  __nv_bfloat16 s = __hadd(r.x, r.y);
  s = hexp(s);
  out[i] = __hmax2(r, y);
  os[i] = s;
  of[i] = __bfloat162float(s) + __low2float(r);
}

extern "C" __global__ void fp8_convert(const float2* in, __nv_fp8x2_storage_t* e4, __nv_fp8x2_storage_t* e5,
                                       __half2* back, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float2 v = in[i];
  __nv_fp8x2_storage_t a = __nv_cvt_float2_to_fp8x2(v, __NV_SATFINITE, __NV_E4M3);
  __nv_fp8x2_storage_t b = __nv_cvt_float2_to_fp8x2(v, __NV_SATFINITE, __NV_E5M2);
  e4[i] = a;
  e5[i] = b;
  __half2_raw hr = __nv_cvt_fp8x2_to_halfraw2(b, __NV_E5M2);
  back[i] = __half2(hr);
}
