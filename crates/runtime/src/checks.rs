//! Host API calls judged against the registry: every device range a copy or set touches must
//! lie inside one live allocation, and every free must name the base of a live allocation of
//! its family. Pure functions of (registry, call) → findings, so each API shape is tested
//! without a GPU; the hooks describe the call, run the check, then forward it to CUDA.
//!
//! Which pointers are device pointers is the caller's knowledge ([`Mem`]): a host pointer is
//! judged only when it lies in host memory the registry knows whole (pinned or managed); the
//! rest of host memory is the program's business, not ours.

use std::collections::{HashMap, HashSet};

use crate::registry::blocks::PoolPlace;
use crate::registry::{AllocKind, Allocation, FreeApi, FreeOutcome, Lookup, Registry, SiteId};
use crate::report::{Details, ErrorKind, HostDetails, Leak, Nearest, Operand, Report, SymbolInfo};

/// A pointer argument, as the caller classified it (`cudaMemcpyKind`, or
/// `cuPointerGetAttribute` for `cudaMemcpyDefault`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mem {
    Device(u64),
    Host(u64),
    /// A CUDA array handle: opaque, its bounds are the driver's to check.
    Array(u64),
    /// Device memory the driver knows but gpusan never saw allocated (module variables,
    /// memory allocated before gpusan was injected, IPC or VMM mappings): not judged,
    /// because gpusan does not know its bounds and a guess could be a false report.
    Untracked(u64),
}

/// One side of a 3-D copy or set: `cudaPitchedPtr` plus the `cudaPos` of the region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pitched3D {
    pub mem: Mem,
    /// Bytes from one row to the next.
    pub pitch: u64,
    /// Rows from one slice to the next (`cudaPitchedPtr::ysize`).
    pub rows: u64,
    /// Start of the region: x in bytes, y in rows, z in slices.
    pub pos: [u64; 3],
}

/// `cudaExtent` of a linear-memory copy: width in bytes, height in rows, depth in slices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent {
    pub width: u64,
    pub height: u64,
    pub depth: u64,
}

/// A `__device__`/`__constant__` variable, as `cudaGetSymbolAddress`/`Size` give it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Symbol<'a> {
    pub name: &'a str,
    pub address: u64,
    pub size: u64,
}

/// The shape of a copy or set; sync and async variants share one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Call<'a> {
    Copy {
        dst: Mem,
        src: Mem,
        count: u64,
    },
    Copy2D {
        dst: Mem,
        dpitch: u64,
        src: Mem,
        spitch: u64,
        width: u64,
        height: u64,
    },
    Copy3D {
        dst: Pitched3D,
        src: Pitched3D,
        extent: Extent,
    },
    CopyPeer {
        dst: u64,
        dst_device: i32,
        src: u64,
        src_device: i32,
        count: u64,
    },
    CopyToSymbol {
        symbol: Symbol<'a>,
        offset: u64,
        src: Mem,
        count: u64,
    },
    CopyFromSymbol {
        dst: Mem,
        symbol: Symbol<'a>,
        offset: u64,
        count: u64,
    },
    Set {
        dst: Mem,
        count: u64,
    },
    /// A range the call acts on as a whole (`cuMemPrefetchAsync`, `cuMemAdvise`).
    Range {
        ptr: Mem,
        count: u64,
    },
    Set2D {
        dst: Mem,
        pitch: u64,
        width: u64,
        height: u64,
    },
    Set3D {
        dst: Pitched3D,
        extent: Extent,
    },
}

/// What kind of call a finding comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Copy,
    Set,
    Range,
    Free,
}

