//! The one error format of every mode: a [`Report`] per finding, whether a host API check or
//! an instrumented kernel found it; a [`Collector`] that folds repeats and bounds memory; and
//! the [`Document`] written at exit, as compute-sanitizer-style text or as JSON.
//!
//! Stacks travel as [`SiteId`]s until [`Collector::finish`] symbolizes each distinct site
//! once: symbolizing is slow and most findings are repeats that are only counted.
//!
//! JSON is the stable interface for scripts: field names are fixed, enum values are
//! `snake_case`, addresses are `"0x…"` strings (exact for every 64-bit value), and
//! `Document::from_json` reads back what `to_json` wrote.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::coverage::Coverage;
use crate::registry::{hex, AllocKind, Allocation, Frame, SiteId};

mod text;

/// gpusan's version, as the reports it writes name it.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    // Host API checks.
    MemcpyOutOfBounds,
    MemsetOutOfBounds,
    /// A copy, set or range (prefetch, advice) touching freed (quarantined) memory.
    UseAfterFreeHost,
    /// A device pointer in no known allocation.
    UnknownDeviceAddress,
    /// A 2-D/3-D copy or set whose rows are wider than their pitch.
    InvalidPitch,
    /// A peer copy naming a device the memory does not belong to.
    DeviceMismatch,
    DoubleFree,
    InvalidFree,
    MismatchedFree,
    UnknownFree,
    Leak,
    /// A tensor map (`cuTensorMapEncode*`) whose declared extent runs past its allocation:
    /// `cp.async.bulk.tensor` through it may reach memory the tensor does not own.
    TensorMapOutOfBounds,
    /// A tensor map made on freed (quarantined) memory.
    TensorMapUseAfterFree,
    /// A range an API call is given (a managed-memory prefetch or advice) that runs past
    /// its allocation.
    RangeOutOfBounds,
    // Instrumented kernels.
    OutOfBoundsRead,
    OutOfBoundsWrite,
    OutOfBoundsAtomic,
    UseAfterFree,
    UseAfterScope,
    SharedOutOfBounds,
    LocalOutOfBounds,
    MisalignedAccess,
    // The run as a whole.
    /// A kernel launched unchecked, counted as an error under `gpusan run --require-checked`.
    UncheckedLaunch,
    /// A kernel faulted (illegal address, trap, …): `crate::fault`.
    KernelFault,
    /// Canary mode: the bytes past an allocation's end (its tail canary) were found
    /// overwritten by gpusan's scan (`crate::canary`).
    CanaryOverwrite,
}

/// Which pointer argument of an API call a host finding is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Operand {
    Dst,
    Src,
    /// The pointer of a free.
    Ptr,
    /// The `globalAddress` of a tensor map.
    GlobalAddress,
}

