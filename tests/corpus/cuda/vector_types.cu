// PTX features: vector loads/stores ld.global.v2.f32, .v4.f32, .v4.s32/.u32, .v2.f64,
// .v2.u64, .v4.u16 (short4), .v2.u8 (uchar2), vector shared memory ops, make_*
// constructors, and a by-value struct kernel param (.param .align 16 .b8 NAME_param_1[32]).
struct __align__(16) Particle { float4 pos; float4 vel; };

extern "C" __global__ void vec_axpy(const float4* x, float4* y, const float2* s, const int4* ii,
                                    int4* io, const double2* d, double2* dout, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float4 a = x[i], b = y[i];
  float2 k = s[i];
  b.x += k.x * a.x; b.y += k.y * a.y; b.z += k.x * a.z; b.w += k.y * a.w;
  y[i] = b;
  int4 q = ii[i];
  io[i] = make_int4(q.w, q.z, q.y, q.x + (int)b.x);
  double2 dd = d[i];
  dout[i] = make_double2(dd.x * dd.y, dd.x + dd.y);
}

extern "C" __global__ void vec_small_types(const short4* s4, const uchar2* u2, const ulonglong2* l2,
                                           short4* s4o, uchar2* u2o, ulonglong2* l2o, int n) {
  __shared__ float4 tile[128];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int t = threadIdx.x & 127;
  if (i >= n) return;
  short4 a = s4[i];
  uchar2 b = u2[i];
  ulonglong2 c = l2[i];
  tile[t] = make_float4(a.x, a.y, a.z, a.w);
  __syncthreads();
  float4 f = tile[127 - t];
  s4o[i] = make_short4((short)f.x, (short)f.y, (short)(f.z + b.x), (short)(f.w + b.y));
  u2o[i] = make_uchar2(b.y, b.x);
  l2o[i] = make_ulonglong2(c.y + 1, c.x - 1);
}

extern "C" __global__ void particles_step(Particle* p, Particle by_value, float dt, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  Particle q = p[i];
  q.pos.x += (q.vel.x + by_value.vel.x) * dt;
  q.pos.y += (q.vel.y + by_value.vel.y) * dt;
  q.pos.z += (q.vel.z + by_value.vel.z) * dt;
  q.vel.w = by_value.pos.w;
  p[i] = q;
}
