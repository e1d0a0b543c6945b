// PTX features: Hopper bulk async copies and TMA: mbarrier.init/arrive.expect_tx (with the
// `_` sink operand)/try_wait.parity loops on .shared::cta addresses, cp.async.bulk
// .shared::cluster.global.mbarrier::complete_tx::bytes (1-D), cp.async.bulk.tensor.2d
// .shared::cluster.global.tile.mbarrier::complete_tx::bytes with a CUtensorMap passed as a
// __grid_constant__ kernel parameter (.param .align 128 .b8 NAME_param_0[128], its address
// taken with mov.b64 %rd, NAME_param_0), cp.async.bulk.tensor store
// (global.shared::cta.bulk_group), cp.async.bulk.commit_group / wait_group(.read),
// fence.proxy.async, fence.mbarrier_init, prefetch.tensormap, mbarrier.inval.
#include <cuda.h>
#include <cstdint>

__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t phase) {
  asm volatile("{\n\t.reg .pred P1;\n"
               "LAB_WAIT:\n\t"
               "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n\t"
               "@P1 bra DONE;\n\tbra LAB_WAIT;\n"
               "DONE:\n\t}" :: "r"(bar), "r"(phase) : "memory");
}

extern "C" __global__ void bulk_copy_1d(const float* in, float* out, int chunk_floats) {
  extern __shared__ __align__(128) float sbuf[];
  __shared__ __align__(8) uint64_t bar;
  uint32_t sb = (uint32_t)__cvta_generic_to_shared(sbuf);
  uint32_t bb = (uint32_t)__cvta_generic_to_shared(&bar);
  uint32_t bytes = chunk_floats * 4;
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(bb));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bb), "r"(bytes));
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 :: "r"(sb), "l"(in + (size_t)blockIdx.x * chunk_floats), "r"(bytes), "r"(bb) : "memory");
  }
  mbar_wait(bb, 0);
  for (int i = threadIdx.x; i < chunk_floats; i += blockDim.x) sbuf[i] *= 2.0f;
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  if (threadIdx.x == 0) {
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;"
                 :: "l"(out + (size_t)blockIdx.x * chunk_floats), "r"(sb), "r"(bytes) : "memory");
    asm volatile("cp.async.bulk.commit_group;");
    asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
  }
}

extern "C" __global__ void tma_tile_2d(const __grid_constant__ CUtensorMap tmap_in,
                                       const __grid_constant__ CUtensorMap tmap_out, int tiles_x) {
  __shared__ __align__(128) float tile[32 * 32];
  __shared__ __align__(8) uint64_t bar;
  uint32_t st = (uint32_t)__cvta_generic_to_shared(tile);
  uint32_t bb = (uint32_t)__cvta_generic_to_shared(&bar);
  int x = (blockIdx.x % tiles_x) * 32, y = (blockIdx.x / tiles_x) * 32;
  if (threadIdx.x == 0) {
    asm volatile("prefetch.tensormap [%0];" :: "l"(&tmap_in) : "memory");
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(bb));
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bb), "r"(32 * 32 * 4));
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3}], [%4];"
                 :: "r"(st), "l"(&tmap_in), "r"(x), "r"(y), "r"(bb) : "memory");
  }
  __syncthreads();
  mbar_wait(bb, 0);
  for (int i = threadIdx.x; i < 32 * 32; i += blockDim.x) tile[i] = tile[i] * tile[i];
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  if (threadIdx.x == 0) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];"
                 :: "l"(&tmap_out), "r"(x), "r"(y), "r"(st) : "memory");
    asm volatile("cp.async.bulk.commit_group;");
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
    asm volatile("mbarrier.inval.shared::cta.b64 [%0];" :: "r"(bb));
  }
}
