// PTX features: state-space queries and conversions: isspacep.global/.shared/.const/
// .local/.shared::cluster (__isGlobal/__isShared/__isConstant/__isLocal/__isClusterShared),
// cvta.to.shared / cvta.shared (__cvta_generic_to_shared / __cvta_shared_to_generic),
// cvta.global/.local/.const, 32-bit shared addresses, generic loads through pointers of
// unknown space (ld.u32 without a state space), and the address of a __grid_constant__
// kernel parameter (mov.b64 %rd, NAME_param_2; cvta.param).
struct Big { int v[8]; };

__device__ __noinline__ int classify(const void* p) {
  return (__isGlobal(p) ? 1 : 0) | (__isShared(p) ? 2 : 0) | (__isConstant(p) ? 4 : 0) |
         (__isLocal(p) ? 8 : 0) | (__isCtaShared(p) ? 16 : 0) | (__isClusterShared(p) ? 32 : 0);
}

__device__ __noinline__ int generic_load(const int* p, int i) { return p[i]; }

__constant__ int cvals[4] = {1, 2, 3, 4};

extern "C" __global__ void spaces(const int* g, int* out, const __grid_constant__ Big big) {
  __shared__ int s[32];
  int local[4];
  int t = threadIdx.x & 31;
  s[t] = g[t];
  for (int k = 0; k < 4; ++k) local[k] = t + k;
  __syncthreads();
  size_t sh = __cvta_generic_to_shared(&s[t]);
  int* back = static_cast<int*>(__cvta_shared_to_generic(sh));
  size_t ga = __cvta_generic_to_global(g);
  const int* gback = static_cast<const int*>(__cvta_global_to_generic(ga));
  size_t ca = __cvta_generic_to_constant(cvals);
  size_t la = __cvta_generic_to_local(local);
  int r = classify(g) + classify(&s[t]) * 64 + classify(cvals) * 4096 + classify(local + (t & 3)) * 8;
  r += generic_load(back, 0) + generic_load(gback, t) + generic_load(local, t & 3) + generic_load(cvals, t & 3);
  r += (int)__isGridConstant(&big) + big.v[t & 7];
  out[blockIdx.x * 32 + t] = r + (int)(sh & 3) + (int)(ca & 1) + (int)(la & 1);
}
