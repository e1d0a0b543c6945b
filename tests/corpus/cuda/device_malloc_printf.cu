// PTX features: calls to external device-runtime functions declared with
// .extern .func: malloc/free ((.param .b64 func_retval0) malloc), vprintf with an
// argument buffer built in .local (st.local of each vararg, cvta.local), string literals
// as .global .align 1 .b8 $str... arrays addressed via cvta.global.u64, and memset/memcpy
// expanded into byte loops (ld.u8/st.u8) over generic heap pointers.
#include <cstdio>

extern "C" __global__ void heap_per_thread(int* out, int count) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  int* buf = static_cast<int*>(malloc(count * sizeof(int)));
  if (buf == nullptr) { printf("thread %d: malloc of %d ints failed\n", t, count); return; }
  for (int i = 0; i < count; ++i) buf[i] = t * i;
  memset(buf, 0, (count / 2) * sizeof(int));
  int s = 0;
  for (int i = 0; i < count; ++i) s += buf[i];
  out[t] = s;
  free(buf);
}

extern "C" __global__ void printf_formats(const float* f, const double* d, long long ll) {
  int t = threadIdx.x;
  if (t == 0) printf("block %d of %d\n", blockIdx.x, gridDim.x);
  printf("t=%d f=%f d=%.3e ll=%lld p=%p c=%c s=%s\n", t, f[t], d[t], ll, f, 'x', "str");
  if (t == 1) printf("no-args line\n");
}

extern "C" __global__ void heap_shared_block(float** slot, int n) {
  __shared__ float* block_buf;
  if (threadIdx.x == 0) block_buf = (float*)malloc(n * sizeof(float));
  __syncthreads();
  if (block_buf == nullptr) return;
  for (int i = threadIdx.x; i < n; i += blockDim.x) block_buf[i] = (float)i;
  __syncthreads();
  if (threadIdx.x == 0) {
    memcpy(slot[blockIdx.x], block_buf, n * sizeof(float));
    free(block_buf);
  }
}
