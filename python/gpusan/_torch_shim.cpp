// gpusan's PyTorch allocator shim: built by gpusan.torch_hook against the PyTorch installed
// (the trace entry's layout changes between releases), loaded with ctypes, attached once CUDA
// is initialized. It tells gpusan's runtime about every block the CUDA caching allocator
// hands out and takes back, from the allocator's own trace callbacks (called even with
// memory history off), straight into gpusan_pool_block_alloc/free: nothing runs in Python
// per tensor.
//
// Which free counts: FREE_COMPLETED, not FREE_REQUESTED. A tensor used on another stream
// (record_stream) is only requested free when the program drops it; the allocator keeps it
// out of reuse until the events of those streams complete, and kernels on them may still use
// it meanwhile. FREE_COMPLETED comes when the block really returns to the pool (at once for a
// block used on its own stream only), so a use after it is a use of memory the pool may hand
// to another tensor.

#include <c10/cuda/CUDACachingAllocator.h>

// The padding allocator needs PyTorch's whole allocator interface (PyTorch 2.x); a stand-in
// without it (gpusan's tests) builds the shim without padding.
#if __has_include(<c10/core/Allocator.h>)
#include <c10/core/Allocator.h>
#define GPUSAN_SHIM_PADDING 1
#endif

#include <dlfcn.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <type_traits>
#include <utility>

namespace {

using AllocFn = int (*)(uint64_t, uint64_t, uint64_t, int32_t, uint32_t);
using FreeFn = int (*)(uint64_t, uint64_t, int32_t, uint32_t);

// The `source` of gpusan_pools.h for the PyTorch caching allocator; the padding a block was
// asked for goes in its upper half (GPUSAN_POOL_PADDED(pad)).
constexpr uint32_t kSourceTorch = 1;
uint32_t padded_source(uint64_t pad) { return kSourceTorch | (static_cast<uint32_t>(pad) << 16); }

// The request being served on this thread by the padding allocator (below): the trace's
// ALLOC entry, which the allocator records inside the call, carries the padded size; the
// block is the tensor's, `requested` bytes.
thread_local uint64_t tl_requested = 0;
thread_local uint64_t tl_padded = 0;
thread_local uint64_t tl_pad = 0;
uint64_t g_pad = 0;

// The padding a request of `n` bytes is given: only where the caching allocator's rounding
// (to 512 bytes, 512 at least) would leave no slack for a canary. Any other size keeps the
// block it gets natively, its slack the canary, and costs no memory.
uint64_t pad_for(size_t n) { return n % 512 == 0 ? g_pad : 0; }

AllocFn g_alloc = nullptr;
FreeFn g_free = nullptr;
std::atomic<bool> g_attached{false};

using c10::cuda::CUDACachingAllocator::TraceEntry;

// Releases before the entry named its device (and newer ones alike) build: a member that is
// not there reads as "unknown device".
template <class T, class = void>
struct HasDevice : std::false_type {};
template <class T>
struct HasDevice<T, std::void_t<decltype(std::declval<const T&>().device_)>> : std::true_type {};

template <class E>
int32_t device_of(const E& e) {
  if constexpr (HasDevice<E>::value) {
    return static_cast<int32_t>(e.device_);
  } else {
    return -1;
  }
}

// The stream as a handle value: cudaStream_t in some releases, void* in others.
template <class S>
uint64_t stream_bits(const S& s) {
  if constexpr (std::is_pointer_v<S>) {
    return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(s));
  } else if constexpr (std::is_integral_v<S>) {
    return static_cast<uint64_t>(s);
  } else {
    return 0;
  }
}

// Called with the allocator's per-device lock held (and maybe the GIL): only the runtime's
// two C functions, which never block long and never call back.
void on_trace(const TraceEntry& e) {
  const uint64_t addr = static_cast<uint64_t>(e.addr_);
  switch (e.action_) {
    case TraceEntry::ALLOC: {
      const uint64_t size = static_cast<uint64_t>(e.size_);
      if (tl_padded != 0 && size == tl_padded) {
        g_alloc(addr, tl_requested, stream_bits(e.stream_), device_of(e), padded_source(tl_pad));
      } else {
        g_alloc(addr, size, stream_bits(e.stream_), device_of(e), kSourceTorch);
      }
      break;
    }
    case TraceEntry::FREE_COMPLETED:
      g_free(addr, stream_bits(e.stream_), device_of(e), kSourceTorch);
      break;
    default:
      // Segments are the driver allocations gpusan sees itself; FREE_REQUESTED is not yet a
      // free (above).
      break;
  }
}

