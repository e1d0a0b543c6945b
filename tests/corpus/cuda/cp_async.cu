// PTX features: Ampere-style asynchronous copies: cp.async.ca.shared.global /
// cp.async.cg.shared.global with 4/8/16-byte sizes and a src-size (zero-fill) operand,
// cp.async.commit_group, cp.async.wait_group N / wait_all (via __pipeline_* primitives
// and inline asm), a double-buffered (multi-stage) pipeline loop, and
// cp.async.mbarrier.arrive.noinc.shared.b64 with mbarrier.init/test_wait.
#include <cuda_pipeline.h>

extern "C" __global__ void cp_async_pipeline(const float4* in, float* out, int tiles) {
  __shared__ __align__(16) float4 buf[2][128];
  int t = threadIdx.x;
  float acc = 0.f;
  __pipeline_memcpy_async(&buf[0][t], &in[t], sizeof(float4));
  __pipeline_commit();
  for (int tile = 0; tile < tiles; ++tile) {
    int cur = tile & 1;
    if (tile + 1 < tiles) {
      __pipeline_memcpy_async(&buf[cur ^ 1][t], &in[(tile + 1) * 128 + t], sizeof(float4));
    }
    __pipeline_commit();
    __pipeline_wait_prior(1);
    __syncthreads();
    float4 v = buf[cur][(t + 1) & 127];
    acc += v.x + v.y + v.z + v.w;
    __syncthreads();
  }
  out[blockIdx.x * blockDim.x + t] = acc;
}

extern "C" __global__ void cp_async_asm(const int* in, int* out, int n) {
  __shared__ __align__(16) int s[4 * 128];
  __shared__ __align__(8) unsigned long long bar;
  int t = threadIdx.x;
  unsigned saddr = (unsigned)__cvta_generic_to_shared(&s[t * 4]);
  unsigned baddr = (unsigned)__cvta_generic_to_shared(&bar);
  int valid = (t * 4 < n) ? 16 : 0;   // zero-fill out-of-range
  if (t == 0) asm volatile("mbarrier.init.shared.b64 [%0], %1;" :: "r"(baddr), "r"((int)blockDim.x));
  __syncthreads();
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(saddr), "l"(in + t * 4), "r"(valid));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" :: "r"(saddr), "l"(in + t));
  asm volatile("cp.async.ca.shared.global.L2::128B [%0], [%1], 8;" :: "r"(saddr + 8), "l"(in + t * 2));
  asm volatile("cp.async.commit_group;");
  asm volatile("cp.async.wait_group 0;");
  asm volatile("cp.async.mbarrier.arrive.noinc.shared.b64 [%0];" :: "r"(baddr));
  asm volatile("{\n\t.reg .pred done;\n\t.reg .b64 st;\n\t"
               "mbarrier.arrive.shared.b64 st, [%0];\n"
               "WAIT_%=:\n\tmbarrier.test_wait.shared.b64 done, [%0], st;\n\t"
               "@!done bra WAIT_%=;\n\t}" :: "r"(baddr) : "memory");
  asm volatile("cp.async.wait_all;");
  __syncthreads();
  out[blockIdx.x * blockDim.x + t] = s[(t * 4 + 5) % 512];
}
