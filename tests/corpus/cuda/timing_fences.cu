// PTX features: time and ordering: %clock64 / %clock / %globaltimer reads (mov.u64
// %rd, %clock64), nanosleep.u32 (immediate and register), bar.warp.sync, membar.gl /
// membar.cta / membar.sys (__threadfence*), fence.acq_rel.gpu, volatile loads/stores
// (ld.volatile.global / st.volatile.shared), a spin-wait flag protocol between blocks,
// __syncthreads_count/_and/_or (bar.red.popc/.and/.or), named barriers bar.sync 1, N
// and bar.arrive.
extern "C" __global__ void timed_section(const float* in, float* out, long long* cycles, int n) {
  long long t0 = clock64();
  unsigned c32 = clock();
  unsigned long long gt;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(gt));
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = i < n ? in[i] : 0.f;
  for (int k = 0; k < 8; ++k) v = v * 1.0001f + 0.5f;
  __nanosleep(100);
  __nanosleep((unsigned)(i & 7) * 32);
  __syncwarp();
  if (i < n) out[i] = v;
  cycles[i] = clock64() - t0 + (long long)c32 + (long long)(gt & 1);
}

extern "C" __global__ void flag_handoff(volatile int* flag, volatile int* data, int* out) {
  __shared__ volatile int smem_flag;
  if (threadIdx.x == 0) smem_flag = 0;
  __syncthreads();
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    data[0] = 42;
    __threadfence();
    flag[0] = 1;
    __threadfence_system();
  } else if (blockIdx.x == 1 && threadIdx.x == 0) {
    while (flag[0] == 0) __nanosleep(64);
    __threadfence_block();
    out[0] = data[0];
    smem_flag = 1;
  }
  __syncthreads();
  out[1 + blockIdx.x] = smem_flag;
}

extern "C" __global__ void barrier_reductions(const int* in, int* out) {
  int t = threadIdx.x;
  int v = in[blockIdx.x * blockDim.x + t];
  int cnt = __syncthreads_count(v > 0);
  int all = __syncthreads_and(v != 0);
  int any = __syncthreads_or(v < 0);
  // Producer/consumer with named barrier 1: first 64 threads arrive, last 64 sync.
  __shared__ int stage[64];
  if (t < 64) {
    stage[t] = v * 2;
    asm volatile("bar.arrive 1, 128;" ::: "memory");
  } else if (t < 128) {
    asm volatile("bar.sync 1, 128;" ::: "memory");
    v += stage[t - 64];
  }
  asm volatile("fence.acq_rel.gpu;" ::: "memory");
  out[blockIdx.x * blockDim.x + t] = v + cnt + all * 2 + any * 4;
}
