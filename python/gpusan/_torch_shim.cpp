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

// The `source` of gpusan_pools.h for the PyTorch caching allocator.
constexpr uint32_t kSourceTorch = 1;

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
    case TraceEntry::ALLOC:
      g_alloc(addr, static_cast<uint64_t>(e.size_), stream_bits(e.stream_), device_of(e), kSourceTorch);
      break;
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

void say(char* why, size_t len, const char* text) {
  if (why != nullptr && len > 0) {
    std::snprintf(why, len, "%s", text);
  }
}

}  // namespace

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