// Blocks the allocator handed out before the tracker was attached (a tensor made before
// CUDA's lazy initialization finished, or the shim attached late): each live block of each
// segment, in order. Blocks requested free but still in use on other streams count as live.
void register_live_blocks() {
  const auto snap = c10::cuda::CUDACachingAllocator::snapshot();
  for (const auto& seg : snap.segments) {
    uint64_t addr = static_cast<uint64_t>(seg.address);
    for (const auto& b : seg.blocks) {
      if (b.allocated || b.active) {
        g_alloc(addr, static_cast<uint64_t>(b.requested_size), stream_bits(seg.stream),
                static_cast<int32_t>(seg.device), kSourceTorch);
      }
      addr += static_cast<uint64_t>(b.size);
    }
  }
}

#ifdef GPUSAN_SHIM_PADDING
using c10::cuda::CUDACachingAllocator::CUDAAllocator;

// canary mode: a request of the caching allocator whose size is a multiple of 512 (most
// tensors') asks `g_pad` bytes more, so that its block has slack for its canary (otherwise
// it has none: the next block starts at its end); other sizes have slack already.
// Everything else is the caching allocator's own: blocks, segments, streams, graphs' pools,
// statistics (which count the padding) and the deleter of every DataPtr (the caching
// allocator's, which frees the block whatever size it was asked for).
class PaddingAllocator final : public CUDAAllocator {
 public:
  explicit PaddingAllocator(CUDAAllocator* inner) : inner_(inner) {}

