//! The contract between instrumented kernels and the runtime: which module variables a
//! module declares to take part, and the layout of the error buffer kernels write.
//!
//! A module that declares these variables gets them set by the runtime right after it
//! loads:
//!
//! | symbol | type | value |
//! | --- | --- | --- |
//! | `__gpusan_table` | `.const .u64` | device address of the allocation table ([`crate::registry::DeviceTable`]: 32-byte header, then 32-byte entries sorted by base), with the lookup cache in the [`LOOKUP_CACHE_BYTES`] below it |
//! | `__gpusan_errors` | `.u64` | device address of the error buffer below |
//! | `__gpusan_module` | `.u32` | this module's number, for [`ErrorRecord::kernel`] |
//!
//! The error buffer is a 16-byte [`ErrorBufferHeader`] followed by `capacity` 64-byte
//! [`ErrorRecord`]s. A kernel that finds an error does `i = atom.add(count, 1)` and, if
//! `i < capacity`, writes record `i`; the runtime drains new records at synchronizations, so
//! every error is counted and the first `capacity` since the last drain are reported in full.
//!
//! # The device heap
//!
//! A module whose kernels call `malloc`/`free` also declares its own table of device-heap
//! blocks, which the runtime does not set (it starts zeroed, as module variables do):
//!
//! | symbol | type | value |
//! | --- | --- | --- |
//! | `__gpusan_heap` | `.b8[HEAP_HEADER_BYTES + HEAP_CAPACITY * HEAP_ENTRY_BYTES]` | `u32` overflow flag, padding, then entries {base `u64` (0: empty), size `u64`, unused `u64`, state `u32` ([`HEAP_STATE_LIVE`], [`HEAP_STATE_FREED`]), padding}, an open-addressing hash keyed by base |
//!
//! Records about heap blocks carry [`HEAP_BLOCK_TAG`]` | base` in [`ErrorRecord::allocation`]
//! (bases are below 2^63), and device-side frees report [`CODE_DOUBLE_FREE`] and
//! [`CODE_INVALID_FREE`] with the pointer as address and size 0.
//!
//! # Check counters (measurement builds)
//!
//! A module instrumented with dynamic counting (`gpusan run --mode check --count-checks`,
//! `crates/passes/src/check/counting.rs`) also declares four counters the runtime reads
//! back at synchronizations and at exit (it never writes them; they start at 0):
//!
//! | symbol | type | counts, per thread |
//! | --- | --- | --- |
//! | `__gpusan_n_access` | `.u64` | checks a naive checker would run (one per checked access and what it is checked against, statically in-bounds ones included) |
//! | `__gpusan_n_check` | `.u64` | per-access checks that ran (not skipped by a group's fast path) |
//! | `__gpusan_n_group` | `.u64` | group range checks that ran |
//! | `__gpusan_n_span` | `.u64` | entries into a two-version run (a branch, no check) |

use serde::{Deserialize, Serialize};

use crate::registry::{Lookup, Registry};
use crate::report::{Access, DeviceDetails, ErrorKind, HeapBlock, Nearest, Report, SourceLoc, Space, Stack};

pub const TABLE_SYMBOL: &str = "__gpusan_table";

/// The lookup cache: `u32` entry indices in the bytes right below the table header, slot
/// `(value * LOOKUP_CACHE_HASH) >> (64 - log2(LOOKUP_CACHE_BYTES / 4))` for a looked-up
/// pointer `value`. Kernels read and write it as a hint, used only when the entry it
/// names contains the value (the check pass's `loadmeta` says why that is exact), so the
/// runtime neither initializes nor invalidates it: it only allocates it with the table.
pub const LOOKUP_CACHE_BYTES: u64 = 1 << 20;
pub const LOOKUP_CACHE_HASH: u64 = 0x9e37_79b9_7f4a_7c15;
pub const ERRORS_SYMBOL: &str = "__gpusan_errors";
pub const MODULE_SYMBOL: &str = "__gpusan_module";
pub const HEAP_SYMBOL: &str = "__gpusan_heap";
pub const N_ACCESS_SYMBOL: &str = "__gpusan_n_access";
pub const N_CHECK_SYMBOL: &str = "__gpusan_n_check";
pub const N_GROUP_SYMBOL: &str = "__gpusan_n_group";
pub const N_SPAN_SYMBOL: &str = "__gpusan_n_span";

