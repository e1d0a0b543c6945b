// PTX features: random-access gather/scatter: an inline xorshift/Philox-like RNG
// (mul.hi.u32, xor/shift chains, mul.wide), indices computed from random numbers
// (rem.u32 / mul.hi range reduction), gathers through 64-bit indices, scatter with
// atomicExch, unaligned byte gathers (ld.global.u8) and a pointer-chasing loop
// (dependent ld.global.u64 chain) typical of linked-list traversal.
__device__ __forceinline__ unsigned philox_round(unsigned& c0, unsigned& c1, unsigned key) {
  unsigned hi = __umulhi(0xD2511F53u, c0), lo = 0xD2511F53u * c0;
  unsigned n0 = hi ^ c1 ^ key, n1 = lo;
  c0 = n0; c1 = n1;
  return n0 ^ n1;
}

extern "C" __global__ void random_gather(const float* __restrict__ src, size_t n_src, float* dst,
                                         int n_dst, unsigned seed) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n_dst) return;
  unsigned c0 = i, c1 = seed, key = seed * 0x9E3779B9u;
  float s = 0.f;
  for (int r = 0; r < 4; ++r) {
    unsigned x = philox_round(c0, c1, key + r);
    size_t idx = ((size_t)x * 2654435761ull) % n_src;
    s += src[idx];
  }
  dst[i] = s;
}

extern "C" __global__ void random_scatter(const int* vals, int* table, unsigned mask, int n, unsigned seed) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  unsigned x = seed ^ (unsigned)i;
  x ^= x << 13; x ^= x >> 17; x ^= x << 5;
  atomicExch(&table[x & mask], vals[i]);
}

extern "C" __global__ void byte_gather(const unsigned char* bytes, const long long* offsets, unsigned* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const unsigned char* p = bytes + offsets[i];
  out[i] = p[0] | (p[1] << 8) | (p[2] << 16) | ((unsigned)p[3] << 24);
}

struct Node { Node* next; int value; };

extern "C" __global__ void chase_list(Node* const* heads, int* sums, int max_steps) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  Node* p = heads[i];
  int s = 0;
  for (int k = 0; p != nullptr && k < max_steps; ++k) { s += p->value; p = p->next; }
  sums[i] = s;
}