impl Operand {
    pub fn name(self) -> &'static str {
        match self {
            Operand::Dst => "dst",
            Operand::Src => "src",
            Operand::Ptr => "ptr",
            Operand::GlobalAddress => "globalAddress",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Access {
    Read,
    Write,
    Atomic,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Space {
    Global,
    Shared,
    Local,
    Generic,
}

/// A host stack: the site while collecting, its frames once symbolized. Serialized as the
/// frames alone (a site id means nothing outside the process).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(transparent)]
pub struct Stack {
    #[serde(skip)]
    pub site: SiteId,
    pub frames: Vec<Frame>,
}

impl From<SiteId> for Stack {
    fn from(site: SiteId) -> Self {
        Stack { site, frames: Vec::new() }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SourceLoc {
    pub file: String,
    pub line: u32,
}

/// An allocation as reports show it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct AllocInfo {
    pub id: u64,
    #[serde(with = "hex")]
    #[cfg_attr(feature = "schema", schemars(schema_with = "crate::registry::hex::schema"))]
    pub base: u64,
    pub size: u64,
    pub kind: AllocKind,
    pub device: i32,
    pub freed: bool,
    pub alloc_stack: Stack,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub free_stack: Option<Stack>,
    /// For a pool block: the allocation (segment) the pool carved it from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segment: Option<SegmentInfo>,
}

/// The segment a pool block lies in.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SegmentInfo {
    pub id: u64,
    #[serde(with = "hex")]
    #[cfg_attr(feature = "schema", schemars(schema_with = "crate::registry::hex::schema"))]
    pub base: u64,
    pub size: u64,
    pub kind: AllocKind,
}

impl From<&Allocation> for SegmentInfo {
    fn from(a: &Allocation) -> Self {
        SegmentInfo { id: a.id, base: a.base, size: a.size, kind: a.kind }
    }
}

/// Where an address outside a pool block fell inside the pool's segment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "in", rename_all = "snake_case")]
pub enum Landing {
    /// Memory of the segment no block holds: the pool's rounding slack, or not handed out.
    PoolSlack,
    /// Another block of the pool.
    NeighbourBlock {
        id: u64,
        #[serde(with = "hex")]
        #[cfg_attr(feature = "schema", schemars(schema_with = "crate::registry::hex::schema"))]
        base: u64,
        size: u64,
        freed: bool,
    },
}

impl From<&Allocation> for AllocInfo {
    fn from(a: &Allocation) -> Self {
        AllocInfo {
            id: a.id,
            base: a.base,
            size: a.size,
            kind: a.kind,
            device: a.device,
            freed: !a.is_live(),
            alloc_stack: a.site.into(),
            free_stack: a.free_site().map(Stack::from),
            segment: None,
        }
    }
}

/// Where the reported address lies relative to `Nearest::allocation`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "relation", rename_all = "snake_case")]
pub enum Position {
    /// `offset` bytes from the base (the access may still run past the end).
    Inside { offset: u64 },
    /// `bytes` past the end: 0 is the first byte after the allocation.
    PastEnd { bytes: u64 },
    /// `bytes` before the base: 1 is the byte just below it.
    Before { bytes: u64 },
}

impl Position {
    /// Where `addr` lies relative to `alloc`.
    pub fn of(addr: u64, alloc: &Allocation) -> Position {
        if addr < alloc.base {
            Position::Before { bytes: alloc.base - addr }
        } else if addr - alloc.base < alloc.size {
            Position::Inside { offset: addr - alloc.base }
        } else {
            Position::PastEnd { bytes: addr - alloc.end() }
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Nearest {
    pub allocation: AllocInfo,
    pub position: Position,
    /// For a pool block, where an address outside it fell in its segment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub landed: Option<Landing>,
}

impl Nearest {
    pub fn new(addr: u64, alloc: &Allocation) -> Self {
        Nearest { allocation: alloc.into(), position: Position::of(addr, alloc), landed: None }
    }
}

/// A module variable (`__device__`/`__constant__`) named by a symbol copy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SymbolInfo {
    pub name: String,
    #[serde(with = "hex")]
    #[cfg_attr(feature = "schema", schemars(schema_with = "crate::registry::hex::schema"))]
    pub address: u64,
    pub size: u64,
}

/// A finding of a host API check.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct HostDetails {
    pub api: String,
    pub operand: Operand,
    /// First byte the call touches (the pointer, for frees).
    #[serde(with = "hex")]
    #[cfg_attr(feature = "schema", schemars(schema_with = "crate::registry::hex::schema"))]
    pub address: u64,
    /// Bytes the call spans from `address` (0 for frees).
    pub size: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nearest: Option<Nearest>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub symbol: Option<SymbolInfo>,
    /// The tensor a tensor map describes, for a tensor-map finding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tensor: Option<TensorShape>,
    pub call_stack: Stack,
}

/// A tensor map's tensor as `cuTensorMapEncode*` declared it: what its extent (the host
/// finding's `size`) was computed from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TensorShape {
    /// `CUtensorMapDataType`'s name, lower case without the prefix ("float32").
    pub data_type: String,
    /// `globalDim`: elements along each dimension, innermost first.
    pub dims: Vec<u64>,
    /// `globalStrides`: bytes from one index to the next of dimensions 1 and up.
    pub strides: Vec<u64>,
}

/// A finding of an instrumented kernel.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DeviceDetails {
    /// The function the access is in, demangled with its parameters.
    pub kernel: String,
    /// Its symbol, where demangling changed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mangled: Option<String>,
    pub block: [u32; 3],
    pub thread: [u32; 3],
    pub space: Space,
    pub access: Access,
    #[serde(with = "hex")]
    #[cfg_attr(feature = "schema", schemars(schema_with = "crate::registry::hex::schema"))]
    pub address: u64,
    pub size: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nearest: Option<Nearest>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ptx: Option<SourceLoc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<SourceLoc>,
    /// The access's offset in its kernel's machine code, for kernels the binary route
    /// checked (no PTX line exists there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sass_offset: Option<u32>,
    /// The device the kernel ran on (its context's, whose error buffer held the record);
    /// absent where gpusan did not know it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<i32>,
    pub launch_stack: Stack,
    /// The device-heap block (`malloc` in a kernel) the pointer belongs to, when the kernel
    /// knew it: such blocks are in no host allocation, so `nearest` does not name them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heap_block: Option<HeapBlock>,
    /// The local object a local access was held to, or the frame a function returned an
    /// address in, as the kernel's record names it: a thread's local memory is in no host
    /// allocation, so this is what the address is explained by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frame_object: Option<FrameObject>,
}

/// What [`DeviceDetails::frame_object`] names ([`gpusan_abi::record::FrameObject`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "what", rename_all = "snake_case")]
pub enum FrameObject {
    /// A local array or struct at `frame_offset` bytes into its function's stack frame.
    LocalObject { frame_offset: u64, size: u64 },
    /// The function's own stack frame, of `size` bytes, whose address it returns.
    ReturnedFrame { size: u64 },
}

/// A block of the device heap, as a kernel's error record names it: its base only (the
/// record has no room for the size).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct HeapBlock {
    #[serde(with = "hex")]
    #[cfg_attr(feature = "schema", schemars(schema_with = "crate::registry::hex::schema"))]
    pub base: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "origin", rename_all = "snake_case")]