/// Entries of a module's device-heap table.
pub const HEAP_CAPACITY: u64 = 1 << 16;
pub const HEAP_HEADER_BYTES: u64 = 16;
pub const HEAP_ENTRY_BYTES: u64 = 32;
pub const HEAP_STATE_LIVE: u32 = 1;
pub const HEAP_STATE_FREED: u32 = 2;
/// Set in [`ErrorRecord::allocation`] when the rest is the base of a device-heap block.
pub const HEAP_BLOCK_TAG: u64 = 1 << 63;

/// Records the buffer holds between two drains.
pub const ERROR_CAPACITY: u32 = 4096;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ErrorBufferHeader {
    /// Errors found so far; may exceed `capacity` (those were counted, not stored).
    pub count: u32,
    pub capacity: u32,
    pub reserved: u64,
}

/// One error, as a kernel writes it (little-endian, 64 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorRecord {
    /// First byte of the faulting access.
    pub address: u64,
    /// The allocation the pointer was derived from (its table `id`), 0 if unknown.
    pub allocation: u64,
    /// `(module << 16) | function`: the module's `__gpusan_module`, and the function's
    /// index among the module's defined functions sorted by name.
    pub kernel: u32,
    /// One of the `CODE_*` constants.
    pub code: u32,
    /// Bytes the access spans.
    pub size: u32,
    /// Line of the access in the module's PTX as the program supplied it (before
    /// instrumentation: what the user can open, and what its `.loc` lines refer to); 0 if
    /// unknown.
    pub ptx_line: u32,
    pub block: [u32; 3],
    pub thread: [u32; 3],
    /// 0 global, 1 shared, 2 local, 3 generic.
    pub space: u32,
    /// 0 read, 1 write, 2 atomic.
    pub access: u32,
}

pub const CODE_OUT_OF_BOUNDS: u32 = 1;
pub const CODE_USE_AFTER_FREE: u32 = 2;
/// A kernel reached local memory outside its own frame through a call result or a loaded
/// pointer: the frame of a function that has returned (`crates/passes`, `check/onchip/scope.rs`).
pub const CODE_LOCAL_USE_AFTER_SCOPE: u32 = 3;
pub const CODE_SHARED_OUT_OF_BOUNDS: u32 = 4;
pub const CODE_LOCAL_OUT_OF_BOUNDS: u32 = 5;
pub const CODE_MISALIGNED: u32 = 6;
/// `free` in a kernel of a device-heap block already freed.
pub const CODE_DOUBLE_FREE: u32 = 7;
/// `free` in a kernel of a pointer that is no device-heap block's start.
pub const CODE_INVALID_FREE: u32 = 8;

impl ErrorRecord {
    pub const SIZE: usize = 64;

    /// Decodes records from the buffer's bytes (after the header); a trailing partial
    /// record is ignored.
    pub fn parse_all(bytes: &[u8]) -> Vec<ErrorRecord> {
        bytes.chunks_exact(Self::SIZE).map(Self::from_bytes).collect()
    }

    fn from_bytes(b: &[u8]) -> ErrorRecord {
        let u32_at = |o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        let u64_at = |o: usize| u64::from(u32_at(o)) | (u64::from(u32_at(o + 4)) << 32);
        ErrorRecord {
            address: u64_at(0),
            allocation: u64_at(8),
            kernel: u32_at(16),
            code: u32_at(20),
            size: u32_at(24),
            ptx_line: u32_at(28),
            block: [u32_at(32), u32_at(36), u32_at(40)],
            thread: [u32_at(44), u32_at(48), u32_at(52)],
            space: u32_at(56),
            access: u32_at(60),
        }
    }

