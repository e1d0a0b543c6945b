// PTX features: double-precision math from libdevice (inlined __nv_* expansions):
// sqrt.rn.f64, div.rn.f64, fma.rn.f64, rcp.approx.ftz.f64, exp/log/pow/sin/cos/tanh/erf/
// atan2 polynomial expansions with many f64 immediates (0dXXXXXXXXXXXXXXXX), the
// __internal_trig_reduction_slowpathd .func with a struct return and a local array,
// madc/addc carry chains, cvt.rzi/rni/rmi; single-precision fast intrinsics
// (ex2.approx.ftz.f32, lg2.approx, sin/cos.approx, rsqrt.approx, div.approx.f32,
// div.rn.f32, sqrt.rm.f32, mul.rp.f32, cvt.sat.f32.f32).
extern "C" __global__ void dmath(const double* x, const double* y, double* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  double a = x[i], b = y[i];
  double r = sqrt(fabs(a)) + exp(-a * a) + log1p(fabs(b)) + pow(fabs(a) + 1.0, b);
  r += sin(a) * cos(b) + tanh(a - b) + erf(a) + atan2(a, b) + cbrt(b);
  r += a / (b + 1e-9) + rsqrt(fabs(b) + 1.0) + fmod(a, 3.0) + floor(a) + round(b);
  out[i] = fma(r, a, b) + (double)isnan(r) + (double)isinf(a);
}

extern "C" __global__ void fmath_fast(const float* x, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float a = x[i];
  float r = __expf(a) + __logf(fabsf(a) + 1.f) + __sinf(a) * __cosf(a) + __fdividef(a, a + 2.f);
  r += rsqrtf(fabsf(a) + 1.f) + exp2f(a) + log2f(fabsf(a) + 1.f) + __powf(2.f, a);
  r += erff(a) + tanhf(a) + sinpif(a) + normcdff(a) + a / (a * a + 1.f);
  out[i] = __saturatef(r) + __frcp_rn(a + 3.f) + __fsqrt_rd(fabsf(a)) + __fadd_rz(a, r) + __fmul_ru(a, r);
}
