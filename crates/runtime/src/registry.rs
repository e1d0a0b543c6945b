//! The allocation registry: every allocation the program has made that is still live, and
//! every freed one still held in quarantine, keyed by address; the compact copy of it that
//! instrumented kernels search on the GPU ([`DeviceTable`]); and (`registry/sites.rs`) the host call sites
//! ([`SiteId`]) that reports name.
//!
//! Metadata is per allocation, never per byte (GPUArmor §4.2, cuCatch §4.7): one ordered map
//! from base address to an [`Allocation`] behind one reader–writer lock. A lookup is a
//! `O(log n)` search under a read lock; an insert or free is one search and an update under
//! the write lock. Allocation calls are rare next to copies and launches, and a CUDA
//! allocation costs microseconds in the driver, so one lock is enough; the benchmark
//! (`examples/registry_bench.rs`) measures it at 1 and 8 threads.
//!
//! Freed allocations stay in the map (state [`AllocState::Freed`]) and in a FIFO quarantine
//! bounded by bytes and count. The runtime delays the real `cudaFree` until an allocation
//! leaves quarantine, so the driver cannot hand the memory out again while the registry still
//! knows it as freed: a dangling pointer keeps pointing at a freed entry and stays detectable.
//!
//! Memory: host side, one map entry of `size_of::<Allocation>()` (80 bytes) plus B-tree slack
//! per live or quarantined allocation and 16 bytes per quarantine slot; device side,
//! [`DeviceTable`]: 32 bytes per live or quarantined allocation plus a 32-byte header.
//!
//! Nothing here panics on any input: the runtime runs inside the user's process, behind FFI.

use std::collections::{BTreeMap, VecDeque};
use std::ops::{Bound, Range};

use crate::locks;
pub use crate::pool_blocks::TableShape;
use crate::pool_blocks::{Blocks, PoolSource};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use serde::{Deserialize, Serialize};

/// Pool blocks in the registry and in the device table (`impl Registry` and `impl Inner`).
pub mod blocks;

/// What allocated the memory; decides which free call may release it and how reports name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum AllocKind {
    /// `cudaMalloc`, `cuMemAlloc`.
    Device,
    /// `cudaMallocPitch`, `cudaMalloc3D`: `height` rows of `width_bytes`, `pitch` apart.
    Pitched { pitch: u64, width_bytes: u64, height: u64 },
    /// `cudaMallocAsync` from the device's current pool.
    Async { stream: u64 },
    /// `cudaMallocFromPoolAsync`.
    Pool { pool: u64, stream: u64 },
    /// `cudaMallocManaged`.
    Managed,
    /// `cudaMallocHost`, `cudaHostAlloc`; `mapped` when the device may address it.
    HostPinned { mapped: bool },
    /// `cudaHostRegister`: the user's own host memory, page-locked; it outlives the unregister.
    HostRegistered,
    /// One mapped range of a `cuMemAddressReserve` reservation (`cuMemMap`). Reservations
    /// themselves are not registered: an unmapped address in one is unknown memory.
    Vmm,
    /// A graph memory node (`cudaGraphAddMemAllocNode`, or `cudaMallocAsync` under capture).
    GraphNode,
    /// Device-side `malloc` in a kernel, learnt from the GPU.
    DeviceHeap,
    /// A CUDA array: an opaque handle, not addressable memory. Register it at its handle with
    /// size 1 so frees and leaks are tracked; copies never name it by address.
    Array,
    /// A `__device__`, `__constant__` or `__managed__` variable of a loaded module, learnt
    /// when the program asks for its address. It lives as long as its module: no free call
    /// may release it, and it is never a leak.
    ModuleVariable,
    /// A block a pool allocator handed out inside one of its segments (`pool_blocks`):
    /// released by the pool's own free (`Registry::free_block`), by no free call.
    PoolBlock { source: PoolSource, stream: u64 },
    /// Another process's device memory, opened here (`cudaIpcOpenMemHandle`): released by
    /// `cudaIpcCloseMemHandle` only. Its device is the exporter's, which the registry does
    /// not learn.
    IpcImport,
    /// Anything else; any free call may release it.
    Other,
}

/// Allocation and free calls that must pair: a free call of one family on memory of another
/// fails in the driver and is a bug in the program.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Family {
    Device,
    Host,
    Registered,
    Vmm,
    Array,
    DeviceHeap,
    /// Module variables: released with their module, by no free call.
    Module,
    /// Pool blocks: released by their pool, by no free call.
    PoolBlock,
    Ipc,
    Any,
}

