// PTX features: integer division/remainder by variables (div.s32, div.u32, div.s64,
// div.u64; remainders become mul/sub), division by constants (mul.hi magic sequences),
// mul.hi .s32/.u32/.s64, sad.s32, min/max .s64, abs .s32/.s64, brev/clz/popc/bfind,
// fns.b32 (__fns), funnel shifts (shf.l.wrap / shf.r.clamp), prmt (__byte_perm),
// dp4a / dp2a.lo (sm_61+), SIMD video intrinsics (vabsdiff4 and lop3-based __vadd4 ...),
// float->int conversions with rounding modes.
extern "C" __global__ void int_div(const int* a, const int* b, const long long* la,
                                   const long long* lb, int* out, long long* lout, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int x = a[i], y = b[i] | 1;
  unsigned ux = (unsigned)x, uy = (unsigned)y;
  long long lx = la[i], ly = lb[i] | 1;
  out[i * 4 + 0] = x / y + x % y;
  out[i * 4 + 1] = (int)(ux / uy + ux % uy);
  out[i * 4 + 2] = x / 7 + x % 13 + (int)(ux / 10u);
  out[i * 4 + 3] = __mul24(x, y) + __umulhi(ux, uy) + __mulhi(x, y) + __sad(x, y, 3) + abs(x);
  lout[i * 2] = lx / ly + lx % ly + (long long)((unsigned long long)lx / (unsigned long long)ly);
  lout[i * 2 + 1] = max(lx, ly) - min(lx, ly) + __mul64hi(lx, ly) + llabs(lx) + lx / 1000;
}

extern "C" __global__ void bit_ops(const unsigned* a, const unsigned* b, unsigned* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  unsigned x = a[i], y = b[i];
  unsigned r = __brev(x) ^ __clz(x) ^ __popc(y) ^ __ffs(x) ^ __ffsll((long long)y << 20);
  r += __funnelshift_l(x, y, i) + __funnelshift_rc(x, y, i);
  r += __byte_perm(x, y, 0x5140);
  r += __dp4a(x, y, 5u) + (unsigned)__dp2a_lo((int)x, (int)y, 7);
  r += __vadd4(x, y) ^ __vabsdiffu4(x, y) ^ __vcmpgtu2(x, y) ^ __vmaxs4(x, y);
  r += __popcll(((unsigned long long)x << 32) | y) + __clzll((long long)y);
  r += (unsigned)__float2int_rn((float)x * 0.3f) + __float2uint_rz((float)y) + (unsigned)__double2int_rd(x * 1.5);
  r += (unsigned)__fns(x, 0, 3);
  out[i] = r;
}
