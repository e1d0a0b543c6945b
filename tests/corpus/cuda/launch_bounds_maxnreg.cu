// PTX features: kernel performance directives: .maxntid X, Y, Z and .minnctapersm N
// (__launch_bounds__(threads, minBlocks)), .maxclusterrank (third launch-bounds
// argument), .maxnreg N (__maxnreg__), templated launch bounds on .weak .entry kernels,
// and .pragma "nounroll"; from #pragma unroll 1.
extern "C" __global__ void __launch_bounds__(256, 2) lb_256_2(const float* in, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float acc = 0.f;
#pragma unroll 1
  for (int k = 0; k < 16; ++k) acc += in[(i + k * 97) % n];
  if (i < n) out[i] = acc;
}

extern "C" __global__ void __launch_bounds__(1024) lb_1024(int* data) {
  data[blockIdx.x * 1024 + threadIdx.x] += 1;
}

extern "C" __global__ void __launch_bounds__(128, 4, 8) lb_cluster_rank(float* data) {
  data[blockIdx.x * 128 + threadIdx.x] *= 2.0f;
}

extern "C" __global__ void __maxnreg__(32) maxnreg_32(const double* a, double* b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  double x = a[i], y = x * x, z = y * x, w = z * y;
  b[i] = x + y * 0.5 + z * 0.25 + w * 0.125 + sqrt(fabs(x));
}

template <int THREADS>
__global__ void __launch_bounds__(THREADS) lb_template(float* p) {
  p[blockIdx.x * THREADS + threadIdx.x] = (float)THREADS;
}
template __global__ void lb_template<64>(float*);
template __global__ void lb_template<512>(float*);