    pub fn module(&self) -> u32 {
        self.kernel >> 16
    }

    pub fn function(&self) -> u32 {
        self.kernel & 0xffff
    }

    fn kind(&self) -> ErrorKind {
        match (self.code, self.access) {
            (CODE_USE_AFTER_FREE, _) => ErrorKind::UseAfterFree,
            (CODE_LOCAL_USE_AFTER_SCOPE, _) => ErrorKind::UseAfterScope,
            (CODE_SHARED_OUT_OF_BOUNDS, _) => ErrorKind::SharedOutOfBounds,
            (CODE_LOCAL_OUT_OF_BOUNDS, _) => ErrorKind::LocalOutOfBounds,
            (CODE_MISALIGNED, _) => ErrorKind::MisalignedAccess,
            (CODE_DOUBLE_FREE, _) => ErrorKind::DoubleFree,
            (CODE_INVALID_FREE, _) => ErrorKind::InvalidFree,
            (_, 1) => ErrorKind::OutOfBoundsWrite,
            (_, 2) => ErrorKind::OutOfBoundsAtomic,
            _ => ErrorKind::OutOfBoundsRead,
        }
    }

    /// The report for this record. `kernel` is the function's name, `module_name` what the
    /// PTX line refers to, `lines` the module's line table for the CUDA source line; the
    /// nearest allocation comes from the registry as it is now.
    pub fn to_report(&self, kernel: &str, module_name: &str, lines: &SourceLines, registry: &Registry) -> Report {
        let kind = self.kind();
        let heap_block =
            (self.allocation & HEAP_BLOCK_TAG != 0).then_some(HeapBlock { base: self.allocation & !HEAP_BLOCK_TAG });
        // Device-heap blocks are in no host allocation: naming the host allocation nearest
        // to a heap address would be a wrong lead.
        let heap = heap_block.is_some() || matches!(kind, ErrorKind::DoubleFree | ErrorKind::InvalidFree);
        // A thread's local memory is in no host allocation either.
        let nearest = if heap || kind == ErrorKind::UseAfterScope { None } else { self.host_nearest(registry) };
        let details = DeviceDetails {
            kernel: kernel.to_string(),
            block: self.block,
            thread: self.thread,
            space: match self.space {
                1 => Space::Shared,
                2 => Space::Local,
                3 => Space::Generic,
                _ => Space::Global,
            },
            access: match self.access {
                1 => Access::Write,
                2 => Access::Atomic,
                _ => Access::Read,
            },
            address: self.address,
            size: self.size,
            nearest,
            ptx: (self.ptx_line > 0).then(|| SourceLoc { file: module_name.to_string(), line: self.ptx_line }),
            source: lines.source_of(self.ptx_line),
            launch_stack: Stack::default(),
            heap_block,
        };
        Report::device(kind, details)
    }

    /// The host allocation a record is about: the one its pointer came from, else the
    /// one at or nearest below the address.
    fn host_nearest(&self, registry: &Registry) -> Option<Nearest> {
        // The allocation the pointer came from, when the kernel knew it: an overflow into a
        // neighbouring live buffer must name the buffer it overflowed, not the neighbour.
        let root =
            (self.allocation != 0).then(|| registry.snapshot().into_iter().find(|a| a.id == self.allocation)).flatten();
        match root {
            Some(a) => Some(Nearest::new(self.address, &a)),
            None => match registry.lookup(self.address) {
                Lookup::Live { alloc, .. } | Lookup::Freed { alloc, .. } => Some(Nearest::new(self.address, &alloc)),
                Lookup::Outside { below, above } => {
                    // The allocation ending closest before the address explains most overflows.
                    below.or(above).map(|a| Nearest::new(self.address, &a))
                }
            },
        }
    }
}

/// Which CUDA source line each PTX line came from, as the module's `.file` and `.loc`
/// directives say (nvcc writes them with `-lineinfo` and `-G`).
#[derive(Clone, Debug, Default)]
pub struct SourceLines {
    files: Vec<(u32, String)>,
    /// (PTX line of a `.loc`, file index, source line), in PTX line order.
    locs: Vec<(u32, u32, u32)>,
}

