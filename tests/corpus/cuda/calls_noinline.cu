// PTX features: non-inlined device functions (.func with .param .b32/.b64/.f32/
// .align N .b8 x[N] params, struct returns via .param .align N .b8 func_retval0[..]),
// call.uni (retval0), name, (param0, ...); st.param.v2.b32 / ld.param of aggregates; an
// extern "C" device function (.func accumulate); ten parameters; a void function.
struct Vec3 { float x, y, z; };
struct __align__(16) Result { double value; int index; int flags; };

__device__ __noinline__ Vec3 cross(Vec3 a, Vec3 b) {
  return Vec3{a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x};
}

__device__ __noinline__ Result best_of(const double* v, int n, double bias, int flags,
                                       float scale, long long salt, short s, char c, bool invert) {
  Result r{-1e300, -1, flags};
  for (int i = 0; i < n; ++i) {
    double x = v[i] * scale + bias + (double)(salt & 7) + s + c;
    if (invert) x = -x;
    if (x > r.value) { r.value = x; r.index = i; }
  }
  return r;
}

extern "C" __device__ __noinline__ void accumulate(float* dst, float v) { *dst += v; }

__device__ __noinline__ int sum_many(int a, int b, int c, int d, int e, int f, int g, int h, int i, int j) {
  return a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f + 7 * g + 8 * h + 9 * i + 10 * j;
}

extern "C" __global__ void use_calls(const float3* pa, const float3* pb, const double* v,
                                     float3* out, double* rv, int* ri, float* acc, int n) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= n) return;
  Vec3 a{pa[t].x, pa[t].y, pa[t].z}, b{pb[t].x, pb[t].y, pb[t].z};
  Vec3 c = cross(a, b);
  out[t] = make_float3(c.x, c.y, c.z);
  Result r = best_of(v + t * 8, 8, 0.5, t, 2.0f, (long long)t << 40, (short)t, (char)(t & 63), t & 1);
  rv[t] = r.value;
  ri[t] = r.index + sum_many(t, t + 1, t + 2, t + 3, t + 4, t + 5, t + 6, t + 7, t + 8, r.flags);
  accumulate(&acc[t & 31], c.x);
}
