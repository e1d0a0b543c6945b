// PTX features: floating-point atomics (atom.add.f32, atom.add.f64, atom.add.noftz.f16,
// atom.add.noftz.f16x2/.bf16x2 from header inline asm, vector atom.global.add.v2.f32 /
// .v4.f32 on sm_90), scoped atomics (atom.global.cta.* / atom.global.sys.* via *_block /
// *_system), and a CAS loop implementing a float atomicMax (atom.cas.b32 in a loop).
#include <cuda_fp16.h>
#include <cuda_bf16.h>

__device__ float atomic_max_float(float* addr, float val) {
  int* a = reinterpret_cast<int*>(addr);
  int old = *a, assumed;
  do {
    assumed = old;
    if (__int_as_float(assumed) >= val) break;
    old = atomicCAS(a, assumed, __float_as_int(val));
  } while (assumed != old);
  return __int_as_float(old);
}

extern "C" __global__ void atomics_float(float* f, double* d, __half* h, __half2* h2,
                                         __nv_bfloat162* b2, float2* f2, float4* f4, float* out) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  float x = (float)t * 0.25f;
  float r = atomicAdd(&f[0], x);
  r += (float)atomicAdd(&d[0], (double)x);
  r += __half2float(atomicAdd(&h[0], __float2half(x)));
  __half2 hr = atomicAdd(&h2[0], __floats2half2_rn(x, -x));
  r += __low2float(hr);
  __nv_bfloat162 br = atomicAdd(&b2[0], __floats2bfloat162_rn(x, 1.0f));
  r += __high2float(br);
  float2 v2 = atomicAdd(&f2[0], make_float2(x, 2 * x));
  float4 v4 = atomicAdd(&f4[0], make_float4(x, x, x, x));
  r += v2.x + v4.w;
  r += atomic_max_float(&f[1], x);
  out[t] = r;
}

extern "C" __global__ void atomics_scoped(int* gi, float* gf, double* gd, unsigned long long* gu, int* out) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  int r = atomicAdd_block(&gi[0], 1);
  r += atomicAdd_system(&gi[1], 1);
  r += atomicCAS_block(&gi[2], 0, t);
  r += atomicCAS_system(&gi[3], 0, t);
  r += atomicExch_system(&gi[4], t);
  r += atomicMax_block(&gi[5], t);
  r += atomicOr_system(&gi[6], 1 << (t & 31));
  r += (int)atomicAdd_block(&gf[0], 1.0f);
  r += (int)atomicAdd_system(&gd[0], 1.0);
  r += (int)atomicAdd_system(&gu[0], 1ull);
  atomicAdd_block(&gi[7], 3);   // red.cta
  atomicAdd_system(&gf[1], 2.f); // red.sys
  out[t] = r;
}