pub enum Details {
    Host(HostDetails),
    Device(DeviceDetails),
    Fault(FaultDetails),
    Canary(CanaryDetails),
}

/// When a canary was found overwritten.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum CanaryScan {
    /// The periodic scan, while the program ran.
    Periodic,
    /// The last check of a freed allocation before gpusan gave its memory back.
    BeforeFree,
    /// The final scan of a context the program tore down.
    ContextTeardown,
    /// The final scan at process exit.
    AtExit,
    /// A kernel freed the block (`free` in a kernel; the device heap's canary is compared
    /// there, by gpusan's `free`).
    DeviceFree,
}

impl CanaryScan {
    pub fn describe(self) -> &'static str {
        match self {
            CanaryScan::Periodic => "by the periodic scan",
            CanaryScan::BeforeFree => "by the check before its memory went back to the driver",
            CanaryScan::ContextTeardown => "by the final scan before its context was torn down",
            CanaryScan::AtExit => "by the final scan at exit",
            CanaryScan::DeviceFree => "when a kernel freed the block",
        }
    }
}

/// A tail canary found overwritten (canary mode): an overflow past the end of
/// `allocation`, or an underflow before the start of `next`, the allocation that begins
/// right after the canary (allocations of one driver page are packed, so the bytes before
/// an allocation are its lower neighbour's tail canary).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CanaryDetails {
    pub allocation: AllocInfo,
    /// The allocation that starts where the canary ends, if gpusan knows one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<AllocInfo>,
    /// The first byte of the canary that differs.
    #[serde(with = "hex")]
    #[cfg_attr(feature = "schema", schemars(schema_with = "crate::registry::hex::schema"))]
    pub address: u64,
    /// Its offset past the allocation's end (0: the first byte after it).
    pub offset_past_end: u64,
    /// Bytes of the canary that differ.
    pub bad_bytes: u64,
    /// Bytes the canary has.
    pub canary_bytes: u64,
    pub expected: u8,
    pub found: u8,
    pub scan: CanaryScan,
    /// Milliseconds since the guard started (the process's first guarded allocation).
    pub detected_ms: u64,
    /// Milliseconds since the last scan of the context that found its canaries clean (since
    /// the canary was written, if none did since).
    pub since_clean_scan_ms: u64,
    /// When the host read the finding from the scan's records: CLOCK_REALTIME, microseconds
    /// since the Unix epoch (a program's own clock can be compared with it).
    #[serde(default)]
    pub detected_unix_us: u64,
    /// When the host launched the scan that found it (the batch the scan ends), on the same
    /// clock.
    #[serde(default)]
    pub scan_launched_unix_us: u64,
    /// The GPU's `%globaltimer` (nanoseconds) when the scan kernel saw the bad bytes: a
    /// program that reads `%globaltimer` right after its overflowing store gets the detection
    /// latency GPU clock to GPU clock. Absent when the scan recorded none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scan_gpu_ns: Option<u64>,
    /// Kernels launched in the context since that scan, oldest first (the last 16).
    pub kernels: Vec<FaultLaunch>,
}

impl Report {
    /// A canary finding, its headline derived from the details.
    pub fn canary(details: CanaryDetails) -> Report {
        let what = canary_noun(&details.allocation.kind);
        let message = format!(
            "Canary overwritten: {} of the {} past the end of {what} of {}",
            plural(details.bad_bytes, "byte"),
            plural(details.canary_bytes, "byte"),
            plural(details.allocation.size, "byte")
        );
        Report { kind: ErrorKind::CanaryOverwrite, message, details: Details::Canary(details), label: None }
    }
}

