// PTX features: every shfl.sync mode (idx, up, down, bfly) with immediate and register
// lane/mask operands and a width (clamp/segmask operand computed from width), on
// int/float/long long/double; the predicate-output form `shfl.sync.up.b32 %r|%p`
// appears when the compiler uses the validity predicate.
extern "C" __global__ void shuffle_modes(const int* in, int* out, float* fout, long long* lout, int srcLane) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  int v = in[t];
  int a = __shfl_sync(0xffffffffu, v, 0);
  int b = __shfl_sync(0xffffffffu, v, srcLane, 16);
  int c = __shfl_up_sync(0xffffffffu, v, 1);
  int d = __shfl_up_sync(0xffffffffu, v, 3, 8);
  int e = __shfl_down_sync(0x0000ffffu, v, 2, 16);
  int f = __shfl_xor_sync(0xffffffffu, v, 5);
  float g = __shfl_xor_sync(0xffffffffu, (float)v * 0.5f, srcLane & 31, 32);
  long long h = __shfl_sync(0xffffffffu, (long long)v << 33, 7);
  double k = __shfl_down_sync(0xffffffffu, (double)v, 1);
  out[t] = a + b + c + d + e + f;
  fout[t] = g + (float)k;
  lout[t] = h;
}

// Inclusive warp scan with shfl.up and the lane-validity predicate.
extern "C" __global__ void warp_inclusive_scan(const int* in, int* out) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  int lane = threadIdx.x & 31;
  int v = in[t];
#pragma unroll
  for (int off = 1; off < 32; off <<= 1) {
    int n = __shfl_up_sync(0xffffffffu, v, off);
    if (lane >= off) v += n;
  }
  out[t] = v;
}

// Explicit predicate-returning shuffle via inline asm.
extern "C" __global__ void shuffle_pred_asm(const int* in, int* out) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  int v = in[t], r, valid;
  asm volatile("{\n\t.reg .pred p;\n\t"
               "shfl.sync.up.b32 %0|p, %2, 4, 0, 0xffffffff;\n\t"
               "selp.s32 %1, 1, 0, p;\n\t}"
               : "=r"(r), "=r"(valid) : "r"(v));
  out[t] = valid ? r : -1;
}