impl AllocKind {
    /// The stable name used in JSON reports.
    pub fn name(&self) -> &'static str {
        match self {
            AllocKind::Device => "device",
            AllocKind::Pitched { .. } => "pitched",
            AllocKind::Async { .. } => "async",
            AllocKind::Pool { .. } => "pool",
            AllocKind::Managed => "managed",
            AllocKind::HostPinned { .. } => "host_pinned",
            AllocKind::HostRegistered => "host_registered",
            AllocKind::Vmm => "vmm",
            AllocKind::GraphNode => "graph_node",
            AllocKind::DeviceHeap => "device_heap",
            AllocKind::Array => "array",
            AllocKind::ModuleVariable => "module_variable",
            AllocKind::PoolBlock { .. } => "pool_block",
            AllocKind::IpcImport => "ipc_import",
            AllocKind::Other => "other",
        }
    }

    /// How text reports describe such memory ("a 1024-byte pinned host allocation").
    pub fn describe(&self) -> &'static str {
        match self {
            AllocKind::Device => "device",
            AllocKind::Pitched { .. } => "pitched device",
            AllocKind::Async { .. } => "stream-ordered device",
            AllocKind::Pool { .. } => "memory-pool device",
            AllocKind::Managed => "managed",
            AllocKind::HostPinned { .. } => "pinned host",
            AllocKind::HostRegistered => "registered host",
            AllocKind::Vmm => "VMM-mapped",
            AllocKind::GraphNode => "graph",
            AllocKind::DeviceHeap => "device-heap",
            AllocKind::Array => "CUDA array",
            AllocKind::ModuleVariable => "module variable",
            AllocKind::PoolBlock { .. } => "pool block",
            AllocKind::IpcImport => "IPC-imported device",
            AllocKind::Other => "other",
        }
    }

    /// A small stable number for the device table's flags.
    pub fn code(&self) -> u8 {
        match self {
            AllocKind::Device => 1,
            AllocKind::Pitched { .. } => 2,
            AllocKind::Async { .. } => 3,
            AllocKind::Pool { .. } => 4,
            AllocKind::Managed => 5,
            AllocKind::HostPinned { .. } => 6,
            AllocKind::HostRegistered => 7,
            AllocKind::Vmm => 8,
            AllocKind::GraphNode => 9,
            AllocKind::DeviceHeap => 10,
            AllocKind::Array => 11,
            AllocKind::ModuleVariable => 12,
            AllocKind::PoolBlock { .. } => 13,
            AllocKind::IpcImport => 14,
            AllocKind::Other => 0,
        }
    }

    fn family(&self) -> Family {
        match self {
            AllocKind::Device
            | AllocKind::Pitched { .. }
            | AllocKind::Async { .. }
            | AllocKind::Pool { .. }
            | AllocKind::Managed
            | AllocKind::GraphNode => Family::Device,
            AllocKind::HostPinned { .. } => Family::Host,
            AllocKind::HostRegistered => Family::Registered,
            AllocKind::Vmm => Family::Vmm,
            AllocKind::Array => Family::Array,
            AllocKind::DeviceHeap => Family::DeviceHeap,
            AllocKind::ModuleVariable => Family::Module,
            AllocKind::PoolBlock { .. } => Family::PoolBlock,
            AllocKind::IpcImport => Family::Ipc,
            AllocKind::Other => Family::Any,
        }
    }
}

/// The call that released memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FreeApi {
    /// `cudaFree`, `cuMemFree`.
    Free,
    /// `cudaFreeAsync`, `cuMemFreeAsync`.
    FreeAsync,
    /// `cudaFreeHost`, `cuMemFreeHost`.
    FreeHost,
    /// `cudaHostUnregister`, `cuMemHostUnregister`.
    HostUnregister,
    /// `cuMemUnmap`.
    MemUnmap,
    /// `cudaFreeArray`, `cudaFreeMipmappedArray`, `cuArrayDestroy`.
    FreeArray,
    /// Device-side `free` in a kernel.
    DeviceFree,
    /// A graph memory free node.
    GraphFree,
    /// `cudaIpcCloseMemHandle`, `cuIpcCloseMemHandle`.
    IpcClose,
}