/// What a canary finding calls an allocation of `kind`.
pub(crate) fn canary_noun(kind: &AllocKind) -> &'static str {
    match kind {
        AllocKind::PoolBlock { .. } => "a pool block",
        AllocKind::DeviceHeap => "a device-heap block (malloc in a kernel)",
        _ => "an allocation",
    }
}

/// One error.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Report {
    pub kind: ErrorKind,
    /// The headline, e.g. "Out-of-bounds __global__ write of size 4 bytes".
    pub message: String,
    pub details: Details,
    /// What the program said it was doing when the finding was drained
    /// (`gpusan_set_label`: the pytest plugin names the test).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

impl Report {
    /// A kernel finding, its headline derived from the details.
    pub fn device(kind: ErrorKind, details: DeviceDetails) -> Report {
        // Kernels report frees only for the device heap (`free` in a kernel).
        let freed = match kind {
            ErrorKind::DoubleFree => Some("Double free"),
            ErrorKind::InvalidFree => Some("Invalid free"),
            _ => None,
        };
        if let Some(what) = freed {
            let message = format!("{what} of device-heap pointer {:#x} (free in a kernel)", details.address);
            return Report { kind, message, details: Details::Device(details), label: None };
        }
        let what = match kind {
            ErrorKind::UseAfterFree => "Use-after-free",
            ErrorKind::UseAfterScope => "Use-after-scope",
            ErrorKind::MisalignedAccess => "Misaligned",
            _ => "Out-of-bounds",
        };
        let space = match details.space {
            Space::Global => "__global__",
            Space::Shared => "__shared__",
            Space::Local => "__local__",
            Space::Generic => "generic",
        };
        let access = match details.access {
            Access::Read => "read",
            Access::Write => "write",
            Access::Atomic => "atomic",
        };
        let message = format!("{what} {space} {access} of size {}", plural(u64::from(details.size), "byte"));
        Report { kind, message, details: Details::Device(details), label: None }
    }

    /// A GPU fault's finding.
    pub fn fault(details: FaultDetails) -> Report {
        Report {
            kind: ErrorKind::KernelFault,
            message: details.headline(),
            details: Details::Fault(details),
            label: None,
        }
    }

    pub fn stacks_mut(&mut self) -> Vec<&mut Stack> {
        let (own, nearest) = match &mut self.details {
            Details::Host(h) => (&mut h.call_stack, &mut h.nearest),
            Details::Device(d) => (&mut d.launch_stack, &mut d.nearest),
            Details::Fault(d) => {
                let kernels = d.kernels.iter_mut().map(|k| &mut k.launch_stack);
                return [&mut d.launch_stack, &mut d.call_stack].into_iter().chain(kernels).collect();
            }
            Details::Canary(d) => {
                let kernels = d.kernels.iter_mut().map(|k| &mut k.launch_stack);
                let allocs = [Some(&mut d.allocation), d.next.as_mut()].into_iter().flatten();
                return allocs
                    .flat_map(|a| std::iter::once(&mut a.alloc_stack).chain(a.free_stack.as_mut()))
                    .chain(kernels)
                    .collect();
            }
        };
        let mut stacks = vec![own];
        if let Some(n) = nearest {
            stacks.push(&mut n.allocation.alloc_stack);
            stacks.extend(n.allocation.free_stack.as_mut());
        }
        stacks
    }
}

/// One launch that may have faulted (`crate::fault`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct FaultLaunch {
    /// Empty for a graph's launch.
    pub kernel: String,
    /// The executable graph launched (`cuGraphLaunch`), whose kernels are not named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graph: Option<u64>,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub stream: u64,
    /// Where the program first launched this kernel (stacks are taken at a kernel's first
    /// launch only).
    #[serde(default)]
    pub launch_stack: Stack,
}

/// A GPU fault's finding (`crate::fault`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct FaultDetails {
    /// `CUDA_ERROR_ILLEGAL_ADDRESS` and the like.
    pub error: String,
    pub code: i32,
    /// The call whose result told the program (`cuCtxSynchronize`, a copy, a launch).
    pub api: String,
    /// Launched in the context since the last synchronization that succeeded, oldest first
    /// (at most the last 16).
    pub kernels: Vec<FaultLaunch>,
    /// Where the program first launched the last of them (each kernel's is in `kernels`).
    pub launch_stack: Stack,
    /// Where the program learnt of the fault.
    pub call_stack: Stack,
}