/// One problem with one pointer argument of one call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub api: &'static str,
    pub op: Op,
    pub operand: Operand,
    pub problem: Problem,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Problem {
    /// `[start, start + len)` starts inside `alloc` and ends `past_end` bytes after it
    /// (possibly inside the next allocation).
    OutOfBounds {
        start: u64,
        len: u64,
        alloc: Allocation,
        past_end: u64,
    },
    /// Runs `past_end` bytes past the end of a module variable.
    SymbolOutOfBounds {
        start: u64,
        len: u64,
        name: String,
        address: u64,
        size: u64,
        past_end: u64,
    },
    /// Starts inside a freed, quarantined allocation.
    UseAfterFree {
        start: u64,
        len: u64,
        alloc: Allocation,
    },
    /// A device pointer in no allocation; its neighbours.
    UnknownAddress {
        start: u64,
        len: u64,
        below: Option<Allocation>,
        above: Option<Allocation>,
    },
    /// Rows wider than the pitch (the driver refuses the call).
    InvalidPitch {
        width: u64,
        pitch: u64,
    },
    /// A peer copy naming `device` for memory of another device.
    WrongDevice {
        start: u64,
        alloc: Allocation,
        device: i32,
    },
    DoubleFree {
        ptr: u64,
        alloc: Allocation,
        first_free: SiteId,
    },
    InvalidFree {
        ptr: u64,
        alloc: Allocation,
        offset: u64,
    },
    MismatchedFree {
        ptr: u64,
        alloc: Allocation,
        free_api: FreeApi,
    },
    UnknownFree {
        ptr: u64,
        below: Option<Allocation>,
        above: Option<Allocation>,
    },
}

impl Finding {
    /// A bounds finding on a module variable `name` can name becomes a symbol finding, so
    /// the report says which variable was overrun.
    pub fn name_variable(&mut self, name: impl Fn(&Allocation) -> Option<String>) {
        if let Problem::OutOfBounds { start, len, alloc, past_end } = self.problem {
            if let Some(name) = name(&alloc) {
                let (address, size) = (alloc.base, alloc.size);
                self.problem = Problem::SymbolOutOfBounds { start, len, name, address, size, past_end };
            }
        }
    }

    pub fn kind(&self) -> ErrorKind {
        match self.problem {
            Problem::OutOfBounds { .. } | Problem::SymbolOutOfBounds { .. } if self.op == Op::Set => {
                ErrorKind::MemsetOutOfBounds
            }
            Problem::OutOfBounds { .. } if self.op == Op::Range => ErrorKind::RangeOutOfBounds,
            Problem::OutOfBounds { .. } | Problem::SymbolOutOfBounds { .. } => ErrorKind::MemcpyOutOfBounds,
            Problem::UseAfterFree { .. } => ErrorKind::UseAfterFreeHost,
            Problem::UnknownAddress { .. } => ErrorKind::UnknownDeviceAddress,
            Problem::InvalidPitch { .. } => ErrorKind::InvalidPitch,
            Problem::WrongDevice { .. } => ErrorKind::DeviceMismatch,
            Problem::DoubleFree { .. } => ErrorKind::DoubleFree,
            Problem::InvalidFree { .. } => ErrorKind::InvalidFree,
            Problem::MismatchedFree { .. } => ErrorKind::MismatchedFree,
            Problem::UnknownFree { .. } => ErrorKind::UnknownFree,
        }
    }

