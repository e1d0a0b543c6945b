//! The runtime's side of the device ABI ([`gpusan_abi`], where names, codes and layouts are
//! defined): error records decoded from the buffer kernels write and turned into reports,
//! and the line map (from a module's `.loc` directives) that gives them a source line.

use gpusan_abi::ErrorCode;
use gpusan_abi::{heap, record};
use serde::{Deserialize, Serialize};

use crate::registry::blocks::PoolPlace;
use crate::registry::{AllocKind, Allocation, Lookup, Registry};
use crate::report::{
    Access, DeviceDetails, ErrorKind, FrameObject, HeapBlock, Landing, Nearest, Report, SegmentInfo, SourceLoc, Space,
    Stack,
};

/// One error, as a kernel writes it ([`gpusan_abi::record`] has the layout).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorRecord {
    /// First byte of the faulting access.
    pub address: u64,
    /// The allocation the pointer was derived from (its table `id`), 0 if unknown.
    pub allocation: u64,
    /// `(module << 16) | function`: the module's `__gpusan_module`, and the function's
    /// number ([`gpusan_abi::function_numbers`]).
    pub kernel: u32,
    /// An [`ErrorCode`].
    pub code: u32,
    /// Bytes the access spans.
    pub size: u32,
    /// Line of the access in the module's PTX as the program supplied it (before
    /// instrumentation: what the user can open, and what its `.loc` lines refer to); 0 if
    /// unknown.
    pub ptx_line: u32,
    pub block: [u32; 3],
    pub thread: [u32; 3],
    /// `record::SPACE_*`.
    pub space: u32,
    /// `record::ACCESS_*`.
    pub access: u32,
}

// The struct is the record as it lies in the buffer: `parse_all` could copy it whole.
const _: () = {
    use std::mem::{offset_of, size_of};
    assert!(size_of::<ErrorRecord>() == record::RECORD_BYTES);
    assert!(offset_of!(ErrorRecord, address) == record::ADDRESS.offset);
    assert!(offset_of!(ErrorRecord, allocation) == record::ALLOCATION.offset);
    assert!(offset_of!(ErrorRecord, kernel) == record::KERNEL.offset);
    assert!(offset_of!(ErrorRecord, code) == record::CODE.offset);
    assert!(offset_of!(ErrorRecord, size) == record::SIZE.offset);
    assert!(offset_of!(ErrorRecord, ptx_line) == record::PTX_LINE.offset);
    assert!(offset_of!(ErrorRecord, block) == record::BLOCK.offset);
    assert!(offset_of!(ErrorRecord, thread) == record::THREAD.offset);
    assert!(offset_of!(ErrorRecord, space) == record::SPACE.offset);
    assert!(offset_of!(ErrorRecord, access) == record::ACCESS.offset);
};

impl ErrorRecord {
    pub const SIZE: usize = record::RECORD_BYTES;

    /// Decodes records from the buffer's bytes (after the header); a trailing partial
    /// record is ignored.
    pub fn parse_all(bytes: &[u8]) -> Vec<ErrorRecord> {
        bytes.chunks_exact(Self::SIZE).map(Self::from_bytes).collect()
    }

    fn from_bytes(b: &[u8]) -> ErrorRecord {
        let u32_at = |o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        let u64_at = |o: usize| u64::from(u32_at(o)) | (u64::from(u32_at(o + 4)) << 32);
        let u32x3_at = |o: usize| [u32_at(o), u32_at(o + 4), u32_at(o + 8)];
        ErrorRecord {
            address: u64_at(record::ADDRESS.offset),
            allocation: u64_at(record::ALLOCATION.offset),
            kernel: u32_at(record::KERNEL.offset),
            code: u32_at(record::CODE.offset),
            size: u32_at(record::SIZE.offset),
            ptx_line: u32_at(record::PTX_LINE.offset),
            block: u32x3_at(record::BLOCK.offset),
            thread: u32x3_at(record::THREAD.offset),
            space: u32_at(record::SPACE.offset),
            access: u32_at(record::ACCESS.offset),
        }
    }