impl FaultDetails {
    pub fn headline(&self) -> String {
        format!("GPU fault: {} ({}): {}", self.error, self.code, crate::fault::meaning(self.code))
    }
}

/// Live allocations never freed, grouped by where they were made.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Leak {
    pub count: u64,
    pub bytes: u64,
    pub alloc_stack: Stack,
}

/// A report and how many times it happened.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Counted {
    pub count: u64,
    /// The process it was found in (set when the process writes its document): a run of
    /// several (`torchrun`'s ranks, one per GPU) says whose finding each is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<Process>,
    #[serde(flatten)]
    pub report: Report,
}

/// A line of a process's events file (`report-<pid>.json.events`): a finding the moment it
/// was made, with the process that made it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventLine {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<Process>,
    #[serde(flatten)]
    pub report: Report,
}

/// A process of the run, as a finding names it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Process {
    pub pid: u32,
    /// `$RANK` and `$LOCAL_RANK`, as `torchrun` and other launchers of distributed jobs set
    /// them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_rank: Option<u32>,
}

impl Process {
    /// The text report's line for it.
    pub fn line(&self) -> String {
        match self.rank {
            Some(rank) => format!("=========     In process {} (rank {rank})", self.pid),
            None => format!("=========     In process {}", self.pid),
        }
    }

    /// This process.
    pub fn this() -> Process {
        let var = |name| std::env::var(name).ok().and_then(|v| v.trim().parse().ok());
        Process { pid: std::process::id(), rank: var("RANK"), local_rank: var("LOCAL_RANK") }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Summary {
    /// Every occurrence, stored or not, leaked allocations included.
    pub total: u64,
    /// Distinct errors in `errors`.
    pub unique: u64,
    /// Occurrences of errors not stored because the cap was reached.
    pub not_stored: u64,
    pub by_kind: BTreeMap<ErrorKind, u64>,
    pub leaked_bytes: u64,
}

/// What a run writes at exit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Document {
    /// Always "gpusan".
    pub tool: String,
    /// The version of this document's schema ([`SCHEMA_VERSION`]; `gpusan schema` prints
    /// the schema): raised when a field is removed or changes meaning, while fields may be
    /// added within a version. A document written before the field existed reads as
    /// version 1, which it is; every document written has it.
    #[serde(default = "first_schema_version")]
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 1)))]
    pub schema_version: u32,
    pub version: String,
    /// The checking mode that produced it.
    pub mode: String,
    pub errors: Vec<Counted>,
    pub summary: Summary,
    pub leaks: Vec<Leak>,
    /// Values instrumented kernels counted (`count` mode: executed memory instructions).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub counters: BTreeMap<String, u64>,
    /// Modules loaded without instrumentation, by reason ("machine code only", …), with
    /// how many: their kernels ran unchecked.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub unchecked_modules: BTreeMap<String, u64>,
    /// What the run could not observe ("runtime API errors were not observed: …"), shown
    /// under the header: a silent report must not pass for a clean one where it is blind.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// What the checks cost, counted by a counting build (`--mode check --count-checks`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check_counts: Option<CheckCounts>,
    /// Processes in which gpusan saw CUDA activity (a driver call reached it, or a Compute
    /// Sanitizer callback): a process's document counts 1, a merged one their sum. 0 means
    /// nothing was checked, and the report says so instead of a clean verdict.
    #[serde(default)]
    pub cuda_processes: u64,
    /// The kernels launched, and which were checked (`crate::coverage`).
    #[serde(default, skip_serializing_if = "Coverage::is_empty")]
    pub coverage: Coverage,
    /// Canary mode: which allocations the canaries guarded, and which not with why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canary: Option<CanaryCoverage>,
}

/// What canary mode guarded (`crate::canary`): kernels are never checked in that mode,
/// allocations are.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CanaryCoverage {
    /// Allocations given a tail canary, by kind ("device", "pool block", …).
    pub guarded: BTreeMap<String, u64>,
    /// Allocations without one, by reason.
    pub unguarded: BTreeMap<String, u64>,
    /// Scans launched (periodic, before frees, final).
    pub scans: u64,
    /// The interval between two periodic scans, in microseconds (`--canary-interval-ms`).
    #[serde(default)]
    pub interval_us: u64,
}