    /// The report, stacks still unsymbolized; `call_site` is where the API was called.
    pub fn to_report(&self, call_site: SiteId) -> Report {
        let (api, operand) = (self.api, self.operand.name());
        let dir = match (self.op, self.operand) {
            (Op::Range, _) => "range",
            (_, Operand::Src) => "read",
            _ => "write",
        };
        let mut details = HostDetails {
            api: api.into(),
            operand: self.operand,
            address: 0,
            size: 0,
            nearest: None,
            symbol: None,
            tensor: None,
            call_stack: call_site.into(),
        };
        let message = match &self.problem {
            Problem::OutOfBounds { start, len, alloc, .. } => {
                (details.address, details.size, details.nearest) = (*start, *len, Some(Nearest::new(*start, alloc)));
                format!("Out-of-bounds {dir} of {} by {api} ({operand})", bytes(*len))
            }
            Problem::SymbolOutOfBounds { start, len, name, address, size, .. } => {
                (details.address, details.size) = (*start, *len);
                details.symbol = Some(SymbolInfo { name: name.clone(), address: *address, size: *size });
                format!("Out-of-bounds {dir} of {} by {api} ({operand}, symbol {name})", bytes(*len))
            }
            Problem::UseAfterFree { start, len, alloc } => {
                (details.address, details.size, details.nearest) = (*start, *len, Some(Nearest::new(*start, alloc)));
                format!("Use-after-free {dir} of {} by {api} ({operand})", bytes(*len))
            }
            Problem::UnknownAddress { start, len, below, above } => {
                (details.address, details.size) = (*start, *len);
                details.nearest = closest(*start, below, above).map(|a| Nearest::new(*start, a));
                format!("{api} ({operand}): {} at unknown device address {start:#x}", bytes(*len))
            }
            Problem::InvalidPitch { width, pitch } => {
                format!("{api} ({operand}): width of {} exceeds pitch of {}", bytes(*width), bytes(*pitch))
            }
            Problem::WrongDevice { start, alloc, device } => {
                (details.address, details.nearest) = (*start, Some(Nearest::new(*start, alloc)));
                format!("{api} ({operand}): {start:#x} is memory of device {}, not of device {device}", alloc.device)
            }
            Problem::DoubleFree { ptr, alloc, .. } => {
                (details.address, details.nearest) = (*ptr, Some(Nearest::new(*ptr, alloc)));
                format!("Double free of {ptr:#x} by {api}")
            }
            Problem::InvalidFree { ptr, alloc, offset } => {
                (details.address, details.nearest) = (*ptr, Some(Nearest::new(*ptr, alloc)));
                format!("Invalid free of {ptr:#x} by {api}: {} into an allocation, not its start", bytes(*offset))
            }
            Problem::MismatchedFree { ptr, alloc, .. } => {
                (details.address, details.nearest) = (*ptr, Some(Nearest::new(*ptr, alloc)));
                format!("Mismatched free of {ptr:#x} by {api}: it is {} memory", alloc.kind.describe())
            }
            Problem::UnknownFree { ptr, below, above } => {
                details.address = *ptr;
                details.nearest = closest(*ptr, below, above).map(|a| Nearest::new(*ptr, a));
                format!("Free of unknown pointer {ptr:#x} by {api}")
            }
        };
        Report { kind: self.kind(), message, details: Details::Host(details), label: None }
    }
}

fn bytes(n: u64) -> String {
    crate::report::plural(n, "byte")
}

/// The neighbour nearer to `addr`, for "N bytes past the end of X".
fn closest<'a>(addr: u64, below: &'a Option<Allocation>, above: &'a Option<Allocation>) -> Option<&'a Allocation> {
    match (below, above) {
        (Some(b), Some(a)) => Some(if addr.saturating_sub(b.end()) <= a.base.saturating_sub(addr) { b } else { a }),
        (b, a) => b.as_ref().or(a.as_ref()),
    }
}

/// Checks a copy or set before it is forwarded to CUDA. `api` is the name reports use
/// ("cudaMemcpy2DAsync", "cuMemsetD32", …).
pub fn check_call(registry: &Registry, api: &'static str, call: &Call) -> Vec<Finding> {
    let mut c = Checker { registry, api, op: Op::Copy, out: Vec::new() };
    match *call {
        Call::Copy { dst, src, count } => {
            c.linear(Operand::Dst, dst, 0, count);
            c.linear(Operand::Src, src, 0, count);
        }
        Call::Copy2D { dst, dpitch, src, spitch, width, height } => {
            c.plane(Operand::Dst, dst, dpitch, width, height);
            c.plane(Operand::Src, src, spitch, width, height);
        }
        Call::Copy3D { dst, src, extent } => {
            c.volume(Operand::Dst, dst, extent);
            c.volume(Operand::Src, src, extent);
        }
        Call::CopyPeer { dst, dst_device, src, src_device, count } => {
            c.peer(Operand::Dst, dst, dst_device, count);
            c.peer(Operand::Src, src, src_device, count);
        }
        Call::CopyToSymbol { symbol, offset, src, count } => {
            c.symbol(Operand::Dst, symbol, offset, count);
            c.linear(Operand::Src, src, 0, count);
        }
        Call::CopyFromSymbol { dst, symbol, offset, count } => {
            c.linear(Operand::Dst, dst, 0, count);
            c.symbol(Operand::Src, symbol, offset, count);
        }
        Call::Set { dst, count } => {
            c.op = Op::Set;
            c.linear(Operand::Dst, dst, 0, count);
        }
        Call::Range { ptr, count } => {
            c.op = Op::Range;
            c.linear(Operand::Ptr, ptr, 0, count);
        }
        Call::Set2D { dst, pitch, width, height } => {
            c.op = Op::Set;
            c.plane(Operand::Dst, dst, pitch, width, height);
        }
        Call::Set3D { dst, extent } => {
            c.op = Op::Set;
            c.volume(Operand::Dst, dst, extent);
        }
    }
    c.out
}

