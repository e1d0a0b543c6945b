// PTX features: bitonic sort: in-block sort of key/value pairs in shared memory with
// XOR partner indexing, data-dependent swaps (selp / predicated st.shared), nested
// k/j loops with bar.sync, and a global-memory merge step kernel (one launch per
// (k, j) pair) templated on key type (mangled names for unsigned and float keys).
template <typename K>
__global__ void bitonic_block_sort(K* keys, int* vals, int n) {
  extern __shared__ __align__(16) unsigned char raw[];
  K* sk = reinterpret_cast<K*>(raw);
  int* sv = reinterpret_cast<int*>(sk + blockDim.x);
  int t = threadIdx.x, g = blockIdx.x * blockDim.x + t;
  sk[t] = g < n ? keys[g] : K(~0u);
  sv[t] = g < n ? vals[g] : -1;
  __syncthreads();
  for (unsigned k = 2; k <= blockDim.x; k <<= 1) {
    for (unsigned j = k >> 1; j > 0; j >>= 1) {
      unsigned p = t ^ j;
      if (p > (unsigned)t) {
        bool up = (t & k) == 0;
        K a = sk[t], b = sk[p];
        if ((a > b) == up) {
          sk[t] = b; sk[p] = a;
          int tv = sv[t]; sv[t] = sv[p]; sv[p] = tv;
        }
      }
      __syncthreads();
    }
  }
  if (g < n) { keys[g] = sk[t]; vals[g] = sv[t]; }
}
template __global__ void bitonic_block_sort<unsigned>(unsigned*, int*, int);
template __global__ void bitonic_block_sort<float>(float*, int*, int);

extern "C" __global__ void bitonic_global_step(float* keys, int j, int k, int n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  unsigned p = i ^ j;
  if (i >= (unsigned)n || p >= (unsigned)n || p <= i) return;
  float a = keys[i], b = keys[p];
  bool up = (i & k) == 0;
  if ((a > b) == up) { keys[i] = b; keys[p] = a; }
}
