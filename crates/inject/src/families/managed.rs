//! Managed memory's range calls: `cuMemPrefetchAsync` (migrate a range to a device or the
//! host) and `cuMemAdvise` (hint how a range is used). Each is given a pointer and a byte
//! count: the range is judged against its allocation, past its end or after its free, as a
//! copy's would be. The driver accepts a range over freed memory that gpusan holds back in
//! quarantine, and one past the end into the allocation's padding, so without this neither
//! would be seen.

use gpusan_runtime::checks::Call;

use super::judge::{check, uva};
use crate::driver::hook::hooks;
use crate::driver::types::MemLocation;
use crate::driver::{CUdevice, CUdeviceptr, CUstream};

hooks! {
    // CUDA 13's (`cuMemPrefetchAsync` in its header), and per-thread default stream.
    fn cuMemPrefetchAsync_v2(p: CUdeviceptr, count: usize, to: MemLocation, flags: u32, stream: CUstream)
        => |real| { range("cuMemPrefetchAsync", p, count); real(p, count, to, flags, stream) };
    fn cuMemPrefetchAsync_v2_ptsz(p: CUdeviceptr, count: usize, to: MemLocation, flags: u32, stream: CUstream)
        => |real| { range("cuMemPrefetchAsync", p, count); real(p, count, to, flags, stream) };
    // Before CUDA 13: a device ordinal (or CU_DEVICE_CPU).
    fn cuMemPrefetchAsync(p: CUdeviceptr, count: usize, to: CUdevice, stream: CUstream)
        => |real| { range("cuMemPrefetchAsync", p, count); real(p, count, to, stream) };
    fn cuMemPrefetchAsync_ptsz(p: CUdeviceptr, count: usize, to: CUdevice, stream: CUstream)
        => |real| { range("cuMemPrefetchAsync", p, count); real(p, count, to, stream) };
    fn cuMemAdvise_v2(p: CUdeviceptr, count: usize, advice: u32, location: MemLocation)
        => |real| { range("cuMemAdvise", p, count); real(p, count, advice, location) };
    fn cuMemAdvise(p: CUdeviceptr, count: usize, advice: u32, device: CUdevice)
        => |real| { range("cuMemAdvise", p, count); real(p, count, advice, device) };
}

/// The range from `p`: judged where it is memory gpusan tracks. A pointer it does not know
/// is left alone: with heterogeneous memory management a program may prefetch and advise
/// memory from `malloc`.
fn range(api: &'static str, p: CUdeviceptr, count: usize) {
    check(api, || Call::Range { ptr: uva(p), count: count as u64 });
}