struct Checker<'r> {
    registry: &'r Registry,
    api: &'static str,
    op: Op,
    out: Vec<Finding>,
}

/// Whether memory of this kind lies on the device its allocation recorded (the current one
/// when it was made). Managed memory moves between devices, host memory is on none, and a
/// VMM mapping is on the device of its physical memory, which need not be that one.
fn placed_on_its_device(kind: AllocKind) -> bool {
    !matches!(
        kind,
        AllocKind::Managed
            | AllocKind::HostPinned { .. }
            | AllocKind::HostRegistered
            | AllocKind::Vmm
            | AllocKind::IpcImport
            | AllocKind::Other
    )
}

impl Checker<'_> {
    fn push(&mut self, operand: Operand, problem: Problem) {
        self.out.push(Finding { api: self.api, op: self.op, operand, problem });
    }

    /// `len` bytes from `offset` past the pointer.
    fn linear(&mut self, operand: Operand, mem: Mem, offset: u64, len: u64) {
        self.range(operand, mem, offset, len, None);
    }

    fn range(&mut self, operand: Operand, mem: Mem, offset: u64, len: u64, device: Option<i32>) {
        let (addr, is_device) = match mem {
            Mem::Device(addr) => (addr, true),
            Mem::Host(addr) => (addr, false),
            Mem::Array(_) | Mem::Untracked(_) => return,
        };
        if len == 0 {
            return;
        }
        let start = addr.saturating_add(offset);
        // The user's memory that `cudaHostRegister` pinned outlives the registration and may
        // extend past it: host-side uses of it are not ours to judge.
        let judged = |a: &Allocation| is_device || a.kind != AllocKind::HostRegistered;
        match self.registry.lookup(start) {
            Lookup::Live { alloc, .. } if judged(&alloc) => {
                // Inside a pool's segment the tensor is the allocation (issue 15): a copy past
                // it lands in the pool's slack or the next tensor, a copy into a freed one
                // into memory the pool may hand out again.
                let alloc = match is_device.then(|| self.registry.pool_place(start)) {
                    Some(PoolPlace::Block(block)) if !block.is_live() => {
                        self.push(operand, Problem::UseAfterFree { start, len, alloc: block });
                        return;
                    }
                    Some(PoolPlace::Block(block)) => block,
                    _ => alloc,
                };
                let end = u128::from(start) + u128::from(len);
                if end > u128::from(alloc.end()) {
                    let past_end = saturate(end - u128::from(alloc.end()));
                    self.push(operand, Problem::OutOfBounds { start, len, alloc, past_end });
                }
                if let Some(device) = device.filter(|&d| d != alloc.device && placed_on_its_device(alloc.kind)) {
                    self.push(operand, Problem::WrongDevice { start, alloc, device });
                }
            }
            Lookup::Freed { alloc, .. } if judged(&alloc) => {
                self.push(operand, Problem::UseAfterFree { start, len, alloc });
            }
            Lookup::Outside { below, above } if is_device => {
                self.push(operand, Problem::UnknownAddress { start, len, below, above });
            }
            _ => {}
        }
    }

    /// `height` rows of `width` bytes, `pitch` apart: the last row ends at
    /// `(height - 1) * pitch + width`.
    fn plane(&mut self, operand: Operand, mem: Mem, pitch: u64, width: u64, height: u64) {
        if width == 0 || height == 0 || matches!(mem, Mem::Array(_) | Mem::Untracked(_)) {
            return;
        }
        if width > pitch {
            self.push(operand, Problem::InvalidPitch { width, pitch });
            return;
        }
        let len = u128::from(height - 1) * u128::from(pitch) + u128::from(width);
        self.linear(operand, mem, 0, saturate(len));
    }

    fn volume(&mut self, operand: Operand, p: Pitched3D, e: Extent) {
        if e.width == 0 || e.height == 0 || e.depth == 0 || matches!(p.mem, Mem::Array(_) | Mem::Untracked(_)) {
            return;
        }
        let [x, y, z] = p.pos.map(u128::from);
        if x + u128::from(e.width) > u128::from(p.pitch) {
            self.push(operand, Problem::InvalidPitch { width: saturate(x).saturating_add(e.width), pitch: p.pitch });
            return;
        }
        let (pitch, slice) = (u128::from(p.pitch), u128::from(p.pitch) * u128::from(p.rows));
        let first = z * slice + y * pitch + x;
        let end =
            (z + u128::from(e.depth) - 1) * slice + (y + u128::from(e.height) - 1) * pitch + x + u128::from(e.width);
        self.linear(operand, p.mem, saturate(first), saturate(end - first));
    }

    fn peer(&mut self, operand: Operand, addr: u64, device: i32, count: u64) {
        self.range(operand, Mem::Device(addr), 0, count, Some(device));
    }

    fn symbol(&mut self, operand: Operand, symbol: Symbol, offset: u64, count: u64) {
        if count == 0 {
            return;
        }
        let end = u128::from(offset) + u128::from(count);
        if end > u128::from(symbol.size) {
            self.push(
                operand,
                Problem::SymbolOutOfBounds {
                    start: symbol.address.saturating_add(offset),
                    len: count,
                    name: symbol.name.into(),
                    address: symbol.address,
                    size: symbol.size,
                    past_end: saturate(end - u128::from(symbol.size)),
                },
            );
        }
    }
}

