// PTX features: inline asm with scoped { } blocks declaring .reg (.pred, .b32, .b64,
// .f32) inside them, %= unique labels, predicated instructions (@p / @!p), multiple
// outputs, "+r" in-out operands, memory clobbers, immediate "n" operands, PTX
// instructions not reachable from C++: prmt, bfe, bfi, lop3.b32, shf.l.wrap, vabsdiff4,
// mad.hi, addc/sub.cc carry chains, testp.finite, copysign, and nested { { } } scopes.
extern "C" __global__ void asm_scoped(const unsigned* a, const unsigned* b, unsigned* out) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  unsigned x = a[t], y = b[t], r0, r1, r2, r3;
  asm("{\n\t"
      ".reg .b32 tmp, tmp2;\n\t"
      ".reg .pred p;\n\t"
      "prmt.b32 tmp, %4, %5, 0x3210;\n\t"
      "bfe.u32 tmp2, %4, 4, 8;\n\t"
      "setp.gt.u32 p, tmp, tmp2;\n\t"
      "@p  add.u32 %0, tmp, tmp2;\n\t"
      "@!p sub.u32 %0, tmp2, tmp;\n\t"
      "bfi.b32 %1, %4, %5, 8, 4;\n\t"
      "lop3.b32 %2, %4, %5, %0, 0x96;\n\t"
      "shf.l.wrap.b32 %3, %4, %5, %6;\n\t"
      "}"
      : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
      : "r"(x), "r"(y), "n"(7));
  // 64-bit add with carry chain on 32-bit halves.
  unsigned lo = x, hi = y;
  asm("{\n\t"
      "add.cc.u32 %0, %0, %2;\n\t"
      "addc.u32 %1, %1, %3;\n\t"
      "}" : "+r"(lo), "+r"(hi) : "r"(r0), "r"(r1));
  unsigned sad;
  asm("vabsdiff4.u32.u32.u32.add %0, %1, %2, %3;" : "=r"(sad) : "r"(x), "r"(y), "r"(0));
  unsigned mh;
  asm("mad.hi.u32 %0, %1, %2, %3;" : "=r"(mh) : "r"(x), "r"(y), "r"(lo));
  out[t * 4 + 0] = r0 ^ r1;
  out[t * 4 + 1] = r2 + r3;
  out[t * 4 + 2] = lo + hi;
  out[t * 4 + 3] = sad + mh;
}

extern "C" __global__ void asm_nested_loops(const float* in, float* out, int n) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  float v = in[t], acc;
  asm volatile("{\n\t"
               ".reg .f32 f<3>;\n\t"
               ".reg .b32 i;\n\t"
               ".reg .pred lp, fin;\n\t"
               "mov.f32 f0, 0f00000000;\n\t"
               "mov.b32 i, 0;\n"
               "LOOP_%=:\n\t"
               "{\n\t"
               ".reg .f32 inner;\n\t"
               "cvt.rn.f32.u32 inner, i;\n\t"
               "fma.rn.f32 f0, %1, inner, f0;\n\t"
               "}\n\t"
               "add.u32 i, i, 1;\n\t"
               "setp.lt.u32 lp, i, %2;\n\t"
               "@lp bra.uni LOOP_%=;\n\t"
               "testp.finite.f32 fin, f0;\n\t"
               "copysign.f32 f1, %1, f0;\n\t"
               "selp.f32 %0, f1, 0f7FC00000, fin;\n\t"
               "}"
               : "=f"(acc) : "f"(v), "r"(n) : "memory");
  out[t] = acc;
}

extern "C" __global__ void asm_u64_ops(const unsigned long long* a, unsigned long long* out) {
  int t = threadIdx.x;
  unsigned long long x = a[t], r;
  unsigned lo, hi;
  asm("{\n\t.reg .b64 t;\n\t"
      "mov.b64 {%1, %2}, %3;\n\t"
      "mul.hi.u64 t, %3, %3;\n\t"
      "popc.b64 %1, t;\n\t"
      "clz.b64 %2, %3;\n\t"
      "mov.b64 %0, {%2, %1};\n\t}"
      : "=l"(r), "=r"(lo), "=r"(hi) : "l"(x));
  out[t] = r + lo + hi;
}
