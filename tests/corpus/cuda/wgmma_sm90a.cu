// PTX features (sm_90a only; .target sm_90a): warpgroup MMA via inline asm:
// wgmma.fence.sync.aligned, wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 with a
// {4 x f32} accumulator list, two 64-bit matrix descriptors, scale-d predicate and
// immediate scale/transpose operands; wgmma.commit_group / wait_group; the
// register-A form (m64n8k16 with {4 x b32} A fragment); setmaxnreg.inc/.dec;
// fence.proxy.async.shared::cta; elect.sync with a predicate/register pair.
#include <cstdint>

__device__ __forceinline__ uint64_t make_smem_desc(const void* smem_ptr) {
  uint32_t addr = (uint32_t)__cvta_generic_to_shared(smem_ptr);
  uint64_t desc = 0;
  desc |= (uint64_t)((addr & 0x3FFFF) >> 4);          // start address
  desc |= (uint64_t)(16 >> 4) << 16;                  // leading byte offset
  desc |= (uint64_t)(128 >> 4) << 32;                 // stride byte offset
  return desc;                                         // no swizzle
}

extern "C" __global__ void __launch_bounds__(128) wgmma_m64n8k16(const uint4* A, const uint4* B, float* C) {
  __shared__ __align__(128) uint4 sA[64 * 16 * 2 / 16];
  __shared__ __align__(128) uint4 sB[8 * 16 * 2 / 16];
  int t = threadIdx.x;
  for (int k = t; k < 128; k += 128) sA[k] = A[k];
  if (t < 16) sB[t] = B[t];
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  uint64_t da = make_smem_desc(sA), db = make_smem_desc(sB);
  float d0 = 0.f, d1 = 0.f, d2 = 0.f, d3 = 0.f;
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
  asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %6, 0;\n\t"
               "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 "
               "{%0, %1, %2, %3}, %4, %5, p, 1, 1, 0, 0;\n\t}"
               : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
               : "l"(da), "l"(db), "r"(0));
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
  // Register-A variant: A fragment in 4 x b32 registers.
  uint32_t ra[4] = {(uint32_t)t, (uint32_t)t * 3, (uint32_t)t ^ 0x3c003c00u, 0x3c003c00u};
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
  asm volatile("wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, %8, 1, 1, 1, 0;"
               : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
               : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "l"(db));
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
  int warp = t / 32, lane = t % 32;
  int row = warp * 16 + lane / 4, col = (lane % 4) * 2;
  C[row * 8 + col] = d0; C[row * 8 + col + 1] = d1;
  C[(row + 8) * 8 + col] = d2; C[(row + 8) * 8 + col + 1] = d3;
}

extern "C" __global__ void __launch_bounds__(256, 1) setmaxnreg_elect(int* out) {
  int warpgroup = threadIdx.x / 128;
  if (warpgroup == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
  }
  unsigned leader, is_leader;
  asm volatile("{\n\t.reg .pred P;\n\telect.sync %0|P, 0xffffffff;\n\tselp.u32 %1, 1, 0, P;\n\t}"
               : "=r"(leader), "=r"(is_leader));
  if (is_leader) atomicAdd(&out[warpgroup], (int)leader + 1);
}