fn saturate(n: u128) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// The finding for a free the registry judged, if it was wrong. Neighbours of an unknown
/// pointer are looked up for the report.
pub fn check_free(registry: &Registry, api: &'static str, ptr: u64, outcome: &FreeOutcome) -> Option<Finding> {
    let problem = match *outcome {
        FreeOutcome::Freed(_) | FreeOutcome::Null => return None,
        FreeOutcome::DoubleFree { alloc, first_free } => Problem::DoubleFree { ptr, alloc, first_free },
        FreeOutcome::InvalidFree { alloc, offset } => Problem::InvalidFree { ptr, alloc, offset },
        FreeOutcome::MismatchedFree { alloc, api: free_api } => Problem::MismatchedFree { ptr, alloc, free_api },
        FreeOutcome::UnknownPointer => match registry.lookup(ptr) {
            Lookup::Outside { below, above } => Problem::UnknownFree { ptr, below, above },
            // Allocated since by another thread: report it without neighbours.
            _ => Problem::UnknownFree { ptr, below: None, above: None },
        },
    };
    Some(Finding { api, op: Op::Free, operand: Operand::Ptr, problem })
}

/// What the leak check leaves out besides module variables and memory opened from another
/// process.
#[derive(Debug, Default, Clone)]
pub struct LeakConfig {
    /// Contexts where a kernel faulted: every later call there fails, the program's frees
    /// included, so what it still held says nothing about its code.
    pub faulted_contexts: HashSet<u64>,
}

/// Live allocations at exit, grouped by allocation site, largest total first, and how many
/// allocations `config` left out.
pub fn leak_summary(registry: &Registry, config: &LeakConfig) -> (Vec<Leak>, u64) {
    let mut groups: HashMap<SiteId, (u64, u64)> = HashMap::new();
    let mut left_out = 0;
    // Module variables live as long as their module: never the program's to free. Another
    // process's memory opened here is the exporter's allocation, not one of this process.
    let own = |a: &&Allocation| !matches!(a.kind, AllocKind::ModuleVariable | AllocKind::IpcImport);
    for alloc in registry.snapshot().iter().filter(|a| a.is_live()).filter(own) {
        if config.faulted_contexts.contains(&alloc.context) {
            left_out += 1;
            continue;
        }
        let group = groups.entry(alloc.site).or_default();
        group.0 += 1;
        group.1 = group.1.saturating_add(alloc.size);
    }
    let mut leaks: Vec<Leak> =
        groups.into_iter().map(|(site, (count, bytes))| Leak { count, bytes, alloc_stack: site.into() }).collect();
    leaks.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.alloc_stack.site.cmp(&b.alloc_stack.site)));
    (leaks, left_out)
}