impl FreeApi {
    /// Whether this call may release memory of `kind`. Only mixed families are refused
    /// (host for device, registration for allocation, …): within the device family the driver
    /// accepts `cudaFree` and `cudaFreeAsync` on each other's memory, managed memory included.
    pub fn accepts(self, kind: AllocKind) -> bool {
        let family = match self {
            FreeApi::Free | FreeApi::FreeAsync | FreeApi::GraphFree => Family::Device,
            FreeApi::FreeHost => Family::Host,
            FreeApi::HostUnregister => Family::Registered,
            FreeApi::MemUnmap => Family::Vmm,
            FreeApi::FreeArray => Family::Array,
            FreeApi::DeviceFree => Family::DeviceHeap,
            FreeApi::IpcClose => Family::Ipc,
        };
        kind.family() == family || kind.family() == Family::Any
    }
}

/// Whether an allocation is in use or freed and waiting in quarantine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AllocState {
    Live,
    /// Freed at `site`; still in quarantine, so its memory has not been released.
    Freed {
        site: SiteId,
    },
}

/// One allocation, live or quarantined.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Allocation {
    /// Unique over the process's lifetime, never reused; starts at 1.
    pub id: u64,
    /// Device address (under UVA, the host address of host allocations).
    pub base: u64,
    pub size: u64,
    pub kind: AllocKind,
    pub device: i32,
    /// The `CUcontext` it belongs to, as an integer.
    pub context: u64,
    /// Where the host allocated it.
    pub site: SiteId,
    pub state: AllocState,
    /// Bytes the runtime asked the driver for after `end()` and registered nothing at (the
    /// binary route's red zone): no other allocation can start there. 0 for none.
    pub redzone: u64,
}

impl Allocation {
    /// One past the last byte; `insert` guarantees this does not wrap.
    pub fn end(&self) -> u64 {
        self.base.saturating_add(self.size)
    }

    pub fn is_live(&self) -> bool {
        self.state == AllocState::Live
    }

    pub fn free_site(&self) -> Option<SiteId> {
        match self.state {
            AllocState::Live => None,
            AllocState::Freed { site } => Some(site),
        }
    }

    fn contains(&self, addr: u64) -> bool {
        addr >= self.base && addr - self.base < self.size
    }
}

/// Budgets of the quarantine. When both are generous, freed memory stays unusable for a long
/// time and use-after-free stays detectable after many later allocations; a budget of 0
/// releases every free at once (detection then relies on the driver not reusing the range).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Freed bytes held back from the driver.
    pub quarantine_bytes: u64,
    /// Freed allocations held back, whatever their size.
    pub quarantine_count: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config { quarantine_bytes: 256 << 20, quarantine_count: 100_000 }
    }
}

/// What the caller knows about a new allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NewAlloc {
    pub base: u64,
    pub size: u64,
    pub kind: AllocKind,
    pub device: i32,
    pub context: u64,
    pub site: SiteId,
}

/// A registered allocation and the entries its range displaced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inserted {
    pub id: u64,
    /// Quarantined entries inside the new range: the driver reused their memory, so it had
    /// already been released (quarantine bypassed or evicted earlier). Do not release again.
    pub reused: Vec<Allocation>,
    /// Live entries inside the new range: their free was never seen. Do not release either.
    pub overwritten: Vec<Allocation>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InsertError {
    /// Base address 0: what CUDA returns for a 0-byte request.
    Null,
    /// Size 0: nothing any address could be inside.
    Empty,
    /// `base + size` does not fit in 64 bits.
    Wraps,
}

impl std::fmt::Display for InsertError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            InsertError::Null => "allocation at address 0",
            InsertError::Empty => "allocation of 0 bytes",
            InsertError::Wraps => "allocation wraps around the address space",
        })
    }
}

impl std::error::Error for InsertError {}

/// What a free call did to the registry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FreeOutcome {
    /// Freed and quarantined; `alloc` is in its freed state.
    Freed(Allocation),
    /// Null pointer: CUDA defines freeing it as doing nothing.
    Null,
    /// The base of an allocation already freed and still in quarantine.
    DoubleFree { alloc: Allocation, first_free: SiteId },
    /// A pointer inside an allocation (live or quarantined) but not its base.
    InvalidFree { alloc: Allocation, offset: u64 },
    /// A free call of the wrong family (`cudaFreeHost` on device memory, …). The driver
    /// refuses it, so the allocation stays live.
    MismatchedFree { alloc: Allocation, api: FreeApi },
    /// Not in any live or quarantined allocation.
    UnknownPointer,
}

