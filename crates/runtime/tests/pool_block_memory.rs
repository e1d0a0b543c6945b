//! What a pool block (one tensor of PyTorch's caching allocator, one CuPy array) costs gpusan
//! in memory (issue 15: at most 32 bytes a tensor in the device table): 100,000 blocks
//! registered inside 1,000 segments, the device table built, and the bytes counted on both
//! sides, the device table's and the host heap's (this test's own allocator counts what its
//! thread allocates). The host figure is printed (`--nocapture`) and bounded, so a growth
//! of the per-block bookkeeping shows here.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use gpusan_runtime::pool_blocks::PoolSource;
use gpusan_runtime::registry::blocks::{NewBlock, Show};
use gpusan_runtime::registry::{AllocKind, DeviceTable, NewAlloc, Registry, SiteId};

/// Heap bytes held by this thread's allocations (the test harness's threads not counted).
struct Counting;

thread_local! {
    static HELD: Cell<isize> = const { Cell::new(0) };
}

// SAFETY: every call is forwarded to `System` unchanged; the counter is a thread-local
// `Cell` with a const initialiser, which allocates nothing.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = HELD.try_with(|h| h.set(h.get() + layout.size() as isize));
        System.alloc(layout)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let _ = HELD.try_with(|h| h.set(h.get() - layout.size() as isize));
        System.dealloc(ptr, layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = HELD.try_with(|h| h.set(h.get() + new_size as isize - layout.size() as isize));
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn held() -> isize {
    HELD.with(|h| h.get())
}

const SEGMENTS: u64 = 1000;
const PER_SEGMENT: u64 = 100;
const BLOCKS: u64 = SEGMENTS * PER_SEGMENT;
const SEGMENT_BYTES: u64 = 2 << 20;
const BASE: u64 = 0x7f00_0000_0000;
/// A block's stride: PyTorch's small pool rounds a 4,000-byte tensor to 4,096 bytes.
const STRIDE: u64 = 4096;

fn segment(i: u64) -> NewAlloc {
    NewAlloc {
        base: BASE + i * SEGMENT_BYTES,
        size: SEGMENT_BYTES,
        kind: AllocKind::Device,
        device: 0,
        context: 1,
        site: SiteId::UNKNOWN,
    }
}

fn block(seg: u64, j: u64) -> NewBlock {
    NewBlock {
        base: BASE + seg * SEGMENT_BYTES + j * STRIDE,
        size: 4000,
        source: PoolSource::Torch,
        stream: 0,
        device: 0,
        site: SiteId::UNKNOWN,
    }
}

#[test]
fn a_pool_block_costs_at_most_32_device_bytes_and_its_host_bytes_are_bounded() {
    let registry = Registry::default();
    for i in 0..SEGMENTS {
        registry.insert(segment(i)).unwrap();
    }
    let mut table = DeviceTable::build(&registry);
    let device_before = table.device_bytes() as u64;
    assert_eq!(table.entries().len() as u64, SEGMENTS);

    let host_before = held();
    for i in 0..SEGMENTS {
        for j in 0..PER_SEGMENT {
            registry.insert_block(block(i, j)).unwrap();
        }
    }
    let registry_bytes = held() - host_before;
    table.update(&registry).unwrap();
    let host_bytes = held() - host_before;
    let device_after = table.device_bytes() as u64;

    // Every block is one entry; the segments holding them are in none.
    assert_eq!(table.entries().len() as u64, BLOCKS);
    let device_per_block = (device_after - device_before) as f64 / BLOCKS as f64;
    let peak = table.peak();
    assert_eq!((peak.entries, peak.allocations, peak.blocks), (BLOCKS, SEGMENTS, BLOCKS));
    assert!(peak.bytes_per_block().unwrap() <= 32, "{peak:?}");
    assert!(device_per_block <= 32.0, "device table bytes per block: {device_per_block}");

    // Half of the blocks freed: a freed block keeps its one entry (a use of it is a use
    // after free) and costs nothing more.
    for i in 0..SEGMENTS {
        for j in (0..PER_SEGMENT).step_by(2) {
            registry.free_block(block(i, j).base, SiteId::UNKNOWN, 0, Show::Now);
        }
    }
    table.update(&registry).unwrap();
    assert_eq!(table.device_bytes() as u64, device_after);
    assert!(table.entries().iter().filter(|e| e.is_freed()).count() as u64 == BLOCKS / 2);
    // Now the scratch the table is rebuilt in has grown to the table's size too: the steady
    // state of a program's host memory.
    let steady_bytes = held() - host_before;

    let per_block = |bytes: isize| bytes as f64 / BLOCKS as f64;
    let host_per_block = per_block(steady_bytes);
    println!(
        "pool blocks: {BLOCKS} in {SEGMENTS} segments; device table {device_per_block:.2} B a block \
         ({device_before} B → {device_after} B); host {host_per_block:.1} B a block (registry {:.1}, \
         the table's host copy {:.1}, the scratch it is rebuilt in {:.1})",
        per_block(registry_bytes),
        per_block(host_bytes - registry_bytes),
        per_block(steady_bytes - host_bytes),
    );
    // The registry's B-tree entry (a 56-byte block keyed by its base, nodes part full) and
    // two 32-byte host copies of the entry (the table and the scratch it is rebuilt in,
    // each sized to the table, not doubled past it).
    assert!(host_per_block <= 200.0, "host bytes per block: {host_per_block}");
}
