// PTX features: sparse matrix-vector product in CSR format: scalar (thread per row)
// and vector (warp per row) kernels, irregular indirect loads x[col[j]] (ld.global.nc
// through __restrict__), 64-bit index arithmetic, warp shuffle reduction, and a
// double-precision variant with a templated value type (mangled names).
extern "C" __global__ void spmv_csr_scalar(int rows, const int* __restrict__ rowptr, const int* __restrict__ col,
                                           const float* __restrict__ val, const float* __restrict__ x, float* y) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  float s = 0.f;
  for (int j = rowptr[r]; j < rowptr[r + 1]; ++j) s += val[j] * x[col[j]];
  y[r] = s;
}

template <typename T>
__global__ void spmv_csr_vector(int rows, const long long* __restrict__ rowptr, const int* __restrict__ col,
                                const T* __restrict__ val, const T* __restrict__ x, T* __restrict__ y) {
  int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x & 31;
  if (warp >= rows) return;
  T s = 0;
  for (long long j = rowptr[warp] + lane; j < rowptr[warp + 1]; j += 32) s += val[j] * __ldg(&x[col[j]]);
  for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
  if (lane == 0) y[warp] = s;
}
template __global__ void spmv_csr_vector<float>(int, const long long*, const int*, const float*, const float*, float*);
template __global__ void spmv_csr_vector<double>(int, const long long*, const int*, const double*, const double*, double*);
