// PTX features: bindless surface objects: suld.b.2d.b32.trap / sust.b.2d.b32.trap
// (surf2Dread/surf2Dwrite), 1-D and layered forms (suld.b.1d, sust.b.a2d), vector
// forms .v4.b32 / .v2.b16, the boundary-mode suffixes .clamp and .zero, suq query.
#include <cuda_runtime.h>

extern "C" __global__ void surf_blur(cudaSurfaceObject_t src, cudaSurfaceObject_t dst, int w, int h) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= w || y >= h) return;
  float c = surf2Dread<float>(src, x * 4, y);
  float l = surf2Dread<float>(src, (x - 1) * 4, y, cudaBoundaryModeClamp);
  float r = surf2Dread<float>(src, (x + 1) * 4, y, cudaBoundaryModeZero);
  surf2Dwrite(0.5f * c + 0.25f * (l + r), dst, x * 4, y);
}

extern "C" __global__ void surf_vec_layered(cudaSurfaceObject_t s1d, cudaSurfaceObject_t lay,
                                            cudaSurfaceObject_t h2, int n, int layers) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float4 v = surf1Dread<float4>(s1d, i * 16);
  surf1Dwrite(make_float4(v.w, v.z, v.y, v.x), s1d, i * 16);
  for (int l = 0; l < layers; ++l) {
    int p = surf2DLayeredread<int>(lay, i * 4, 0, l);
    surf2DLayeredwrite(p + l, lay, i * 4, 0, l, cudaBoundaryModeTrap);
  }
  ushort2 hv = surf2Dread<ushort2>(h2, i * 4, 1);
  surf2Dwrite(make_ushort2(hv.y, hv.x), h2, i * 4, 1);
  int width;
  asm("suq.width.b32 %0, [%1];" : "=r"(width) : "l"(s1d));
  if (i == 0) surf1Dwrite(width, s1d, 0);
}