impl CanaryCoverage {
    pub fn merge(&mut self, o: CanaryCoverage) {
        for (k, n) in o.guarded {
            add(self.guarded.entry(k).or_default(), n);
        }
        for (k, n) in o.unguarded {
            add(self.unguarded.entry(k).or_default(), n);
        }
        add(&mut self.scans, o.scans);
        // Every process of a run is given the same interval.
        self.interval_us = self.interval_us.max(o.interval_us);
    }

    /// The report's line: `guarded 1,204 allocations (1,200 pool block, 4 device) with
    /// tail canaries, 312 scans; 3 unguarded: 3 size is a multiple of the pool's rounding`.
    pub fn summary_line(&self) -> String {
        let total = |m: &BTreeMap<String, u64>| sum(m.values().copied());
        let list = |m: &BTreeMap<String, u64>| m.iter().map(|(k, n)| format!("{n} {k}")).collect::<Vec<_>>().join(", ");
        let mut line = format!("guarded {}", plural(total(&self.guarded), "allocation"));
        if !self.guarded.is_empty() {
            let _ = write!(line, " ({})", list(&self.guarded));
        }
        let _ = write!(line, " with tail canaries, {}", plural(self.scans, "scan"));
        if !self.unguarded.is_empty() {
            let _ = write!(line, "; {} unguarded: {}", total(&self.unguarded), list(&self.unguarded));
        }
        line
    }
}

/// The version of the JSON report's schema (`schemas/report-v1.json`).
pub const SCHEMA_VERSION: u32 = 1;

fn first_schema_version() -> u32 {
    1
}

/// What the report says where it has no verdict: no process used CUDA under gpusan.
pub const NO_CUDA_ACTIVITY: &str = "no CUDA activity seen: nothing was checked";

/// The checks a counting build made, against those a naive checker (one check per access)
/// would make: dynamic counts read from the instrumented modules' counters
/// (`gpusan_abi::COUNTER_SYMBOLS`), summed over modules and processes, and static counts
/// from the check pass over the modules it instrumented.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CheckCounts {
    /// Checks a naive checker would have run (every checked access, once per thread that
    /// reached it, statically in-bounds ones included).
    pub accesses: u64,
    /// Per-access checks that ran.
    pub checks: u64,
    /// Group range checks that ran.
    pub group_checks: u64,
    /// Entries into two-version runs (branches on group checks already made, not checks).
    pub span_entries: u64,
    /// The same in the code: accesses checked (global, shared, local, use after scope).
    pub static_accesses: u64,
    /// Of those, behind a group's fast path.
    pub static_grouped: u64,
    /// Of those, statically in bounds (no check at all).
    pub static_in_bounds: u64,
    /// Group range checks in the code.
    pub static_group_checks: u64,
    /// Modules instrumented (a module loaded in several contexts counts each time).
    pub modules: u64,
}

impl CheckCounts {
    fn merge(&mut self, o: &CheckCounts) {
        add(&mut self.accesses, o.accesses);
        add(&mut self.checks, o.checks);
        add(&mut self.group_checks, o.group_checks);
        add(&mut self.span_entries, o.span_entries);
        add(&mut self.static_accesses, o.static_accesses);
        add(&mut self.static_grouped, o.static_grouped);
        add(&mut self.static_in_bounds, o.static_in_bounds);
        add(&mut self.static_group_checks, o.static_group_checks);
        add(&mut self.modules, o.modules);
    }

    /// `1 - (checks + group_checks) / accesses`: the share of a naive checker's checks the
    /// optimizations removed as the program ran. `None` before any access.
    pub fn dynamic_fraction_removed(&self) -> Option<f64> {
        (self.accesses > 0).then(|| 1.0 - self.checks.saturating_add(self.group_checks) as f64 / self.accesses as f64)
    }

    /// The same in the code: `1 - (static_accesses - static_grouped - static_in_bounds +
    /// static_group_checks) / static_accesses`.
    pub fn static_fraction_removed(&self) -> Option<f64> {
        let left = self
            .static_accesses
            .saturating_add(self.static_group_checks)
            .saturating_sub(self.static_grouped.saturating_add(self.static_in_bounds));
        (self.static_accesses > 0).then(|| 1.0 - left as f64 / self.static_accesses as f64)
    }
}

impl Document {
    pub fn to_json(&self) -> String {
        // Only strings, integers and maps with string keys: serialization cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    pub fn from_json(text: &str) -> serde_json::Result<Document> {
        serde_json::from_str(text)
    }