impl SourceLines {
    /// Reads the directives from PTX text. Malformed ones are skipped: this only enriches
    /// reports, it never decides anything.
    pub fn from_ptx(ptx: &str) -> SourceLines {
        let mut t = SourceLines::default();
        for (i, line) in ptx.lines().enumerate() {
            let line = line.trim_start();
            if let Some(rest) = line.strip_prefix(".loc") {
                let mut n = rest.split(|c: char| c.is_whitespace() || c == ',').filter(|w| !w.is_empty());
                if let (Some(Ok(file)), Some(Ok(src))) = (n.next().map(str::parse), n.next().map(str::parse)) {
                    t.locs.push((i as u32 + 1, file, src));
                }
            } else if let Some(rest) = line.strip_prefix(".file") {
                let mut parts = rest.trim_start().splitn(2, char::is_whitespace);
                if let (Some(Ok(index)), Some(name)) = (parts.next().map(str::parse), parts.next()) {
                    if let Some(name) = name.split('"').nth(1) {
                        t.files.push((index, name.to_string()));
                    }
                }
            }
        }
        t
    }

    /// The source line of PTX line `ptx_line`: the last `.loc` before it.
    pub fn source_of(&self, ptx_line: u32) -> Option<SourceLoc> {
        let at = self.locs.partition_point(|&(l, _, _)| l <= ptx_line);
        let &(_, file, line) = self.locs.get(at.checked_sub(1)?)?;
        let name = self.files.iter().find(|(i, _)| *i == file).map(|(_, n)| n.clone())?;
        (line > 0).then_some(SourceLoc { file: name, line })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::{AllocKind, NewAlloc, SiteId};

    #[test]
    fn layouts_are_what_kernels_write() {
        assert_eq!(std::mem::size_of::<ErrorBufferHeader>(), 16);
        assert_eq!(std::mem::size_of::<ErrorRecord>(), ErrorRecord::SIZE);
        assert_eq!(std::mem::offset_of!(ErrorRecord, kernel), 16);
        assert_eq!(std::mem::offset_of!(ErrorRecord, ptx_line), 28);
        assert_eq!(std::mem::offset_of!(ErrorRecord, block), 32);
        assert_eq!(std::mem::offset_of!(ErrorRecord, thread), 44);
        assert_eq!(std::mem::offset_of!(ErrorRecord, access), 60);
    }

    #[test]
    fn a_record_becomes_a_device_report_naming_the_allocation() {
        let mut bytes = vec![0u8; 64 * 2 + 10];
        let put32 = |b: &mut [u8], o: usize, v: u32| b[o..o + 4].copy_from_slice(&v.to_le_bytes());
        bytes[0..8].copy_from_slice(&0x7000_0000_0404u64.to_le_bytes());
        put32(&mut bytes, 16, (3 << 16) | 1);
        put32(&mut bytes, 20, CODE_OUT_OF_BOUNDS);
        put32(&mut bytes, 24, 4);
        put32(&mut bytes, 28, 42);
        put32(&mut bytes, 32, 7);
        put32(&mut bytes, 44, 31);
        put32(&mut bytes, 60, 1);
        let recs = ErrorRecord::parse_all(&bytes);
        assert_eq!(recs.len(), 2, "the trailing partial record is ignored");
        let r = recs[0];
        assert_eq!((r.module(), r.function(), r.block, r.thread), (3, 1, [7, 0, 0], [31, 0, 0]));

        let reg = Registry::default();
        let site = SiteId::UNKNOWN;
        reg.insert(NewAlloc {
            base: 0x7000_0000_0000,
            size: 1024,
            kind: AllocKind::Device,
            device: 0,
            context: 1,
            site,
        })
        .unwrap();
        let report = r.to_report("saxpy", "m3.ptx", &SourceLines::default(), &reg);
        assert_eq!(report.kind, ErrorKind::OutOfBoundsWrite);
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["details"]["kernel"], "saxpy");
        assert_eq!(json["details"]["ptx"]["line"], 42);
        let text = report.to_string();
        assert!(text.contains("4 bytes past the end") || text.contains("past the end"), "{text}");
    }