/// The outcome of a free and what left quarantine because of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Freed {
    pub outcome: FreeOutcome,
    /// Oldest quarantined allocations pushed out by the budgets, now forgotten: the caller
    /// must really release them (the real `cudaFree`), in this order.
    pub evicted: Vec<Allocation>,
}

/// Where an address falls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup {
    Live {
        alloc: Allocation,
        offset: u64,
    },
    /// Inside a freed allocation still in quarantine.
    Freed {
        alloc: Allocation,
        offset: u64,
    },
    /// In no allocation; the nearest entries (live or quarantined) below and above, for
    /// "N bytes past the end of X". Both `None` when the registry is empty.
    Outside {
        below: Option<Allocation>,
        above: Option<Allocation>,
    },
}

/// Counts kept current by every operation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub live: u64,
    pub live_bytes: u64,
    pub quarantined: u64,
    pub quarantined_bytes: u64,
    /// Allocations that left quarantine through the budgets (or `evict_quarantine`).
    pub evicted: u64,
    /// Quarantined allocations displaced because the driver reused their memory.
    pub reused: u64,
    /// Live allocations displaced by a new one: frees the runtime never saw.
    pub overwritten: u64,
}

/// The registry. Share it by reference or `Arc`; every method takes `&self`.
pub struct Registry {
    config: Config,
    inner: Lock<Inner>,
    /// Told of every allocation and free as they are registered (`gpusan trace`).
    observer: std::sync::OnceLock<Box<dyn Observer>>,
    /// Some pool block's free may wait to be shown to kernels (`blocks`): read at every
    /// launch without the lock.
    pending_hint: std::sync::atomic::AtomicBool,
}

/// What is told of the registry's changes ([`Registry::observe`]): called under its write
/// lock, so it must be quick and must not call the registry.
pub trait Observer: Send + Sync {
    /// An allocation or a pool block (its kind [`AllocKind::PoolBlock`]) registered.
    fn allocated(&self, a: &Allocation);
    /// One freed (its state now [`AllocState::Freed`]).
    fn freed(&self, a: &Allocation);
}

/// `std`'s reader–writer lock, whose whole state is the lock itself (see `per_process` for
/// why that matters after `fork`), taken poisoned or not (`locks`).
struct Lock<T>(RwLock<T>);

impl<T> Lock<T> {
    fn read(&self) -> RwLockReadGuard<'_, T> {
        locks::read(&self.0)
    }

    fn write(&self) -> RwLockWriteGuard<'_, T> {
        locks::write(&self.0)
    }
}

#[derive(Default)]
struct Inner {
    by_base: BTreeMap<u64, Allocation>,
    /// `(id, base)` in free order. Entries displaced by reuse stay here until they reach the
    /// front or a compaction (a linear removal per reuse would cost more than it saves).
    quarantine: VecDeque<(u64, u64)>,
    stats: Stats,
    /// Blocks pools handed out inside the allocations above (`pool_blocks`).
    blocks: Blocks,
    next_id: u64,
    /// Bumped by every change, so the device copy knows when to re-upload.
    version: u64,
}

impl Default for Registry {
    fn default() -> Self {
        Registry::new(Config::default())
    }
}

impl Registry {
    pub fn new(config: Config) -> Self {
        Registry {
            config,
            inner: Lock(RwLock::new(Inner { next_id: 1, ..Inner::default() })),
            observer: std::sync::OnceLock::new(),
            pending_hint: std::sync::atomic::AtomicBool::new(false),
        }
    }

    pub fn config(&self) -> Config {
        self.config
    }

    /// Has `observer` told of every allocation, pool block and free from now on, under the
    /// registry's lock (so in the order they were registered). One observer per registry:
    /// false if there is one already.
    pub fn observe(&self, observer: Box<dyn Observer>) -> bool {
        self.observer.set(observer).is_ok()
    }

    fn tell(&self, f: impl FnOnce(&dyn Observer)) {
        if let Some(o) = self.observer.get() {
            f(o.as_ref());
        }
    }

    /// Registers an allocation the driver has just made. Entries overlapping its range are
    /// displaced: the driver's word on what memory is in use wins over ours.
    pub fn insert(&self, new: NewAlloc) -> Result<Inserted, InsertError> {
        self.insert_with_redzone(new, 0)
    }