  c10::DataPtr allocate(size_t n) override {
    if (n == 0) {
      return inner_->allocate(0);
    }
    Serving serving(n);
    return inner_->allocate(n + pad_for(n));
  }
  c10::DeleterFnPtr raw_deleter() const override { return inner_->raw_deleter(); }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    inner_->copy_data(dest, src, count);
  }
  void* raw_alloc(size_t n) override {
    if (n == 0) {
      return inner_->raw_alloc(0);
    }
    Serving serving(n);
    return inner_->raw_alloc(n + pad_for(n));
  }
  void* raw_alloc_with_stream(size_t n, cudaStream_t stream) override {
    if (n == 0) {
      return inner_->raw_alloc_with_stream(0, stream);
    }
    Serving serving(n);
    return inner_->raw_alloc_with_stream(n + pad_for(n), stream);
  }
  void raw_delete(void* ptr) override { inner_->raw_delete(ptr); }
  void init(int device_count) override { inner_->init(device_count); }
  bool initialized() override { return inner_->initialized(); }
  double getMemoryFraction(c10::DeviceIndex device) override { return inner_->getMemoryFraction(device); }
  void setMemoryFraction(double fraction, c10::DeviceIndex device) override {
    inner_->setMemoryFraction(fraction, device);
  }
  std::vector<c10::cuda::CUDACachingAllocator::StreamSegmentSize> getExpandableSegmentSizes(
      c10::DeviceIndex device) override {
    return inner_->getExpandableSegmentSizes(device);
  }
  void emptyCache(c10::MempoolId_t mempool_id) override { inner_->emptyCache(mempool_id); }
  void enable(bool value) override { inner_->enable(value); }
  bool isEnabled() const override { return inner_->isEnabled(); }
  void cacheInfo(c10::DeviceIndex device, size_t* largestBlock) override { inner_->cacheInfo(device, largestBlock); }
  void* getBaseAllocation(void* ptr, size_t* size) override { return inner_->getBaseAllocation(ptr, size); }
  void recordStream(const c10::DataPtr& ptr, c10::cuda::CUDAStream stream) override {
    inner_->recordStream(ptr, stream);
  }
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    return inner_->getDeviceStats(device);
  }
  void resetAccumulatedStats(c10::DeviceIndex device) override { inner_->resetAccumulatedStats(device); }
  void resetPeakStats(c10::DeviceIndex device) override { inner_->resetPeakStats(device); }
  c10::cuda::CUDACachingAllocator::SnapshotInfo snapshot(c10::MempoolId_t mempool_id, bool include_traces) override {
    return inner_->snapshot(mempool_id, include_traces);
  }
  void beginAllocateToPool(c10::DeviceIndex device, c10::MempoolId_t mempool_id,
                           std::function<bool(cudaStream_t)> filter) override {
    inner_->beginAllocateToPool(device, mempool_id, std::move(filter));
  }
  void endAllocateToPool(c10::DeviceIndex device, c10::MempoolId_t mempool_id) override {
    inner_->endAllocateToPool(device, mempool_id);
  }
  void releasePool(c10::DeviceIndex device, c10::MempoolId_t mempool_id) override {
    inner_->releasePool(device, mempool_id);
  }
  int getPoolUseCount(c10::DeviceIndex device, c10::MempoolId_t mempool_id) override {
    return inner_->getPoolUseCount(device, mempool_id);
  }
  void createOrIncrefPool(c10::DeviceIndex device, c10::MempoolId_t mempool_id,
                          std::shared_ptr<CUDAAllocator> allocator) override {
    inner_->createOrIncrefPool(device, mempool_id, std::move(allocator));
  }
  void setUseOnOOM(c10::DeviceIndex device, c10::MempoolId_t mempool_id, bool use_on_oom) override {
    inner_->setUseOnOOM(device, mempool_id, use_on_oom);
  }
  void setNoSplit(c10::DeviceIndex device, c10::MempoolId_t mempool_id) override {
    inner_->setNoSplit(device, mempool_id);
  }
  bool checkPoolLiveAllocations(c10::DeviceIndex device, c10::MempoolId_t mempool_id,
                                const std::unordered_set<void*>& expected_live_allocations) override {
    return inner_->checkPoolLiveAllocations(device, mempool_id, expected_live_allocations);
  }
  c10::cuda::CUDACachingAllocator::ShareableHandle shareIpcHandle(void* ptr) override {
    return inner_->shareIpcHandle(ptr);
  }
  std::shared_ptr<void> getIpcDevPtr(std::string handle) override { return inner_->getIpcDevPtr(std::move(handle)); }
  bool isHistoryEnabled() override { return inner_->isHistoryEnabled(); }
  void recordHistory(bool enabled, c10::cuda::CUDACachingAllocator::CreateContextFn context_recorder,
                     size_t alloc_trace_max_entries, c10::cuda::CUDACachingAllocator::RecordContext when,
                     bool clearHistory, const std::vector<std::string>& skip_actions) override {
    inner_->recordHistory(enabled, std::move(context_recorder), alloc_trace_max_entries, when, clearHistory,
                          skip_actions);
  }
  void recordAnnotation(const std::vector<std::pair<std::string, std::string>>& md) override {
    inner_->recordAnnotation(md);
  }
  void pushCompileContext(std::string& md) override { inner_->pushCompileContext(md); }
  void popCompileContext() override { inner_->popCompileContext(); }
  void setUserMetadata(const std::string& metadata) override { inner_->setUserMetadata(metadata); }
  std::string getUserMetadata() override { return inner_->getUserMetadata(); }
  void attachOutOfMemoryObserver(c10::cuda::CUDACachingAllocator::OutOfMemoryObserver observer) override {
    inner_->attachOutOfMemoryObserver(std::move(observer));
  }
  void attachAllocatorTraceTracker(c10::cuda::CUDACachingAllocator::AllocatorTraceTracker tracker) override {
    inner_->attachAllocatorTraceTracker(std::move(tracker));
  }
  void enablePeerAccess(c10::DeviceIndex dev, c10::DeviceIndex dev_to_access) override {
    inner_->enablePeerAccess(dev, dev_to_access);
  }
  cudaError_t memcpyAsync(void* dst, int dstDevice, const void* src, int srcDevice, size_t count,
                          cudaStream_t stream, bool p2p_enabled) override {
    return inner_->memcpyAsync(dst, dstDevice, src, srcDevice, count, stream, p2p_enabled);
  }
  std::shared_ptr<c10::cuda::CUDACachingAllocator::AllocatorState> getCheckpointState(
      c10::DeviceIndex device, c10::MempoolId_t id) override {
    return inner_->getCheckpointState(device, id);
  }
  c10::cuda::CUDACachingAllocator::CheckpointDelta setCheckpointPoolState(
      c10::DeviceIndex device, std::shared_ptr<c10::cuda::CUDACachingAllocator::AllocatorState> pps) override {
    return inner_->setCheckpointPoolState(device, std::move(pps));
  }
  std::string name() override { return inner_->name(); }

 private:
  // The request this thread asks the caching allocator for, for the trace callback.
  struct Serving {
    explicit Serving(size_t n) {
      tl_requested = n;
      tl_pad = pad_for(n);
      tl_padded = n + tl_pad;
    }
    ~Serving() {
      tl_requested = 0;
      tl_padded = 0;
      tl_pad = 0;
    }
  };
  CUDAAllocator* inner_;
};
#endif  // GPUSAN_SHIM_PADDING