    pub fn module(&self) -> u32 {
        record::module_of(self.kernel)
    }

    pub fn function(&self) -> u32 {
        record::function_of(self.kernel)
    }

    fn kind(&self) -> ErrorKind {
        // A code no kernel writes reads as out of bounds, the one error every check reports.
        match ErrorCode::from_code(self.code) {
            Some(ErrorCode::UseAfterFree) => ErrorKind::UseAfterFree,
            Some(ErrorCode::LocalUseAfterScope) => ErrorKind::UseAfterScope,
            Some(ErrorCode::SharedOutOfBounds) => ErrorKind::SharedOutOfBounds,
            Some(ErrorCode::LocalOutOfBounds) => ErrorKind::LocalOutOfBounds,
            Some(ErrorCode::Misaligned) => ErrorKind::MisalignedAccess,
            Some(ErrorCode::DoubleFree) => ErrorKind::DoubleFree,
            Some(ErrorCode::InvalidFree) => ErrorKind::InvalidFree,
            Some(ErrorCode::OutOfBounds) | None => match self.access {
                record::ACCESS_WRITE => ErrorKind::OutOfBoundsWrite,
                record::ACCESS_ATOMIC => ErrorKind::OutOfBoundsAtomic,
                _ => ErrorKind::OutOfBoundsRead,
            },
        }
    }

    /// The report for this record. `kernel` is the function's symbol, `module_name` what the
    /// PTX line refers to, `lines` the module's line table for the CUDA source line; the
    /// nearest allocation comes from the registry as it is now.
    pub fn to_report(&self, kernel: &str, module_name: &str, lines: &SourceLines, registry: &Registry) -> Report {
        let kind = self.kind();
        let heap_block =
            (self.allocation & heap::BLOCK_TAG != 0).then_some(HeapBlock { base: self.allocation & !heap::BLOCK_TAG });
        // Device-heap blocks are in no host allocation: naming the host allocation nearest
        // to a heap address would be a wrong lead.
        let heap = heap_block.is_some() || matches!(kind, ErrorKind::DoubleFree | ErrorKind::InvalidFree);
        let frame_object = record::FrameObject::of(self.allocation, self.code).map(|o| match o {
            record::FrameObject::Object { offset, size } => FrameObject::LocalObject { frame_offset: offset, size },
            record::FrameObject::ReturnedFrame { size } => FrameObject::ReturnedFrame { size },
        });
        // A thread's local memory is in no host allocation either.
        let local = kind == ErrorKind::UseAfterScope || frame_object.is_some();
        // Nor is an address in the block's shared window or the thread's local one (an
        // offset there, as the binary route's records carry, may even equal a host address).
        let on_chip = matches!(self.space, record::SPACE_SHARED | record::SPACE_LOCAL);
        let nearest = if heap || local || on_chip { None } else { self.host_nearest(registry) };
        let demangled = crate::coverage::signature(kernel);
        let details = DeviceDetails {
            mangled: (demangled != kernel).then(|| kernel.to_string()),
            kernel: demangled,
            block: self.block,
            thread: self.thread,
            space: match self.space {
                record::SPACE_SHARED => Space::Shared,
                record::SPACE_LOCAL => Space::Local,
                record::SPACE_GENERIC => Space::Generic,
                _ => Space::Global,
            },
            access: match self.access {
                record::ACCESS_WRITE => Access::Write,
                record::ACCESS_ATOMIC => Access::Atomic,
                _ => Access::Read,
            },
            address: self.address,
            size: self.size,
            nearest,
            ptx: (self.ptx_line > 0).then(|| SourceLoc { file: module_name.to_string(), line: self.ptx_line }),
            source: lines.source_of(self.ptx_line),
            sass_offset: None,
            device: None,
            launch_stack: Stack::default(),
            heap_block,
            frame_object,
        };
        Report::device(kind, details)
    }

