// The fake libc10_cuda.so of the fake torch: keeps the attached trace trackers and a
// snapshot, and lets the test's Python fire allocator events at them through ctypes.
#include <c10/cuda/CUDACachingAllocator.h>

namespace A = c10::cuda::CUDACachingAllocator;

static std::vector<A::AllocatorTraceTracker>& trackers() {
  static std::vector<A::AllocatorTraceTracker> t;
  return t;
}

static A::SnapshotInfo& state() {
  static A::SnapshotInfo s;
  return s;
}

void A::attachAllocatorTraceTracker(AllocatorTraceTracker tracker) { trackers().push_back(std::move(tracker)); }

A::SnapshotInfo A::snapshot(std::pair<uint64_t, uint64_t>, bool) { return state(); }

extern "C" int fake_torch_trackers() { return static_cast<int>(trackers().size()); }

extern "C" void fake_torch_fire(int action, uint64_t addr, uint64_t size, uint64_t stream, int device) {
  A::TraceEntry e{};
  e.action_ = static_cast<A::TraceEntry::Action>(action);
  e.device_ = static_cast<c10::DeviceIndex>(device);
  e.addr_ = addr;
  e.size_ = size;
  e.stream_ = reinterpret_cast<void*>(stream);
  for (auto& t : trackers()) t(e);
}

// A block at the end of segment `seg` (made if new) for the next snapshot.
extern "C" void fake_torch_block(uint64_t seg, int device, uint64_t size, uint64_t requested, int allocated, int active) {
  auto& segs = state().segments;
  A::SegmentInfo* s = nullptr;
  for (auto& x : segs)
    if (x.address == seg) s = &x;
  if (s == nullptr) {
    segs.emplace_back();
    s = &segs.back();
    s->address = seg;
    s->device = static_cast<c10::DeviceIndex>(device);
    s->stream = reinterpret_cast<void*>(0x5);
  }
  c10::CachingDeviceAllocator::BlockInfo b;
  b.size = size;
  b.requested_size = requested;
  b.allocated = allocated != 0;
  b.active = active != 0;
  s->blocks.push_back(b);
  s->total_size += size;
}
