// PTX features: integer atomics of every flavour on global and shared memory:
// atom.add/.cas/.exch/.min/.max (signed+unsigned, 32+64 bit), atom.and/.or/.xor,
// atom.inc/.dec, atom.shared.*, atom.global.* forms, 16-bit atomicCAS (atom.cas.b16).
// NVVM emits atom.* even when the result is unused (ptxas turns those into RED), so
// red.* forms with memory-order/scope qualifiers and red.async (sm_90) come from inline asm.
extern "C" __global__ void atomics_int_global(int* ip, unsigned* up, unsigned long long* ull,
                                              long long* ll, unsigned short* us, int* results) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  int r = 0;
  r += atomicAdd(&ip[0], t);
  r += atomicSub(&ip[1], 1);
  r += atomicExch(&ip[2], t);
  r += atomicMin(&ip[3], -t);
  r += atomicMax(&ip[4], t);
  r += (int)atomicMin(&up[0], (unsigned)t);
  r += (int)atomicMax(&up[1], (unsigned)t);
  r += (int)atomicInc(&up[2], 100u);
  r += (int)atomicDec(&up[3], 100u);
  r += atomicAnd(&ip[5], ~(1 << (t & 31)));
  r += atomicOr(&ip[6], 1 << (t & 31));
  r += atomicXor(&ip[7], t);
  r += atomicCAS(&ip[8], t, t + 1);
  r += (int)atomicAdd(&ull[0], 1ull);
  r += (int)atomicCAS(&ull[1], 0ull, (unsigned long long)t);
  r += (int)atomicExch(&ull[2], (unsigned long long)t);
  r += (int)atomicMin(&ll[0], (long long)-t);
  r += (int)atomicMax(&ll[1], (long long)t);
  r += (int)atomicAnd(&ull[3], 0xffull);
  r += (int)atomicOr(&ull[4], 1ull << (t & 63));
  r += (int)atomicXor(&ull[5], (unsigned long long)t);
  r += (int)atomicCAS(&us[0], (unsigned short)0, (unsigned short)t);
  // Results unused: the compiler emits red.* instead of atom.*
  atomicAdd(&ip[9], 2);
  atomicOr(&ip[10], 4);
  atomicMax(&up[4], (unsigned)t);
  results[t] = r;
}

extern "C" __global__ void atomics_int_shared(int* out) {
  __shared__ int s[8];
  __shared__ unsigned long long s64;
  int t = threadIdx.x;
  if (t < 8) s[t] = 0;
  if (t == 0) s64 = 0;
  __syncthreads();
  atomicAdd(&s[0], 1);
  atomicMax(&s[1], t);
  atomicMin(&s[2], -t);
  atomicInc((unsigned*)&s[3], 7u);
  atomicDec((unsigned*)&s[4], 7u);
  int old = atomicCAS(&s[5], 0, t);
  atomicExch(&s[6], old);
  atomicXor(&s[7], t);
  atomicAdd(&s64, (unsigned long long)t);
  __syncthreads();
  if (t < 8) out[blockIdx.x * 9 + t] = s[t];
  if (t == 0) out[blockIdx.x * 9 + 8] = (int)s64;
}

// red.* with explicit semantics/scope and the sm_90 red.async into a cluster peer's shared memory.
extern "C" __global__ void red_forms(int* gi, unsigned long long* gu, float* gf, int* out) {
  __shared__ __align__(8) unsigned long long bar;
  __shared__ unsigned counter;
  int t = threadIdx.x;
  if (t == 0) { counter = 0; bar = 0; }
  __syncthreads();
  asm volatile("red.global.add.u32 [%0], %1;" :: "l"(gi), "r"(1) : "memory");
  asm volatile("red.relaxed.gpu.global.add.u64 [%0], %1;" :: "l"(gu), "l"((unsigned long long)t) : "memory");
  asm volatile("red.release.sys.global.or.b32 [%0], %1;" :: "l"(gi + 1), "r"(1 << (t & 31)) : "memory");
  asm volatile("red.global.add.f32 [%0], %1;" :: "l"(gf), "f"(0.5f) : "memory");
  asm volatile("red.shared.max.u32 [%0], %1;" :: "r"((unsigned)__cvta_generic_to_shared(&counter)), "r"((unsigned)t) : "memory");
  asm volatile("red.async.relaxed.cluster.shared::cluster.mbarrier::complete_tx::bytes.add.u32 [%0], %1, [%2];"
               :: "r"((unsigned)__cvta_generic_to_shared(&counter)), "r"(1u),
                  "r"((unsigned)__cvta_generic_to_shared(&bar)) : "memory");
  __syncthreads();
  if (t == 0) out[blockIdx.x] = (int)counter;
}
