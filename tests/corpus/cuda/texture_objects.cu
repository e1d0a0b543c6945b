// PTX features: bindless texture objects: tex.1d.v4.f32.s32 (tex1Dfetch), tex.2d.v4.f32.f32
// (tex2D), tex.level / tex.grad forms (tex2DLod/tex2DGrad), tex.a2d layered (tex2DLayered),
// tld4 gather (tex2Dgather -> tld4.r.2d), texture handles as .u64 params, txq queries via asm.
#include <cuda_runtime.h>

extern "C" __global__ void tex_fetch_1d(cudaTextureObject_t t, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tex1Dfetch<float>(t, i) + tex1Dfetch<float>(t, n - 1 - i);
}

extern "C" __global__ void tex_sample_2d(cudaTextureObject_t t, cudaTextureObject_t layered,
                                         float4* out, int w, int h) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= w || y >= h) return;
  float u = (x + 0.5f) / w, v = (y + 0.5f) / h;
  float a = tex2D<float>(t, u, v);
  float b = tex2DLod<float>(t, u, v, 1.5f);
  float c = tex2DGrad<float>(t, u, v, make_float2(1.f / w, 0.f), make_float2(0.f, 1.f / h));
  float4 g = tex2Dgather<float4>(t, u, v, 0);
  float d = tex2DLayered<float>(layered, u, v, y & 3);
  int tw;
  asm("txq.width.b32 %0, [%1];" : "=r"(tw) : "l"(t));
  out[y * w + x] = make_float4(a + g.x, b + g.y, c + g.z, d + g.w + (float)tw);
}

extern "C" __global__ void tex_int_3d(cudaTextureObject_t t3, int4* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int4 v = tex3D<int4>(t3, i * 0.5f, 1.0f, 2.0f);
  out[i] = v;
}
