// A stand-in for PyTorch's c10/cuda/CUDACachingAllocator.h with the parts gpusan's shim
// uses, shaped as in PyTorch 2.11 (the trace entry and segment types live in
// c10::CachingDeviceAllocator, the stream is a void*, the entry names its device): the shim
// compiles against it and the fake libc10_cuda.so (lib/c10_cuda.cpp) drives it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace c10 {
using DeviceIndex = int8_t;
}

namespace c10::CachingDeviceAllocator {

struct BlockInfo {
  size_t size = 0;
  size_t requested_size = 0;
  int32_t gc_counter = 0;
  bool allocated = false;
  bool active = false;
};

struct SegmentInfo {
  c10::DeviceIndex device = 0;
  size_t address = 0;
  size_t total_size = 0;
  void* stream = nullptr;
  std::vector<BlockInfo> blocks;
};

struct TraceEntry {
  enum Action { ALLOC, FREE_REQUESTED, FREE_COMPLETED, SEGMENT_ALLOC, SEGMENT_FREE, SEGMENT_MAP, SEGMENT_UNMAP, SNAPSHOT, OOM };
  Action action_;
  c10::DeviceIndex device_;
  size_t addr_;
  std::shared_ptr<void> context_;
  void* stream_{};
  size_t size_;
  std::string compile_context_;
};

using AllocatorTraceTracker = std::function<void(const TraceEntry&)>;

}  // namespace c10::CachingDeviceAllocator

namespace c10::cuda::CUDACachingAllocator {

using c10::CachingDeviceAllocator::AllocatorTraceTracker;
using c10::CachingDeviceAllocator::SegmentInfo;
using c10::CachingDeviceAllocator::TraceEntry;

struct SnapshotInfo {
  std::vector<SegmentInfo> segments;
};

void attachAllocatorTraceTracker(AllocatorTraceTracker tracker);
SnapshotInfo snapshot(std::pair<uint64_t, uint64_t> mempool_id = {0, 0}, bool include_traces = true);

}  // namespace c10::cuda::CUDACachingAllocator
