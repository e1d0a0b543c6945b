// PTX features: load/store cache operators: ld.global.nc (__ldg), ld.global.cs
// (__ldcs), ld.global.cg (__ldcg), ld.global.ca (__ldca), ld.global.lu (__ldlu),
// ld.global.cv (__ldcv), st.global.cs/.cg/.wb/.wt (__stcs/__stcg/__stwb/__stwt),
// vector .v2/.v4 forms of the same, L2 eviction policy via createpolicy +
// ld.global.L2::cache_hint, prefetch.global.L2, and ld.global.nc.L1::no_allocate.
extern "C" __global__ void cache_ops(const float* __restrict__ a, const float4* __restrict__ b,
                                     const int2* c, float* out, float4* out4, int2* out2, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float x = __ldg(&a[i]);
  float4 y = __ldg(&b[i]);
  float z = __ldcs(&a[(i + 1) % n]);
  float w = __ldcg(&a[(i + 2) % n]);
  float v = __ldca(&a[(i + 3) % n]);
  float u = __ldlu(&a[(i + 4) % n]);
  float q = __ldcv(&a[(i + 5) % n]);
  int2 ci = __ldcs(&c[i]);
  __stcs(&out[i], x + z);
  __stcg(&out[(i + n / 2) % n], w + v);
  __stwb(&out4[i], make_float4(y.x + u, y.y, y.z, y.w + q));
  __stwt(&out2[i], make_int2(ci.y, ci.x));
}

extern "C" __global__ void cache_policy_asm(const float* in, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  unsigned long long policy;
  float v;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  asm volatile("ld.global.L2::cache_hint.f32 %0, [%1], %2;" : "=f"(v) : "l"(in + i), "l"(policy));
  asm volatile("prefetch.global.L2 [%0];" :: "l"(in + ((i + 256) % n)));
  float nv;
  asm volatile("ld.global.nc.L1::no_allocate.f32 %0, [%1];" : "=f"(nv) : "l"(in + (n - 1 - i)));
  asm volatile("st.global.L1::no_allocate.f32 [%0], %1;" :: "l"(out + i), "f"(v + nv) : "memory");
}