    /// Folds in the document of another process of the same run (programs start others).
    pub fn merge(&mut self, other: Document) {
        self.errors.extend(other.errors);
        let (s, o) = (&mut self.summary, other.summary);
        add(&mut s.total, o.total);
        add(&mut s.unique, o.unique);
        add(&mut s.not_stored, o.not_stored);
        add(&mut s.leaked_bytes, o.leaked_bytes);
        for (kind, n) in o.by_kind {
            add(s.by_kind.entry(kind).or_default(), n);
        }
        self.leaks.extend(other.leaks);
        for (name, v) in other.counters {
            let mine = self.counters.entry(name.clone()).or_default();
            // A rate (`device_table_bytes_per_pool_block`) is no sum: the worst process's.
            if name.contains("_per_") {
                *mine = (*mine).max(v);
            } else {
                add(mine, v);
            }
        }
        for (why, n) in other.unchecked_modules {
            add(self.unchecked_modules.entry(why).or_default(), n);
        }
        if let Some(o) = &other.check_counts {
            self.check_counts.get_or_insert_with(CheckCounts::default).merge(o);
        }
        add(&mut self.cuda_processes, other.cuda_processes);
        self.coverage.merge(other.coverage);
        if let Some(o) = other.canary {
            self.canary.get_or_insert_with(CanaryCoverage::default).merge(o);
        }
        for note in other.notes {
            if !self.notes.contains(&note) {
                self.notes.push(note);
            }
        }
    }

    /// `--require-checked`: each kernel launched unchecked is an error of the run (counted
    /// in the summary, named in a note). Returns how many there were.
    pub fn require_checked(&mut self) -> u64 {
        let unchecked: Vec<String> = self
            .coverage
            .unchecked()
            .map(|k| {
                let launches =
                    if k.launches == 1 { "1 launch".to_string() } else { format!("{} launches", k.launches) };
                format!("{} ({}, {launches})", k.name, k.unchecked.as_deref().unwrap_or_default())
            })
            .collect();
        let n = unchecked.len() as u64;
        if n > 0 {
            add(&mut self.summary.total, n);
            add(&mut self.summary.unique, n);
            add(self.summary.by_kind.entry(ErrorKind::UncheckedLaunch).or_default(), n);
            self.notes.push(format!("--require-checked: kernels launched unchecked: {}", unchecked.join("; ")));
        }
        n
    }

    /// The human rendering, in the style of compute-sanitizer.
    pub fn to_text(&self) -> String {
        self.to_string()
    }
}

/// How the text report is written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TextConfig {
    /// gpusan's own view as well (`gpusan run --verbose`): where in the instrumented PTX a
    /// kernel's finding is, the internal counters, and every host frame, the CUDA
    /// runtime's unfolded. The alternate form (`{:#}`) of a [`Document`] or [`Report`].
    pub verbose: bool,
    /// The header line ([`Document::header_line`]) was already written: `gpusan run` prints it
    /// before the first finding it streams, and the rest of the report follows later.
    pub header_shown: bool,
}

/// Counts add up saturating: they come from every process's report, and a damaged one
/// claiming 2^64 of something must neither panic the merge nor wrap the run's totals round
/// to a small number (a run with errors reading "0 errors").
fn add(count: &mut u64, n: u64) {
    *count = count.saturating_add(n);
}

fn sum(counts: impl Iterator<Item = u64>) -> u64 {
    counts.fold(0, u64::saturating_add)
}

/// `2 MiB`, `64 KiB`, or bytes when not a whole number of either.
pub(crate) fn bytes_human(n: u64) -> String {
    match n {
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{} MiB", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{} KiB", n >> 10),
        n => plural(n, "byte"),
    }
}

pub(crate) fn plural(n: u64, unit: &str) -> String {
    let mut out = n.to_string();
    let _ = write!(out, " {unit}{}", if n == 1 { "" } else { "s" });
    out
}

/// Limits of a [`Collector`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CollectorConfig {
    /// Distinct reports kept; later new ones are only counted.
    pub max_stored: usize,
}

impl Default for CollectorConfig {
    fn default() -> Self {
        CollectorConfig { max_stored: 1000 }
    }
}

/// What makes two findings the same error: kind, site, API or kernel, code location, and
/// the label it was found under (one bug hit by two tests is a finding of each).
#[derive(Clone, PartialEq, Eq, Hash)]
struct Key {
    label: Option<String>,
    kind: ErrorKind,
    site: SiteId,
    name: String,
    operand: Option<Operand>,
    ptx: Option<SourceLoc>,
    source: Option<SourceLoc>,
}

