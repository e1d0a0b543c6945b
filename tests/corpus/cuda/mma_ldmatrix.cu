// PTX features: warp-level tensor core ops via inline asm: ldmatrix.sync.aligned
// .m8n8.x4/.x2(.trans).shared.b16 with brace vector operands, mma.sync.aligned
// .m16n8k16.row.col.f32.f16.f16.f32 (4+2+4 register lists), mma m16n8k8 tf32,
// mma m16n8k32 s8 (.satfinite), stmatrix.sync.aligned.m8n8.x4.shared.b16 (sm_90),
// and the WMMA C++ API (wmma.load/mma/store .sync.aligned intrinsics).
#include <mma.h>
#include <cuda_fp16.h>

extern "C" __global__ void mma_f16_tile(const __half* A, const __half* B, float* C) {
  __shared__ __align__(16) __half sA[16 * 16];
  __shared__ __align__(16) __half sB[16 * 8];
  __shared__ __align__(16) __half sOut[16 * 16];
  int lane = threadIdx.x & 31;
  for (int k = lane; k < 256; k += 32) sA[k] = A[k];
  for (int k = lane; k < 128; k += 32) sB[k] = B[k];
  __syncwarp();
  unsigned a0, a1, a2, a3, b0, b1;
  unsigned sa = (unsigned)__cvta_generic_to_shared(&sA[(lane % 16) * 16 + (lane / 16) * 8]);
  unsigned sb = (unsigned)__cvta_generic_to_shared(&sB[(lane % 16) * 8]);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(sa));
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];"
               : "=r"(b0), "=r"(b1) : "r"(sb));
  float d0 = 0.f, d1 = 0.f, d2 = 0.f, d3 = 0.f;
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
               : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  int row = lane / 4, col = (lane % 4) * 2;
  C[row * 8 + col] = d0; C[row * 8 + col + 1] = d1;
  C[(row + 8) * 8 + col] = d2; C[(row + 8) * 8 + col + 1] = d3;
  // Pack back to half and store a fragment with stmatrix (sm_90+).
  __half2 p0 = __floats2half2_rn(d0, d1), p1 = __floats2half2_rn(d2, d3);
  unsigned so = (unsigned)__cvta_generic_to_shared(&sOut[(lane % 16) * 16]);
  asm volatile("stmatrix.sync.aligned.m8n8.x2.shared.b16 [%0], {%1, %2};"
               :: "r"(so), "r"(*(unsigned*)&p0), "r"(*(unsigned*)&p1) : "memory");
  __syncwarp();
  C[128 + lane] = __half2float(sOut[lane * 8]);
}

extern "C" __global__ void mma_tf32_int8(const unsigned* a, const unsigned* b, float* c, int* ci) {
  int lane = threadIdx.x & 31;
  unsigned ta[4] = {a[lane * 4], a[lane * 4 + 1], a[lane * 4 + 2], a[lane * 4 + 3]};
  unsigned tb[2] = {b[lane * 2], b[lane * 2 + 1]};
  float d[4] = {0.f, 0.f, 0.f, 0.f};
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
               "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(ta[0]), "r"(ta[1]), "r"(ta[2]), "r"(ta[3]), "r"(tb[0]), "r"(tb[1]));
  int e[4] = {0, 0, 0, 0};
  asm volatile("mma.sync.aligned.m16n8k32.row.col.satfinite.s32.s8.s8.s32 "
               "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+r"(e[0]), "+r"(e[1]), "+r"(e[2]), "+r"(e[3])
               : "r"(ta[0]), "r"(ta[1]), "r"(ta[2]), "r"(ta[3]), "r"(tb[0]), "r"(tb[1]));
  for (int k = 0; k < 4; ++k) { c[lane * 4 + k] = d[k]; ci[lane * 4 + k] = e[k]; }
}

extern "C" __global__ void wmma_16x16x16(const __half* a, const __half* b, float* c) {
  using namespace nvcuda;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
  wmma::fill_fragment(fc, 0.0f);
  wmma::load_matrix_sync(fa, a + blockIdx.x * 256, 16);
  wmma::load_matrix_sync(fb, b + blockIdx.x * 256, 16);
  wmma::mma_sync(fc, fa, fb, fc);
  wmma::store_matrix_sync(c + blockIdx.x * 256, fc, 16, wmma::mem_row_major);
}
