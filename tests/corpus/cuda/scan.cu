// PTX features: Blelloch work-efficient exclusive scan in shared memory with
// bank-conflict-avoiding padded indices (shift/add address arithmetic), up-sweep and
// down-sweep loops with bar.sync inside, a warp-shuffle based inclusive scan
// (shfl.sync.up with predicate) + block-level combine, and a decoupled single-pass
// scan using a global tile counter (atom.global.add) and volatile status flags.
#define LOG_BANKS 5
#define PAD(i) ((i) + ((i) >> LOG_BANKS))

extern "C" __global__ void blelloch_scan(const int* in, int* out, int* block_sums, int n) {
  extern __shared__ int temp[];
  int t = threadIdx.x, base = blockIdx.x * blockDim.x * 2;
  int ai = t, bi = t + blockDim.x;
  temp[PAD(ai)] = base + ai < n ? in[base + ai] : 0;
  temp[PAD(bi)] = base + bi < n ? in[base + bi] : 0;
  int offset = 1, m = blockDim.x * 2;
  for (int d = m >> 1; d > 0; d >>= 1) {
    __syncthreads();
    if (t < d) {
      int a = offset * (2 * t + 1) - 1, b = offset * (2 * t + 2) - 1;
      temp[PAD(b)] += temp[PAD(a)];
    }
    offset <<= 1;
  }
  if (t == 0) { block_sums[blockIdx.x] = temp[PAD(m - 1)]; temp[PAD(m - 1)] = 0; }
  for (int d = 1; d < m; d <<= 1) {
    offset >>= 1;
    __syncthreads();
    if (t < d) {
      int a = offset * (2 * t + 1) - 1, b = offset * (2 * t + 2) - 1;
      int x = temp[PAD(a)];
      temp[PAD(a)] = temp[PAD(b)];
      temp[PAD(b)] += x;
    }
  }
  __syncthreads();
  if (base + ai < n) out[base + ai] = temp[PAD(ai)];
  if (base + bi < n) out[base + bi] = temp[PAD(bi)];
}

extern "C" __global__ void single_pass_scan(const int* in, int* out, int* tile_counter,
                                            volatile int* tile_status, volatile int* tile_prefix, int n) {
  __shared__ int warp_tot[32];
  __shared__ int tile_id, carry;
  if (threadIdx.x == 0) tile_id = atomicAdd(tile_counter, 1);
  __syncthreads();
  int tile = tile_id, lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
  int i = tile * blockDim.x + threadIdx.x;
  int v = i < n ? in[i] : 0;
  for (int o = 1; o < 32; o <<= 1) { int y = __shfl_up_sync(~0u, v, o); if (lane >= o) v += y; }
  if (lane == 31) warp_tot[wid] = v;
  __syncthreads();
  if (wid == 0) {
    int w = lane < (int)(blockDim.x >> 5) ? warp_tot[lane] : 0;
    for (int o = 1; o < 32; o <<= 1) { int y = __shfl_up_sync(~0u, w, o); if (lane >= o) w += y; }
    warp_tot[lane] = w;
  }
  __syncthreads();
  if (wid > 0) v += warp_tot[wid - 1];
  if (threadIdx.x == blockDim.x - 1) {
    int prev = 0;
    if (tile > 0) { while (tile_status[tile - 1] == 0) {} prev = tile_prefix[tile - 1]; }
    tile_prefix[tile] = prev + v;
    __threadfence();
    tile_status[tile] = 1;
    carry = prev;
  }
  __syncthreads();
  if (i < n) out[i] = v + carry;
}