void say(char* why, size_t len, const char* text) {
  if (why != nullptr && len > 0) {
    std::snprintf(why, len, "%s", text);
  }
}

}  // namespace

// The `source` a block padded by `pad` bytes is reported with: for gpusan's tests, which hold
// it to the runtime's reading (gpusan_runtime::pool_blocks::padding_of).
extern "C" __attribute__((visibility("default"))) uint32_t gpusan_torch_shim_padded_source(uint64_t pad) {
  return padded_source(pad);
}

// 0: attached; 1: the runtime has no pool-block interface; 2: PyTorch refused (`why` says).
extern "C" __attribute__((visibility("default"))) int gpusan_torch_shim_attach(char* why, size_t len) {
  if (g_attached.load()) {
    return 0;
  }
  g_alloc = reinterpret_cast<AllocFn>(dlsym(RTLD_DEFAULT, "gpusan_pool_block_alloc"));
  g_free = reinterpret_cast<FreeFn>(dlsym(RTLD_DEFAULT, "gpusan_pool_block_free"));
  if (g_alloc == nullptr || g_free == nullptr) {
    say(why, len, "gpusan_pool_block_alloc/free not found in the process");
    return 1;
  }
  try {
    c10::cuda::CUDACachingAllocator::attachAllocatorTraceTracker(&on_trace);
    g_attached.store(true);
    register_live_blocks();
  } catch (const std::exception& e) {
    say(why, len, e.what());
    return g_attached.load() ? 0 : 2;
  } catch (...) {
    say(why, len, "unknown C++ exception");
    return g_attached.load() ? 0 : 2;
  }
  return 0;
}

// canary mode: the caching allocator is asked for `pad` bytes more per request (see
// PaddingAllocator), from now on. 0: installed; 2: PyTorch refused (`why` says). Call once,
// after attach and before the program's first tensor; blocks handed out before keep no
// padding (those with no slack stay unguarded, and the report says so).
extern "C" __attribute__((visibility("default"))) int gpusan_torch_shim_pad(size_t pad, char* why, size_t len) {
  static std::atomic<bool> installed{false};
  if (pad > 0xffff) {
    say(why, len, "the padding must be at most 65535 bytes (the pool interface's field)");
    return 2;
  }
  if (pad == 0 || installed.exchange(true)) {
    return 0;
  }
#ifndef GPUSAN_SHIM_PADDING
  say(why, len, "this PyTorch's headers have no allocator interface to wrap");
  return 2;
#else
  try {
    CUDAAllocator* inner = c10::cuda::CUDACachingAllocator::get();
    if (inner == nullptr) {
      say(why, len, "no CUDA allocator");
      return 2;
    }
    g_pad = pad;
    // Lives as long as the process: PyTorch keeps a raw pointer to its allocator.
    static PaddingAllocator* padding = new PaddingAllocator(inner);
    c10::cuda::CUDACachingAllocator::allocator.store(padding);
    c10::SetAllocator(c10::DeviceType::CUDA, padding);
  } catch (const std::exception& e) {
    say(why, len, e.what());
    return 2;
  } catch (...) {
    say(why, len, "unknown C++ exception");
    return 2;
  }
  return 0;
#endif
}