    #[test]
    fn a_known_root_allocation_is_named_even_inside_a_live_neighbour() {
        let reg = Registry::default();
        let site = SiteId::UNKNOWN;
        let x = reg
            .insert(NewAlloc { base: 0x1000, size: 1024, kind: AllocKind::Device, device: 0, context: 1, site })
            .unwrap();
        reg.insert(NewAlloc { base: 0x1400, size: 4096, kind: AllocKind::Device, device: 0, context: 1, site })
            .unwrap();
        let rec = ErrorRecord {
            address: 0x1404,
            allocation: x.id,
            size: 4,
            access: 1,
            code: CODE_OUT_OF_BOUNDS,
            ..Default::default()
        };
        let none = SourceLines::default();
        let named = serde_json::to_value(rec.to_report("k", "m", &none, &reg)).unwrap();
        assert_eq!(named["details"]["nearest"]["allocation"]["size"], 1024, "{named:#}");
        let unknown = ErrorRecord { allocation: 0, ..rec };
        let json = serde_json::to_value(unknown.to_report("k", "m", &none, &reg)).unwrap();
        assert_eq!(json["details"]["nearest"]["allocation"]["size"], 4096, "{json:#}");
    }

    #[test]
    fn ptx_lines_map_to_the_last_loc_before_them() {
        let ptx = ".version 9.0\n.file 1 \"/src/a.cu\", 1700000000, 12\n.file 2 \"b.h\"\n.entry k()\n{\n\
                   \t.loc 1 7 3\n\tld.global.u32 %r1, [%rd1];\n\t.loc 2 40 1, function_name $L__info_string0\n\tret;\n}\n";
        let t = SourceLines::from_ptx(ptx);
        assert_eq!(t.source_of(4), None, "before any .loc");
        assert_eq!(t.source_of(7), Some(SourceLoc { file: "/src/a.cu".into(), line: 7 }));
        assert_eq!(t.source_of(9), Some(SourceLoc { file: "b.h".into(), line: 40 }));
        assert_eq!(SourceLines::from_ptx(".loc x y\n.file z").source_of(5), None, "malformed directives are skipped");
    }

    #[test]
    fn codes_map_to_kinds() {
        let k = |code, access| ErrorRecord { code, access, ..Default::default() }.kind();
        assert_eq!(k(CODE_OUT_OF_BOUNDS, 0), ErrorKind::OutOfBoundsRead);
        assert_eq!(k(CODE_OUT_OF_BOUNDS, 2), ErrorKind::OutOfBoundsAtomic);
        assert_eq!(k(CODE_USE_AFTER_FREE, 1), ErrorKind::UseAfterFree);
        assert_eq!(k(CODE_SHARED_OUT_OF_BOUNDS, 0), ErrorKind::SharedOutOfBounds);
        assert_eq!(k(CODE_LOCAL_OUT_OF_BOUNDS, 0), ErrorKind::LocalOutOfBounds);
        assert_eq!(k(CODE_LOCAL_USE_AFTER_SCOPE, 0), ErrorKind::UseAfterScope);
        assert_eq!(k(CODE_LOCAL_USE_AFTER_SCOPE, 1), ErrorKind::UseAfterScope);
        assert_eq!(k(CODE_DOUBLE_FREE, 0), ErrorKind::DoubleFree);
        assert_eq!(k(CODE_INVALID_FREE, 1), ErrorKind::InvalidFree);
    }

    /// A registry with a device allocation just below `HEAP_BASE`: the one a host lookup of
    /// a heap address would wrongly name.
    const HEAP_BASE: u64 = 0x7000_0010_0000;

    fn registry_below_heap() -> Registry {
        let reg = Registry::default();
        let site = SiteId::UNKNOWN;
        reg.insert(NewAlloc {
            base: HEAP_BASE - 4096,
            size: 1024,
            kind: AllocKind::Device,
            device: 0,
            context: 1,
            site,
        })
        .unwrap();
        reg
    }