    /// The host allocation a record is about: the one its pointer came from, else the
    /// one at or nearest below the address.
    fn host_nearest(&self, registry: &Registry) -> Option<Nearest> {
        // The allocation the pointer came from, when the kernel knew it: an overflow into a
        // neighbouring live buffer must name the buffer it overflowed, not the neighbour.
        // A pool block is in the table in its segment's place, so the id may name one.
        let root = (self.allocation != 0)
            .then(|| {
                registry
                    .snapshot()
                    .into_iter()
                    .find(|a| a.id == self.allocation)
                    .or_else(|| registry.block(self.allocation))
            })
            .flatten();
        let nearest = match root {
            Some(a) => Some(a),
            None => match registry.pool_place(self.address) {
                PoolPlace::Block(b) => Some(b),
                PoolPlace::Slack { nearest: Some(b), .. } => Some(b),
                _ => match registry.lookup(self.address) {
                    Lookup::Live { alloc, .. } | Lookup::Freed { alloc, .. } => Some(alloc),
                    // The allocation ending closest before the address explains most overflows.
                    Lookup::Outside { below, above } => below.or(above),
                },
            },
        }?;
        Some(pool_nearest(registry, self.address, &nearest))
    }
}

/// [`Nearest`] of `alloc`, and for a pool block its segment and where an address outside it
/// fell (the pool's slack or a neighbouring block).
fn pool_nearest(registry: &Registry, addr: u64, alloc: &Allocation) -> Nearest {
    let mut n = Nearest::new(addr, alloc);
    if !matches!(alloc.kind, AllocKind::PoolBlock { .. }) {
        return n;
    }
    n.allocation.segment = registry.segment_of(alloc).map(|s| SegmentInfo::from(&s));
    n.landed = match registry.pool_place(addr) {
        PoolPlace::Block(b) if b.id != alloc.id => {
            Some(Landing::NeighbourBlock { id: b.id, base: b.base, size: b.size, freed: !b.is_live() })
        }
        PoolPlace::Slack { .. } => Some(Landing::PoolSlack),
        _ => None,
    };
    n
}

/// Which CUDA source line each PTX line came from, as the module's `.file` and `.loc`
/// directives say (nvcc writes them with `-lineinfo` and `-G`). The passes read them from
/// the module they instrument (`gpusan_passes::meta`); this only looks lines up.
#[derive(Clone, Debug, Default)]
pub struct SourceLines {
    files: Vec<(u32, String)>,
    /// (first PTX line, file index, source line), in PTX line order.
    locs: Vec<(u32, u32, u32)>,
}

impl SourceLines {
    /// `files`: the module's `.file` table, (index, path). `locs`: (PTX line, file index,
    /// source line), in PTX line order: the lines from each PTX line on came from that
    /// source line.
    pub fn new(files: Vec<(u32, String)>, locs: Vec<(u32, u32, u32)>) -> SourceLines {
        SourceLines { files, locs }
    }

    /// The source line of PTX line `ptx_line`: that of the last entry at or before it.
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
    use gpusan_abi::heap::BLOCK_TAG as HEAP_BLOCK_TAG;
    use gpusan_abi::{
        CODE_DOUBLE_FREE, CODE_INVALID_FREE, CODE_LOCAL_OUT_OF_BOUNDS, CODE_LOCAL_USE_AFTER_SCOPE, CODE_MISALIGNED,
        CODE_OUT_OF_BOUNDS, CODE_SHARED_OUT_OF_BOUNDS, CODE_USE_AFTER_FREE,
    };

