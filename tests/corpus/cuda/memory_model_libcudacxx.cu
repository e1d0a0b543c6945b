// PTX features: the PTX memory model via libcu++ (CCCL): cuda::atomic_ref with explicit
// orders and scopes -> ld.acquire.gpu / st.release.gpu / atom.add.acq_rel.cta /
// atom.add.relaxed.sys / atom.exch.acquire.gpu / ld.relaxed.sys / fence.sc.gpu /
// fence.acq_rel.sys, a spin lock, and cuda::barrier<thread_scope_block> + cuda::memcpy_async
// (mbarrier.init/arrive/expect_tx/try_wait, cp.async.bulk...mbarrier::complete_tx::bytes).
#include <cuda/atomic>
#include <cuda/barrier>
#include <cuda/std/cstdint>

extern "C" __global__ void atomic_ref_orders(int* data, int* flag, unsigned long long* counter, int* out) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  cuda::atomic_ref<int, cuda::thread_scope_device> f(*flag);
  cuda::atomic_ref<unsigned long long, cuda::thread_scope_system> c(*counter);
  cuda::atomic_ref<int, cuda::thread_scope_block> d(data[blockIdx.x]);
  if (t == 0) {
    data[1000] = 7;
    f.store(1, cuda::memory_order_release);
  }
  while (f.load(cuda::memory_order_acquire) == 0) {}
  int r = data[1000];
  c.fetch_add(1, cuda::memory_order_relaxed);
  int old = d.fetch_add(t, cuda::memory_order_acq_rel);
  int exp = old;
  d.compare_exchange_strong(exp, old + 1, cuda::memory_order_seq_cst);
  cuda::atomic_thread_fence(cuda::memory_order_seq_cst, cuda::thread_scope_device);
  cuda::atomic_thread_fence(cuda::memory_order_acq_rel, cuda::thread_scope_system);
  out[t] = r + old + (int)c.load(cuda::memory_order_relaxed) + d.exchange(t, cuda::memory_order_release);
}

extern "C" __global__ void spin_lock(int* lock, float* shared_total, const float* in) {
  cuda::atomic_ref<int, cuda::thread_scope_device> l(*lock);
  if (threadIdx.x == 0) {
    while (l.exchange(1, cuda::memory_order_acquire) != 0) {}
    *shared_total += in[blockIdx.x];
    l.store(0, cuda::memory_order_release);
  }
}

extern "C" __global__ void barrier_memcpy_async(const float* in, float* out, int n) {
  __shared__ __align__(16) float buf[256];
#pragma nv_diag_suppress static_var_with_dynamic_init
  __shared__ cuda::barrier<cuda::thread_scope_block> bar;
  if (threadIdx.x == 0) init(&bar, blockDim.x);
  __syncthreads();
  cuda::memcpy_async(buf, in + blockIdx.x * 256, cuda::aligned_size_t<16>(sizeof(buf)), bar);
  bar.arrive_and_wait();
  int t = threadIdx.x;
  if (blockIdx.x * 256 + t < n) out[blockIdx.x * 256 + t] = buf[t] + buf[255 - t];
}