    /// As [`Registry::insert`], for an allocation the driver made `redzone` bytes longer than
    /// the program asked: registered at the size asked, the red zone kept with it (and in its
    /// device entry), and entries overlapping the red zone displaced too (the driver handed it
    /// out with the rest).
    pub fn insert_with_redzone(&self, new: NewAlloc, redzone: u64) -> Result<Inserted, InsertError> {
        if new.base == 0 {
            return Err(InsertError::Null);
        }
        if new.size == 0 {
            return Err(InsertError::Empty);
        }
        new.base.checked_add(new.size).ok_or(InsertError::Wraps)?;
        let end = new.base.saturating_add(new.size).saturating_add(redzone);
        let mut inner = self.inner.write();
        let id = inner.next_id;
        inner.next_id += 1;
        let mut inserted = Inserted { id, reused: Vec::new(), overwritten: Vec::new() };
        // Entries are disjoint, so the overlapping ones are exactly the last few starting below `end`.
        while let Some(old) = inner.by_base.range(..end).next_back().map(|(_, a)| *a) {
            if old.end() <= new.base {
                break;
            }
            inner.forget(&old);
            if old.is_live() {
                inner.stats.overwritten += 1;
                inserted.overwritten.push(old);
            } else {
                inner.stats.reused += 1;
                inserted.reused.push(old);
            }
        }
        let alloc = Allocation {
            id,
            base: new.base,
            size: new.size,
            kind: new.kind,
            device: new.device,
            context: new.context,
            site: new.site,
            state: AllocState::Live,
            redzone,
        };
        inner.by_base.insert(new.base, alloc);
        self.tell(|o| o.allocated(&alloc));
        // Blocks of a pool whose memory the driver took back unseen: not the new range's.
        inner.blocks.remove_range(new.base, end);
        inner.stats.live += 1;
        inner.stats.live_bytes += new.size;
        inner.version += 1;
        inner.compact_quarantine();
        Ok(inserted)
    }

    /// Records a free call at `site`. Only a valid free changes the registry.
    pub fn free(&self, ptr: u64, api: FreeApi, site: SiteId) -> Freed {
        let mut evicted = Vec::new();
        if ptr == 0 {
            return Freed { outcome: FreeOutcome::Null, evicted };
        }
        let mut inner = self.inner.write();
        let Some(alloc) = inner.containing(ptr) else {
            return Freed { outcome: FreeOutcome::UnknownPointer, evicted };
        };
        let outcome = if ptr != alloc.base {
            FreeOutcome::InvalidFree { alloc, offset: ptr - alloc.base }
        } else if let AllocState::Freed { site: first_free } = alloc.state {
            FreeOutcome::DoubleFree { alloc, first_free }
        } else if !api.accepts(alloc.kind) {
            FreeOutcome::MismatchedFree { alloc, api }
        } else {
            let freed = Allocation { state: AllocState::Freed { site }, ..alloc };
            inner.by_base.insert(freed.base, freed);
            self.tell(|o| o.freed(&freed));
            inner.stats.live -= 1;
            inner.stats.live_bytes -= freed.size;
            inner.stats.quarantined += 1;
            inner.stats.quarantined_bytes += freed.size;
            inner.quarantine.push_back((freed.id, freed.base));
            // A freed segment (`torch.cuda.empty_cache`, a pool trimmed) takes its blocks:
            // the segment's own freed entry now stands for all of its memory.
            inner.blocks.remove_range(freed.base, freed.end());
            inner.version += 1;
            inner.evict_while(&mut evicted, |s| {
                s.quarantined_bytes > self.config.quarantine_bytes
                    || s.quarantined > self.config.quarantine_count as u64
            });
            FreeOutcome::Freed(freed)
        };
        Freed { outcome, evicted }
    }

    /// Releases the oldest quarantined allocations until at most `keep_bytes` remain
    /// quarantined: at exit (`0`), or to retry an allocation that failed for lack of memory.
    pub fn evict_quarantine(&self, keep_bytes: u64) -> Vec<Allocation> {
        let mut evicted = Vec::new();
        self.inner.write().evict_while(&mut evicted, |s| s.quarantined_bytes > keep_bytes);
        evicted
    }

    /// Forgets every entry of a destroyed context (the driver released its memory with it)
    /// and returns them.
    pub fn remove_context(&self, context: u64) -> Vec<Allocation> {
        let mut inner = self.inner.write();
        let gone: Vec<Allocation> = inner.by_base.values().filter(|a| a.context == context).copied().collect();
        for alloc in &gone {
            inner.forget(alloc);
        }
        if !gone.is_empty() {
            inner.version += 1;
            inner.compact_quarantine();
        }
        gone
    }