    #[test]
    fn a_heap_block_overflow_names_the_block_not_a_host_allocation() {
        let rec = ErrorRecord {
            address: HEAP_BASE + 60,
            allocation: HEAP_BLOCK_TAG | HEAP_BASE,
            size: 4,
            access: 1,
            space: 3,
            code: CODE_OUT_OF_BOUNDS,
            ..Default::default()
        };
        let report = rec.to_report("k", "m", &SourceLines::default(), &registry_below_heap());
        assert_eq!(report.kind, ErrorKind::OutOfBoundsWrite);
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["details"]["heap_block"]["base"], "0x700000100000", "{json:#}");
        assert!(json["details"].get("nearest").is_none(), "{json:#}");
        let text = report.to_string();
        assert!(text.contains("at offset 60 of the device-heap block"), "{text}");
        assert!(!text.contains("not in any known allocation"), "{text}");

        let freed = ErrorRecord { code: CODE_USE_AFTER_FREE, ..rec };
        assert_eq!(
            freed.to_report("k", "m", &SourceLines::default(), &Registry::default()).kind,
            ErrorKind::UseAfterFree
        );
    }

    #[test]
    fn device_frees_are_reported_as_device_heap_frees() {
        let none = SourceLines::default();
        let reg = registry_below_heap();
        let double = ErrorRecord {
            address: HEAP_BASE,
            allocation: HEAP_BLOCK_TAG | HEAP_BASE,
            code: CODE_DOUBLE_FREE,
            ..Default::default()
        };
        let r = double.to_report("k", "m", &none, &reg);
        assert_eq!(r.kind, ErrorKind::DoubleFree);
        assert_eq!(r.message, "Double free of device-heap pointer 0x700000100000 (free in a kernel)");
        assert!(r.to_string().contains("block at 0x700000100000 was already freed"), "{r}");

        let interior = ErrorRecord { address: HEAP_BASE + 4, code: CODE_INVALID_FREE, ..double };
        let r = interior.to_report("k", "m", &none, &reg);
        assert_eq!(r.kind, ErrorKind::InvalidFree);
        assert!(r.message.starts_with("Invalid free of device-heap pointer 0x700000100004"), "{}", r.message);
        assert!(r.to_string().contains("at offset 4 of the device-heap block"), "{r}");

        // Not 16-byte aligned, in no block the kernel knew: still no host allocation named.
        let unknown = ErrorRecord { allocation: 0, address: HEAP_BASE + 3, ..interior };
        let r = unknown.to_report("k", "m", &none, &reg);
        assert_eq!(r.kind, ErrorKind::InvalidFree);
        let json = serde_json::to_value(&r).unwrap();
        assert!(json["details"].get("nearest").is_none() && json["details"].get("heap_block").is_none(), "{json:#}");
        assert!(r.to_string().contains("is not the start of any device-heap block"), "{r}");
    }

    #[test]
    fn a_use_after_scope_names_no_host_allocation() {
        // A generic local address that happens to lie just past a host-known allocation: the
        // report must not send the user to that allocation.
        let rec = ErrorRecord {
            address: HEAP_BASE - 4096 + 1024,
            code: CODE_LOCAL_USE_AFTER_SCOPE,
            size: 4,
            space: 3,
            access: 0,
            ..Default::default()
        };
        let r = rec.to_report("k", "m", &SourceLines::default(), &registry_below_heap());
        assert_eq!(r.kind, ErrorKind::UseAfterScope);
        assert_eq!(r.message, "Use-after-scope generic read of size 4 bytes");
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["kind"], "use_after_scope", "the suite's expectation name: {json:#}");
        assert!(json["details"].get("nearest").is_none(), "{json:#}");
        let text = r.to_string();
        assert!(text.contains("outside the kernel's frame: the frame of a function that has returned"), "{text}");
        assert!(!text.contains("not in any known allocation"), "{text}");
    }
}