impl Key {
    fn of(report: &Report) -> Key {
        match &report.details {
            Details::Host(h) => Key {
                label: report.label.clone(),
                kind: report.kind,
                site: h.call_stack.site,
                name: h.api.clone(),
                operand: Some(h.operand),
                ptx: None,
                source: None,
            },
            Details::Device(d) => Key {
                label: report.label.clone(),
                kind: report.kind,
                site: d.launch_stack.site,
                name: d.kernel.clone(),
                operand: None,
                ptx: d.ptx.clone(),
                source: d.source.clone(),
            },
            Details::Fault(d) => Key {
                label: report.label.clone(),
                kind: report.kind,
                site: d.call_stack.site,
                name: d.error.clone(),
                operand: None,
                ptx: None,
                source: None,
            },
            // One finding per allocation (by where it was made and its id: a canary stays
            // overwritten, and every later scan sees it again).
            Details::Canary(d) => Key {
                label: report.label.clone(),
                kind: report.kind,
                site: d.allocation.alloc_stack.site,
                name: format!("canary of allocation {}", d.allocation.id),
                operand: None,
                ptx: None,
                source: None,
            },
        }
    }
}

/// Gathers reports over a run: identical ones are counted once, at most `max_stored` distinct
/// ones are kept (the first), every occurrence is counted. Not synchronized: the runtime
/// keeps it behind its own lock.
#[derive(Default)]
pub struct Collector {
    config: CollectorConfig,
    index: HashMap<Key, usize>,
    errors: Vec<Counted>,
    summary: Summary,
}

impl Collector {
    pub fn new(config: CollectorConfig) -> Self {
        Collector { config, ..Collector::default() }
    }

    /// Adds one occurrence; true when it is a new stored error.
    pub fn push(&mut self, report: Report) -> bool {
        self.push_n(report, 1)
    }

    /// Adds `times` occurrences at once (a GPU buffer drains already aggregated).
    pub fn push_n(&mut self, report: Report, times: u64) -> bool {
        if times == 0 {
            return false;
        }
        add(&mut self.summary.total, times);
        add(self.summary.by_kind.entry(report.kind).or_default(), times);
        let key = Key::of(&report);
        if let Some(&i) = self.index.get(&key) {
            if let Some(error) = self.errors.get_mut(i) {
                add(&mut error.count, times);
            }
            return false;
        }
        if self.errors.len() >= self.config.max_stored {
            add(&mut self.summary.not_stored, times);
            return false;
        }
        self.index.insert(key, self.errors.len());
        self.errors.push(Counted { count: times, process: None, report });
        true
    }

    pub fn errors(&self) -> &[Counted] {
        &self.errors
    }

    /// Every occurrence so far.
    pub fn total(&self) -> u64 {
        self.summary.total
    }

    /// The final document: leaks added, every stack symbolized through `symbolize` (each
    /// distinct site once; pass [`crate::registry::symbolize`] in the runtime).
    pub fn finish(self, mode: &str, leaks: Vec<Leak>, mut symbolize: impl FnMut(SiteId) -> Vec<Frame>) -> Document {
        let Collector { mut errors, mut summary, .. } = self;
        summary.unique = errors.len() as u64;
        let leaked = sum(leaks.iter().map(|l| l.count));
        if leaked > 0 {
            add(&mut summary.total, leaked);
            add(summary.by_kind.entry(ErrorKind::Leak).or_default(), leaked);
        }
        summary.leaked_bytes = sum(leaks.iter().map(|l| l.bytes));
        let mut leaks = leaks;
        let mut cache: HashMap<SiteId, Vec<Frame>> = HashMap::new();
        let stacks =
            errors.iter_mut().flat_map(|e| e.report.stacks_mut()).chain(leaks.iter_mut().map(|l| &mut l.alloc_stack));
        for stack in stacks {
            if stack.frames.is_empty() && stack.site != SiteId::UNKNOWN {
                stack.frames = cache.entry(stack.site).or_insert_with(|| symbolize(stack.site)).clone();
            }
            // A document holds frames only: site ids mean nothing outside this process, and
            // dropping them makes `from_json(to_json(d)) == d`.
            stack.site = SiteId::UNKNOWN;
        }
        Document {
            tool: "gpusan".into(),
            schema_version: SCHEMA_VERSION,
            version: VERSION.into(),
            mode: mode.into(),
            errors,
            summary,
            leaks,
            counters: BTreeMap::new(),
            unchecked_modules: BTreeMap::new(),
            notes: Vec::new(),
            // A process makes its document only when gpusan saw it use CUDA.
            cuda_processes: 1,
            coverage: Coverage::default(),
            canary: None,
            check_counts: None,
        }
    }
}