    /// Forgets the entry based at `base` (memory the driver took back without a free call
    /// gpusan judges: a destroyed graph's allocations, a trimmed pool) and returns it.
    pub fn forget(&self, base: u64) -> Option<Allocation> {
        let mut inner = self.inner.write();
        let alloc = *inner.by_base.get(&base)?;
        inner.forget(&alloc);
        inner.compact_quarantine();
        Some(alloc)
    }

    /// Where `addr` falls: `O(log n)` under the read lock.
    pub fn lookup(&self, addr: u64) -> Lookup {
        let inner = self.inner.read();
        let below = inner.by_base.range(..=addr).next_back().map(|(_, a)| *a);
        match below {
            Some(alloc) if alloc.contains(addr) => {
                let offset = addr - alloc.base;
                if alloc.is_live() {
                    Lookup::Live { alloc, offset }
                } else {
                    Lookup::Freed { alloc, offset }
                }
            }
            _ => {
                let above = inner.by_base.range((Bound::Excluded(addr), Bound::Unbounded)).next().map(|(_, a)| *a);
                Lookup::Outside { below, above }
            }
        }
    }

    /// Every live and quarantined allocation, by address.
    pub fn snapshot(&self) -> Vec<Allocation> {
        self.inner.read().by_base.values().copied().collect()
    }

    pub fn stats(&self) -> Stats {
        self.inner.read().stats
    }

    /// Changes with every insert, free and eviction.
    pub fn version(&self) -> u64 {
        self.inner.read().version
    }

    /// Copies the device view into `out` under one read lock, so entries, version and the
    /// shape agree.
    fn fill_device_entries(&self, out: &mut Vec<DeviceEntry>) -> (u64, TableShape) {
        let inner = self.inner.read();
        out.clear();
        // Room for one entry per allocation and block and an eighth more (not growth's doubling).
        let most = inner.by_base.len() + inner.blocks.len();
        if out.capacity() < most {
            out.reserve_exact(most + most / 8);
        }
        if inner.blocks.is_empty() {
            out.extend(inner.by_base.values().map(DeviceEntry::from));
        } else {
            inner.merge_blocks(out);
        }
        let shape = TableShape {
            entries: out.len() as u64,
            allocations: inner.by_base.len() as u64,
            blocks: inner.blocks.len() as u64,
        };
        (inner.version, shape)
    }
}

impl Inner {
    fn containing(&self, addr: u64) -> Option<Allocation> {
        self.by_base.range(..=addr).next_back().map(|(_, a)| *a).filter(|a| a.contains(addr))
    }

    /// Removes an entry from the map and the counts (its quarantine slot goes stale).
    fn forget(&mut self, alloc: &Allocation) {
        self.by_base.remove(&alloc.base);
        self.blocks.remove_range(alloc.base, alloc.end());
        if alloc.is_live() {
            self.stats.live -= 1;
            self.stats.live_bytes -= alloc.size;
        } else {
            self.stats.quarantined -= 1;
            self.stats.quarantined_bytes -= alloc.size;
        }
        self.version += 1;
    }

    fn evict_while(&mut self, out: &mut Vec<Allocation>, over: impl Fn(&Stats) -> bool) {
        while over(&self.stats) {
            let Some((id, base)) = self.quarantine.pop_front() else { break };
            match self.by_base.get(&base) {
                Some(alloc) if alloc.id == id && !alloc.is_live() => {
                    let alloc = *alloc;
                    self.forget(&alloc);
                    self.stats.evicted += 1;
                    out.push(alloc);
                }
                _ => {} // displaced by reuse or context destruction: already forgotten
            }
        }
    }

    /// Keeps stale quarantine slots from outgrowing the live ones.
    fn compact_quarantine(&mut self) {
        if self.quarantine.len() > 2 * self.stats.quarantined as usize + 1024 {
            let by_base = &self.by_base;
            self.quarantine.retain(|&(id, base)| by_base.get(&base).is_some_and(|a| a.id == id && !a.is_live()));
        }
    }
}

// ---------------------------------------------------------------------------------------
// The device table.

/// One entry of the table instrumented kernels search, laid out as [`gpusan_abi::table`]
/// says (asserted below): 32 bytes, 32-aligned, one L2 sector.
#[repr(C, align(32))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceEntry {
    pub base: u64,
    pub size: u64,
    pub id: u64,
    pub flags: u32,
    pub device: i32,
}