    #[test]
    fn decoding_reads_the_record_as_it_lies_in_memory() {
        let rec = ErrorRecord {
            address: 0x0102_0304_0506_0708,
            allocation: 0x1112_1314_1516_1718,
            kernel: 0x2122_2324,
            code: 0x3132_3334,
            size: 0x4142_4344,
            ptx_line: 0x5152_5354,
            block: [0x61, 0x62, 0x63],
            thread: [0x71, 0x72, 0x73],
            space: 0x81,
            access: 0x91,
        };
        // SAFETY: `ErrorRecord` is `repr(C)` of u64s and u32s filling its 64 bytes (the
        // layout asserts above), so every byte is initialised.
        let bytes = unsafe { std::slice::from_raw_parts((&rec as *const ErrorRecord).cast::<u8>(), ErrorRecord::SIZE) };
        assert_eq!(ErrorRecord::parse_all(bytes), [rec]);
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
        assert!(json["details"].get("mangled").is_none(), "a C name is its own symbol: {json:#}");

        // A C++ kernel is named as its source names it, its symbol kept beside.
        let report = r.to_report("_Z3oobPfi", "m3.ptx", &SourceLines::default(), &reg);
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(
            (&json["details"]["kernel"], &json["details"]["mangled"]),
            (&"oob(float*, int)".into(), &"_Z3oobPfi".into())
        );
        assert!(report.to_string().contains("     at oob(float*, int)"), "{report}");
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
    fn ptx_lines_map_to_the_last_entry_at_or_before_them() {
        let files = vec![(1, "/src/a.cu".to_string()), (2, "b.h".to_string())];
        let t = SourceLines::new(files, vec![(7, 1, 7), (9, 2, 40), (12, 3, 5), (14, 1, 0)]);
        assert_eq!(t.source_of(4), None, "before any entry");
        assert_eq!(t.source_of(7), Some(SourceLoc { file: "/src/a.cu".into(), line: 7 }));
        assert_eq!(t.source_of(8), Some(SourceLoc { file: "/src/a.cu".into(), line: 7 }));
        assert_eq!(t.source_of(9), Some(SourceLoc { file: "b.h".into(), line: 40 }));
        assert_eq!(t.source_of(12), None, "a file the table lacks");
        assert_eq!(t.source_of(20), None, "source line 0: none");
        assert_eq!(SourceLines::default().source_of(5), None);
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
        assert_eq!(k(CODE_MISALIGNED, 0), ErrorKind::MisalignedAccess);
        assert_eq!(k(99, 1), ErrorKind::OutOfBoundsWrite, "an unknown code reads as out of bounds");
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
    fn a_local_finding_names_the_object_the_kernel_held_it_to() {
        // An index past one local array, at an address that also lies past a host-known
        // allocation: the report names the array (frame offset 32, 32 bytes), not the host's.
        let rec = ErrorRecord {
            address: HEAP_BASE - 4096 + 1024,
            allocation: record::FrameObject::Object { offset: 32, size: 32 }.word(),
            code: gpusan_abi::CODE_LOCAL_OUT_OF_BOUNDS,
            size: 4,
            space: record::SPACE_LOCAL,
            access: record::ACCESS_WRITE,
            ..Default::default()
        };
        let r = rec.to_report("k", "m", &SourceLines::default(), &registry_below_heap());
        assert_eq!(r.kind, ErrorKind::LocalOutOfBounds);
        let json = serde_json::to_value(&r).unwrap();
        assert!(json["details"].get("nearest").is_none(), "{json:#}");
        assert_eq!(json["details"]["frame_object"]["frame_offset"], 32, "{json:#}");
        let text = r.to_string();
        assert!(text.contains("outside the local array at frame offset 32 (32 bytes)"), "{text}");

        // A `.func` handing out its own frame: the frame and what became of it.
        let rec = ErrorRecord {
            allocation: record::FrameObject::ReturnedFrame { size: 64 }.word(),
            code: CODE_LOCAL_USE_AFTER_SCOPE,
            space: record::SPACE_GENERIC,
            size: 8,
            ..rec
        };
        let r = rec.to_report("fill", "m", &SourceLines::default(), &registry_below_heap());
        assert_eq!(r.kind, ErrorKind::UseAfterScope);
        assert_eq!(serde_json::to_value(&r).unwrap()["details"]["frame_object"]["what"], "returned_frame");
        assert!(r.to_string().contains("in the function's own stack frame (64 bytes), which it returns"), "{r}");
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
