// PTX features: a dense switch lowered to a jump table: brx.idx with a
// .branchtargets label list ($L_brx_0: .branchtargets $L__BB0_2, ...;), plus a sparse
// switch lowered to compare chains, a switch over an opcode stream (tiny interpreter),
// and a hand-written brx.idx/.branchtargets table inside a scoped inline-asm block.
// NVVM only emits jump tables when asked (default density threshold disables them),
// so scripts/build-corpus.sh reads the flags line below for this file:
// corpus-nvcc-flags: -Xcicc -jump-table-density=10
__device__ __noinline__ int op_slow(int x, int k) { return x * k + (x >> k); }

extern "C" __global__ void interpret(const unsigned char* code, int len, const int* in, int* out) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  int acc = in[t], reg = t;
  for (int pc = 0; pc < len; ++pc) {
    switch (code[pc]) {
      case 0: acc += reg; break;
      case 1: acc -= reg; break;
      case 2: acc *= 3; break;
      case 3: acc ^= 0x5a5a; break;
      case 4: reg = acc; break;
      case 5: acc = op_slow(acc, 2); break;
      case 6: acc <<= 1; break;
      case 7: acc >>= 2; break;
      case 8: reg += 17; break;
      case 9: acc = in[(t + reg) & 255]; break;
      case 10: out[(t + pc) & 255] = acc; break;
      case 11: acc = max(acc, reg); break;
      case 12: acc = min(acc, reg); break;
      case 13: acc = op_slow(reg, 3); break;
      case 14: reg = __popc(acc); break;
      case 15: pc = len; break;
      default: acc = -acc; break;
    }
  }
  out[t] = acc + reg;
}

extern "C" __global__ void sparse_switch(const int* keys, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int r;
  switch (keys[i]) {
    case 1: r = 10; break;
    case 100: r = op_slow(i, 1); break;
    case 1000: r = 30; break;
    case 65536: r = op_slow(i, 4); break;
    case -7: r = 50; break;
    default: r = 0;
  }
  out[i] = r;
}

// brx.idx written by hand, independent of compiler flags.
extern "C" __global__ void brx_asm(const int* sel, int* out) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  int r;
  asm volatile("{\n\t"
               ".reg .u32 idx;\n\t"
               "and.b32 idx, %1, 3;\n\t"
               "TBL_%=: .branchtargets C0_%=, C1_%=, C2_%=, C3_%=;\n\t"
               "brx.idx idx, TBL_%=;\n"
               "C0_%=:\n\tmov.u32 %0, 11;\n\tbra.uni END_%=;\n"
               "C1_%=:\n\tmov.u32 %0, 22;\n\tbra.uni END_%=;\n"
               "C2_%=:\n\tmov.u32 %0, 33;\n\tbra.uni END_%=;\n"
               "C3_%=:\n\tmov.u32 %0, 44;\n"
               "END_%=:\n\t}"
               : "=r"(r) : "r"(sel[t]));
  out[t] = r;
}