const _: () = {
    use gpusan_abi::table;
    use std::mem::{align_of, offset_of, size_of};
    assert!(size_of::<DeviceEntry>() == table::ENTRY_BYTES as usize && align_of::<DeviceEntry>() == 32);
    assert!(offset_of!(DeviceEntry, base) == table::ENTRY_BASE.offset);
    assert!(offset_of!(DeviceEntry, size) == table::ENTRY_SIZE.offset);
    assert!(offset_of!(DeviceEntry, id) == table::ENTRY_ID.offset);
    assert!(offset_of!(DeviceEntry, flags) == table::ENTRY_FLAGS.offset);
    assert!(offset_of!(DeviceEntry, device) == table::ENTRY_DEVICE.offset);
};

impl DeviceEntry {
    pub const LIVE: u32 = gpusan_abi::table::STATE_LIVE;
    pub const FREED: u32 = gpusan_abi::table::STATE_FREED;
    pub const STATE_MASK: u32 = gpusan_abi::table::STATE_MASK;
    pub const KIND_SHIFT: u32 = gpusan_abi::table::KIND_SHIFT;

    pub fn is_live(&self) -> bool {
        self.flags & Self::STATE_MASK == Self::LIVE
    }

    pub fn is_freed(&self) -> bool {
        self.flags & Self::STATE_MASK == Self::FREED
    }

    /// [`AllocKind::code`] of the allocation.
    pub fn kind_code(&self) -> u8 {
        (self.flags >> Self::KIND_SHIFT) as u8
    }
}

impl From<&Allocation> for DeviceEntry {
    fn from(a: &Allocation) -> Self {
        let state = if a.is_live() { Self::LIVE } else { Self::FREED };
        DeviceEntry {
            base: a.base,
            size: a.size,
            id: a.id,
            flags: state | u32::from(a.kind.code()) << Self::KIND_SHIFT | gpusan_abi::table::redzone_flags(a.redzone),
            device: a.device,
        }
    }
}

/// What precedes the entries in device memory ([`gpusan_abi::table`]: entry `i` at
/// `32 + 32 * i`, sorted by `base`, ranges disjoint).
#[repr(C, align(32))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceTableHeader {
    pub magic: u32,
    pub layout: u32,
    pub len: u64,
    pub version: u64,
    pub reserved: u64,
}

const _: () = {
    use gpusan_abi::table;
    use std::mem::{offset_of, size_of};
    assert!(size_of::<DeviceTableHeader>() == table::HEADER_BYTES as usize);
    assert!(offset_of!(DeviceTableHeader, magic) == table::HEADER_MAGIC.offset);
    assert!(offset_of!(DeviceTableHeader, layout) == table::HEADER_LAYOUT.offset);
    assert!(offset_of!(DeviceTableHeader, len) == table::HEADER_LEN.offset);
    assert!(offset_of!(DeviceTableHeader, version) == table::HEADER_VERSION.offset);
    assert!(offset_of!(DeviceTableHeader, reserved) == table::HEADER_RESERVED.offset);
};

impl DeviceTableHeader {
    pub const MAGIC: u32 = gpusan_abi::table::MAGIC;
    pub const LAYOUT: u32 = gpusan_abi::table::LAYOUT;

    /// The header as it lies in device memory (little-endian, like every NVIDIA GPU).
    pub fn to_bytes(&self) -> [u8; gpusan_abi::table::HEADER_BYTES as usize] {
        use gpusan_abi::table::{HEADER_LAYOUT, HEADER_LEN, HEADER_MAGIC, HEADER_RESERVED, HEADER_VERSION};
        let mut out = [0; gpusan_abi::table::HEADER_BYTES as usize];
        let mut put = |f: gpusan_abi::Field, bytes: &[u8]| out[f.offset..f.end()].copy_from_slice(bytes);
        put(HEADER_MAGIC, &self.magic.to_le_bytes());
        put(HEADER_LAYOUT, &self.layout.to_le_bytes());
        put(HEADER_LEN, &self.len.to_le_bytes());
        put(HEADER_VERSION, &self.version.to_le_bytes());
        put(HEADER_RESERVED, &self.reserved.to_le_bytes());
        out
    }
}

/// The host copy of the device table, kept in step with one registry by
/// [`DeviceTable::update`]. The runtime uploads what changed before each launch, in place
/// (`crates/inject/src/routes/mirror.rs`), so a kernel never starts with a table older than the
/// allocations made before its launch. It is not double-buffered: a kernel still running on
/// another stream while the program allocates can see entries change under it.
#[derive(Clone, Debug, Default)]
pub struct DeviceTable {
    entries: Vec<DeviceEntry>,
    scratch: Vec<DeviceEntry>,
    /// Registry version reflected; `None` before the first update.
    version: Option<u64>,
    /// The shape of the largest table so far (device memory follows the peak).
    peak: TableShape,
}

impl DeviceTable {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn build(registry: &Registry) -> Self {
        let mut table = Self::new();
        table.update(registry);
        table
    }

    /// Brings the table up to the registry. `None` when nothing changed since the last call;
    /// otherwise the range of entries that differ (upload those and the header). The snapshot
    /// is `O(n)`, taken only when the registry's version moved, i.e. at launches after
    /// allocations or frees.
    pub fn update(&mut self, registry: &Registry) -> Option<Range<usize>> {
        if self.version == Some(registry.version()) {
            return None;
        }
        let (version, shape) = registry.fill_device_entries(&mut self.scratch);
        std::mem::swap(&mut self.entries, &mut self.scratch);
        self.version = Some(version);
        if shape.entries >= self.peak.entries {
            self.peak = shape;
        }
        let (new, old) = (&self.entries, &self.scratch);
        let first = new.iter().zip(old).position(|(a, b)| a != b).unwrap_or(new.len().min(old.len()));
        let last = if new.len() == old.len() {
            new.len() - new.iter().rev().zip(old.iter().rev()).position(|(a, b)| a != b).unwrap_or(new.len() - first)
        } else {
            new.len()
        };
        Some(first..last.max(first))
    }

    pub fn entries(&self) -> &[DeviceEntry] {
        &self.entries
    }

    /// The registry version reflected (0 before the first update).
    pub fn version(&self) -> u64 {
        self.version.unwrap_or(0)
    }

    pub fn header(&self) -> DeviceTableHeader {
        DeviceTableHeader {
            magic: DeviceTableHeader::MAGIC,
            layout: DeviceTableHeader::LAYOUT,
            len: self.entries.len() as u64,
            version: self.version(),
            reserved: 0,
        }
    }

    /// Device bytes of `entries[range]`, to upload at
    /// `gpusan_abi::table::entry_offset(range.start)`. Empty when the range is out of bounds.
    pub fn entry_bytes(&self, range: Range<usize>) -> &[u8] {
        let entries = self.entries.get(range).unwrap_or(&[]);
        // SAFETY: `DeviceEntry` is `repr(C)` with fields 8+8+8+4+4 = 32 bytes and size 32
        // (asserted above), so it has no padding and every byte is initialised; u8 has no
        // alignment or validity requirement.
        unsafe { std::slice::from_raw_parts(entries.as_ptr().cast::<u8>(), std::mem::size_of_val(entries)) }
    }

    /// The shape of the largest table uploaded so far.
    pub fn peak(&self) -> TableShape {
        self.peak
    }

    /// Device bytes used: header plus entries.
    pub fn device_bytes(&self) -> usize {
        gpusan_abi::table::table_bytes(self.entries.len() as u64) as usize
    }
}

/// The search instrumented kernels run, in Rust: the last entry whose `base <= addr`, if
/// `addr` lies inside it. The PTX version must do exactly this:
///
/// ```text
/// lo = 0; hi = len
/// while lo < hi { mid = lo + (hi - lo) / 2; if e[mid].base <= addr { lo = mid + 1 } else { hi = mid } }
/// if lo == 0 { miss } else if addr - e[lo-1].base < e[lo-1].size (unsigned) { hit e[lo-1] } else { miss }
/// ```
///
/// A hit may be a freed entry (check `is_freed`): that is a use after free.
pub fn device_lookup(entries: &[DeviceEntry], addr: u64) -> Option<&DeviceEntry> {
    let (mut lo, mut hi) = (0usize, entries.len());
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if entries[mid].base <= addr {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    let entry = entries.get(lo.checked_sub(1)?)?;
    (addr.wrapping_sub(entry.base) < entry.size).then_some(entry)
}

/// Host call sites and their frames (`registry/sites.rs`).
mod sites;
pub use sites::*;

/// Addresses as `"0x…"` strings in JSON (`registry/hex.rs`), and the same for an optional one.
pub(crate) mod hex;
pub(crate) mod hex_option;
