//! The binary route's device side: what the patch functions gpusan ships
//! (`crates/inject/patches/gpusan_patches.cu`, compiled with `nvcc --compile-as-tools-patch`)
//! and the injected library agree on.
//!
//! Machine code gpusan cannot instrument is patched through the Compute Sanitizer API:
//! every global or generic memory access calls [`GLOBAL_ACCESS_PATCH`] with the access's
//! address, and the `userdata` pointer the runtime set for the launched kernel
//! (`sanitizerSetCallbackData`): a params block in device memory, 32 bytes per patched
//! kernel:
//!
//! | offset | field | type |
//! | --- | --- | --- |
//! | 0 | [`PARAMS_TABLE`] | `u64`: the allocation table's header ([`crate::table`]), as `__gpusan_table` holds it |
//! | 8 | [`PARAMS_ERRORS`] | `u64`: the error buffer ([`crate::record`]), as `__gpusan_errors` holds it |
//! | 16 | [`PARAMS_KERNEL`] | `u32`: [`crate::record::KERNEL`] of this kernel's records |
//! | 20 | [`PARAMS_FUNCTION_PC`] | `u32`: low 32 bits of the kernel's first instruction's address: records carry the access's offset from it |
//! | 24 | [`PARAMS_UNTRACKED`] | `u64`: accesses to memory in no entry and no slack of one, counted (never judged) |
//! | 32 | [`PARAMS_HEAP`] | `u64`: the context's device-heap table ([`crate::heap`]'s layout, probed as [`HEAP_PROBES`] says), or 0 where the kernel's module calls no device `malloc`/`free` |
//! | 40 | [`PARAMS_TRACE`] | `u64`: the context's trace buffer (`gpusan trace`: [`TRACE_HEADER_BYTES`], then records of [`TRACE_RECORD_BYTES`]), or 0 |
//!
//! The patch judges an address by the table alone (machine code shows no pointer's
//! provenance): inside a live entry it is fine, inside a freed one a use after free; in the
//! [`SLACK_BYTES`]-aligned tail after an entry whose kind is in [`SLACK_KINDS`] an overflow of
//! that entry (no other allocation can start there); anywhere else memory gpusan did not see
//! allocated, counted in [`PARAMS_UNTRACKED`]. Its records are the check pass's, with
//! [`crate::record::PTX_LINE`] holding the SASS offset of the access in its kernel.
//!
//! The tail after an entry reaches past its alignment by the entry's own red zone
//! ([`crate::table::REDZONE_SHIFT`]): bytes the runtime asked the driver for after the
//! allocation and registered no one at, so an overflow into what would otherwise have been
//! a live neighbour lands there and is caught by address alone.
//!
//! Other patches ([`SHARED_ACCESS_PATCH`], [`MEMCPY_ASYNC_PATCH`], the bulk copies',
//! [`DEVICE_MALLOC_PATCH`], [`DEVICE_FREE_PATCH`]) judge shared memory against the block's
//! window, the global side of asynchronous copies as a global access, and device-side frees
//! against the heap table the device-side mallocs fill.
//!
//! [`c_header`] writes these constants, and those of [`crate::table`] and [`crate::record`]
//! the patch uses, as the C header the `.cu` includes; a test holds the committed header to
//! it.

use crate::Field;

/// `gpusan trace` (issue 19): the patches of a traced run, which judge as
/// [`GLOBAL_ACCESS_PATCH`] and [`SHARED_ACCESS_PATCH`] do and also write one record per warp
/// and access into the trace buffer ([`PARAMS_TRACE`]); local accesses are only recorded.
pub const TRACE_GLOBAL_PATCH: &str = "gpusan_trace_global";
pub const TRACE_SHARED_PATCH: &str = "gpusan_trace_shared";
pub const TRACE_LOCAL_PATCH: &str = "gpusan_trace_local";

/// The trace buffer's header: records reserved so far (past the capacity: dropped), and the
/// capacity in records.
pub const TRACE_CURSOR: Field = Field { offset: 0, bytes: 8 };
pub const TRACE_CAPACITY: Field = Field { offset: 8, bytes: 8 };
pub const TRACE_HEADER_BYTES: u64 = 64;
/// A trace record, one per warp and access: the lowest address its lanes touched and the end
/// of the highest (each lane's within 2 GiB of the first lane's; past that, clamped), the
/// warp's number in its launch (`(block linear index) × (warps a block) + thread / 32`),
/// the SM, the access (`gpusan_trace::Op`'s byte), the lanes, the access's SASS offset.
pub const TRACE_RECORD_BYTES: u64 = 32;
pub const TRACE_LO: Field = Field { offset: 0, bytes: 8 };
pub const TRACE_HI: Field = Field { offset: 8, bytes: 8 };
pub const TRACE_WARP: Field = Field { offset: 16, bytes: 4 };
pub const TRACE_SM: Field = Field { offset: 20, bytes: 4 };
pub const TRACE_OP: Field = Field { offset: 24, bytes: 1 };
pub const TRACE_LANES: Field = Field { offset: 25, bytes: 1 };
pub const TRACE_PC: Field = Field { offset: 28, bytes: 4 };

/// The device function the patch module defines for `SANITIZER_INSTRUCTION_GLOBAL_MEMORY_ACCESS`.
pub const GLOBAL_ACCESS_PATCH: &str = "gpusan_global_access";
/// A patch that judges nothing (`GPUSAN_BINARY_PATCH=empty`, [`crate::env::BINARY_PATCH`]):
/// what the API's call at every access costs by itself.
pub const EMPTY_ACCESS_PATCH: &str = "gpusan_empty_access";
/// `SANITIZER_INSTRUCTION_SHARED_MEMORY_ACCESS`: an access past the block's shared window.
pub const SHARED_ACCESS_PATCH: &str = "gpusan_shared_access";
/// `SANITIZER_INSTRUCTION_MEMCPY_ASYNC` (`cp.async`): its global source judged as a read, its
/// shared destination against the window.
pub const MEMCPY_ASYNC_PATCH: &str = "gpusan_memcpy_async";
/// `SANITIZER_INSTRUCTION_BULK_COPY_GLOBAL_TO_SHARED` (`cp.async.bulk` from global): the
/// global range read.
pub const BULK_GLOBAL_TO_SHARED_PATCH: &str = "gpusan_bulk_global_to_shared";
/// `SANITIZER_INSTRUCTION_BULK_COPY_SHARED_TO_GLOBAL`: the global range written.
pub const BULK_SHARED_TO_GLOBAL_PATCH: &str = "gpusan_bulk_shared_to_global";
/// `SANITIZER_INSTRUCTION_BULK_REDUCTION_SHARED_TO_GLOBAL`: the global range reduced into.
pub const BULK_REDUCTION_TO_GLOBAL_PATCH: &str = "gpusan_bulk_reduction_to_global";
/// `SANITIZER_INSTRUCTION_DEVICE_SIDE_MALLOC` and `DEVICE_ALIGNED_MALLOC`: the block enters
/// the heap table.
pub const DEVICE_MALLOC_PATCH: &str = "gpusan_device_malloc";
/// `SANITIZER_INSTRUCTION_DEVICE_SIDE_FREE`: a double or invalid free of a heap block.
pub const DEVICE_FREE_PATCH: &str = "gpusan_device_free";

/// The access kinds beyond global memory the binary route patches (`gpusan run
/// --binary-kinds`, [`crate::env::BINARY_KINDS`]): each costs the Compute Sanitizer API's call
/// at every instruction of its kind, so a run that needs speed more than those checks can
/// leave them out (shared accesses are the most frequent in tiled kernels).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Kinds {
    /// Shared-space accesses, against the block's window ([`SHARED_ACCESS_PATCH`]).
    pub shared: bool,
    /// `cp.async` ([`MEMCPY_ASYNC_PATCH`]).
    pub memcpy_async: bool,
    /// Bulk copies' global ranges ([`BULK_GLOBAL_TO_SHARED_PATCH`] and the others).
    pub bulk: bool,
    /// Device-side `malloc`/`free` ([`DEVICE_MALLOC_PATCH`], [`DEVICE_FREE_PATCH`]).
    pub heap: bool,
}

impl Kinds {
    pub const ALL: Kinds = Kinds { shared: true, memcpy_async: true, bulk: true, heap: true };
    pub const NONE: Kinds = Kinds { shared: false, memcpy_async: false, bulk: false, heap: false };
    /// What `gpusan run` patches unless told: device-side `malloc`/`free` only, patched only in
    /// modules that call them. Measured on the H100 (bench/results/h100-issue14, run 5): the
    /// shared patch made a tiled GEMM 300x native (27x without it) and cuBLAS SGEMM 75x
    /// (1.6x), and broke cuBLASLt's GEMMs in PyTorch (`CUBLAS_STATUS_INTERNAL_ERROR`, then an
    /// illegal address); `async` and `bulk` made cuBLAS SGEMM 18x. They stay opt-in.
    pub const DEFAULT: Kinds = Kinds { shared: false, memcpy_async: false, bulk: false, heap: true };
    /// The names of a list, in this order: `shared`, `async`, `bulk`, `heap`.
    pub const NAMES: [&'static str; 4] = ["shared", "async", "bulk", "heap"];

    fn flags(&mut self) -> [&mut bool; 4] {
        [&mut self.shared, &mut self.memcpy_async, &mut self.bulk, &mut self.heap]
    }

    /// `all`, `none`, or a comma-separated list of [`Kinds::NAMES`]; `None` for any other
    /// name.
    pub fn parse(text: &str) -> Option<Kinds> {
        match text.trim() {
            "all" => return Some(Kinds::ALL),
            "none" => return Some(Kinds::NONE),
            _ => {}
        }
        let mut kinds = Kinds::NONE;
        for name in text.split(',').map(str::trim) {
            let at = Kinds::NAMES.iter().position(|n| *n == name)?;
            *kinds.flags()[at] = true;
        }
        Some(kinds)
    }

    /// What [`Kinds::parse`] reads back: `none`, or the list.
    pub fn name(mut self) -> String {
        let on: Vec<&str> = self.flags().iter().zip(Kinds::NAMES).filter(|(f, _)| ***f).map(|(_, n)| n).collect();
        if on.is_empty() {
            "none".to_string()
        } else {
            on.join(",")
        }
    }
}

pub const PARAMS_TABLE: Field = Field { offset: 0, bytes: 8 };
pub const PARAMS_ERRORS: Field = Field { offset: 8, bytes: 8 };
pub const PARAMS_KERNEL: Field = Field { offset: 16, bytes: 4 };
pub const PARAMS_FUNCTION_PC: Field = Field { offset: 20, bytes: 4 };
pub const PARAMS_UNTRACKED: Field = Field { offset: 24, bytes: 8 };
pub const PARAMS_HEAP: Field = Field { offset: 32, bytes: 8 };
pub const PARAMS_TRACE: Field = Field { offset: 40, bytes: 8 };
pub const PARAMS_FIELDS: [Field; 7] =
    [PARAMS_TABLE, PARAMS_ERRORS, PARAMS_KERNEL, PARAMS_FUNCTION_PC, PARAMS_UNTRACKED, PARAMS_HEAP, PARAMS_TRACE];
/// Bytes of one kernel's params block.
pub const PARAMS_BYTES: usize = 48;

/// The low bits of a shared-window address that are an offset in the block's window: above
/// them, on sm_90, the rank of the block in its cluster (a window is at most 228 KiB).
pub const SHARED_OFFSET_BITS: u32 = 24;

/// Slots a device-heap insert or lookup visits before giving up (linear probing from the
/// Fibonacci hash of `base >> 4`, [`crate::table::LOOKUP_CACHE_HASH`]).
pub const HEAP_PROBES: u32 = 32;
/// How many 16-byte steps below a freed pointer the search for a live block containing it
/// goes (an invalid free of an interior pointer).
pub const HEAP_SEARCH_STEPS: u32 = 64;
/// The device heap's alignment: every block `malloc` returns starts at a multiple of it.
pub const HEAP_ALIGN: u64 = 16;

/// The alignment every allocation of a [`SLACK_KINDS`] kind starts at (`cudaMalloc`
/// guarantees 256 bytes): between an entry's end and the next multiple of it no other
/// allocation can start, so an access there overflows that entry.
pub const SLACK_BYTES: u64 = 256;

/// The allocation kinds (`gpusan_runtime::registry::AllocKind::code`, bit `1 << code`)
/// the driver hands out aligned to [`SLACK_BYTES`] at least: device, pitched,
/// stream-ordered, pool, managed, pinned host, virtual-memory and graph memory; and pool
/// blocks inside a known segment (13): there every byte no block holds is out of bounds,
/// so the tail past a block's end is its overflow whatever the pool's alignment. Not
/// registered host memory, module variables, device-heap blocks or arrays, whose
/// neighbours may start anywhere.
pub const SLACK_KINDS: u32 =
    (1 << 1) | (1 << 2) | (1 << 3) | (1 << 4) | (1 << 5) | (1 << 6) | (1 << 8) | (1 << 9) | (1 << 13);

/// Page of the lookup cache's key: accesses of one 4 KiB page share a slot
/// ([`crate::table::lookup_cache_slot`] of the address with these low bits cleared), so a
/// kernel walking a buffer finds its entry in the cache after the first search.
pub const CACHE_PAGE_BITS: u32 = 12;

// The patch rounds up with a mask, and shifts the page key by the cache's bits.
const _: () = assert!(SLACK_BYTES.is_power_of_two());
// A red zone is whole units of the alignment the tail rounds up to.
const _: () = assert!(crate::table::REDZONE_UNIT.is_multiple_of(SLACK_BYTES));
// The heap table's probe wraps with a mask.
const _: () = assert!(crate::heap::CAPACITY.is_power_of_two() && HEAP_ALIGN.is_power_of_two());
const _: () = assert!(CACHE_PAGE_BITS < 64 - crate::table::LOOKUP_CACHE_BITS);

/// The C header the patch module includes: every layout constant it uses, from this crate.
pub fn c_header() -> String {
    use crate::{record, table};
    let mut h = String::from(concat!(
        "/* Generated from crates/abi (gpusan_abi::binary::c_header): do not edit.\n",
        " * `cargo test -p gpusan-abi` fails when this file is stale; BLESS=1 rewrites it. */\n",
        "#pragma once\n",
    ));
    let mut def = |name: &str, value: u64| h.push_str(&format!("#define {name} {value}ull\n"));
    def("GPUSAN_TABLE_HEADER_LEN", table::HEADER_LEN.offset as u64);
    def("GPUSAN_TABLE_HEADER_BYTES", table::HEADER_BYTES);
    def("GPUSAN_TABLE_ENTRY_BYTES", table::ENTRY_BYTES);
    def("GPUSAN_ENTRY_BASE", table::ENTRY_BASE.offset as u64);
    def("GPUSAN_ENTRY_SIZE", table::ENTRY_SIZE.offset as u64);
    def("GPUSAN_ENTRY_ID", table::ENTRY_ID.offset as u64);
    def("GPUSAN_ENTRY_FLAGS", table::ENTRY_FLAGS.offset as u64);
    def("GPUSAN_STATE_MASK", table::STATE_MASK.into());
    def("GPUSAN_STATE_LIVE", table::STATE_LIVE.into());
    def("GPUSAN_STATE_FREED", table::STATE_FREED.into());
    def("GPUSAN_KIND_SHIFT", table::KIND_SHIFT.into());
    def("GPUSAN_LOOKUP_CACHE_BYTES", table::LOOKUP_CACHE_BYTES);
    def("GPUSAN_LOOKUP_CACHE_BITS", table::LOOKUP_CACHE_BITS.into());
    def("GPUSAN_LOOKUP_CACHE_HASH", table::LOOKUP_CACHE_HASH);
    def("GPUSAN_ERRORS_COUNT", record::COUNT.offset as u64);
    def("GPUSAN_ERRORS_CAPACITY", record::CAPACITY.offset as u64);
    def("GPUSAN_ERRORS_HEADER_BYTES", record::HEADER_BYTES as u64);
    def("GPUSAN_RECORD_BYTES", record::RECORD_BYTES as u64);
    for (name, f) in [
        ("ADDRESS", record::ADDRESS),
        ("ALLOCATION", record::ALLOCATION),
        ("KERNEL", record::KERNEL),
        ("CODE", record::CODE),
        ("SIZE", record::SIZE),
        ("PTX_LINE", record::PTX_LINE),
        ("BLOCK", record::BLOCK),
        ("THREAD", record::THREAD),
        ("SPACE", record::SPACE),
        ("ACCESS", record::ACCESS),
    ] {
        def(&format!("GPUSAN_RECORD_{name}"), f.offset as u64);
    }
    def("GPUSAN_SPACE_GLOBAL", record::SPACE_GLOBAL.into());
    def("GPUSAN_ACCESS_READ", record::ACCESS_READ.into());
    def("GPUSAN_ACCESS_WRITE", record::ACCESS_WRITE.into());
    def("GPUSAN_ACCESS_ATOMIC", record::ACCESS_ATOMIC.into());
    def("GPUSAN_CODE_OUT_OF_BOUNDS", crate::CODE_OUT_OF_BOUNDS.into());
    def("GPUSAN_CODE_USE_AFTER_FREE", crate::CODE_USE_AFTER_FREE.into());
    def("GPUSAN_PARAMS_TABLE", PARAMS_TABLE.offset as u64);
    def("GPUSAN_PARAMS_ERRORS", PARAMS_ERRORS.offset as u64);
    def("GPUSAN_PARAMS_KERNEL", PARAMS_KERNEL.offset as u64);
    def("GPUSAN_PARAMS_FUNCTION_PC", PARAMS_FUNCTION_PC.offset as u64);
    def("GPUSAN_PARAMS_UNTRACKED", PARAMS_UNTRACKED.offset as u64);
    def("GPUSAN_SLACK_BYTES", SLACK_BYTES);
    def("GPUSAN_SLACK_KINDS", SLACK_KINDS.into());
    def("GPUSAN_CACHE_PAGE_BITS", CACHE_PAGE_BITS.into());
    def("GPUSAN_REDZONE_SHIFT", table::REDZONE_SHIFT.into());
    def("GPUSAN_REDZONE_UNIT", table::REDZONE_UNIT);
    def("GPUSAN_PARAMS_HEAP", PARAMS_HEAP.offset as u64);
    def("GPUSAN_PARAMS_TRACE", PARAMS_TRACE.offset as u64);
    def("GPUSAN_TRACE_CURSOR", TRACE_CURSOR.offset as u64);
    def("GPUSAN_TRACE_CAPACITY", TRACE_CAPACITY.offset as u64);
    def("GPUSAN_TRACE_HEADER_BYTES", TRACE_HEADER_BYTES);
    def("GPUSAN_TRACE_RECORD_BYTES", TRACE_RECORD_BYTES);
    for (name, f) in [
        ("LO", TRACE_LO),
        ("HI", TRACE_HI),
        ("WARP", TRACE_WARP),
        ("SM", TRACE_SM),
        ("OP", TRACE_OP),
        ("LANES", TRACE_LANES),
        ("PC", TRACE_PC),
    ] {
        def(&format!("GPUSAN_TRACE_{name}"), f.offset as u64);
    }
    def("GPUSAN_SHARED_OFFSET_BITS", SHARED_OFFSET_BITS.into());
    def("GPUSAN_SPACE_SHARED", record::SPACE_SHARED.into());
    def("GPUSAN_CODE_SHARED_OUT_OF_BOUNDS", crate::CODE_SHARED_OUT_OF_BOUNDS.into());
    def("GPUSAN_CODE_DOUBLE_FREE", crate::CODE_DOUBLE_FREE.into());
    def("GPUSAN_CODE_INVALID_FREE", crate::CODE_INVALID_FREE.into());
    def("GPUSAN_HEAP_BITS", crate::heap::BITS.into());
    def("GPUSAN_HEAP_CAPACITY", crate::heap::CAPACITY);
    def("GPUSAN_HEAP_HEADER_BYTES", crate::heap::HEADER_BYTES);
    def("GPUSAN_HEAP_ENTRY_BYTES", crate::heap::ENTRY_BYTES);
    def("GPUSAN_HEAP_OVERFLOW", crate::heap::OVERFLOW.offset as u64);
    def("GPUSAN_HEAP_ENTRY_BASE", crate::heap::ENTRY_BASE.offset as u64);
    def("GPUSAN_HEAP_ENTRY_SIZE", crate::heap::ENTRY_SIZE.offset as u64);
    def("GPUSAN_HEAP_ENTRY_STATE", crate::heap::ENTRY_STATE.offset as u64);
    def("GPUSAN_HEAP_BLOCK_TAG", crate::heap::BLOCK_TAG);
    def("GPUSAN_HEAP_PROBES", HEAP_PROBES.into());
    def("GPUSAN_HEAP_SEARCH_STEPS", HEAP_SEARCH_STEPS.into());
    def("GPUSAN_HEAP_ALIGN", HEAP_ALIGN);
    h.push_str(&format!("#define GPUSAN_GLOBAL_ACCESS_PATCH {GLOBAL_ACCESS_PATCH}\n"));
    h.push_str(&format!("#define GPUSAN_EMPTY_ACCESS_PATCH {EMPTY_ACCESS_PATCH}\n"));
    for (name, value) in [
        ("SHARED_ACCESS_PATCH", SHARED_ACCESS_PATCH),
        ("TRACE_GLOBAL_PATCH", TRACE_GLOBAL_PATCH),
        ("TRACE_SHARED_PATCH", TRACE_SHARED_PATCH),
        ("TRACE_LOCAL_PATCH", TRACE_LOCAL_PATCH),
        ("MEMCPY_ASYNC_PATCH", MEMCPY_ASYNC_PATCH),
        ("BULK_GLOBAL_TO_SHARED_PATCH", BULK_GLOBAL_TO_SHARED_PATCH),
        ("BULK_SHARED_TO_GLOBAL_PATCH", BULK_SHARED_TO_GLOBAL_PATCH),
        ("BULK_REDUCTION_TO_GLOBAL_PATCH", BULK_REDUCTION_TO_GLOBAL_PATCH),
        ("DEVICE_MALLOC_PATCH", DEVICE_MALLOC_PATCH),
        ("DEVICE_FREE_PATCH", DEVICE_FREE_PATCH),
    ] {
        h.push_str(&format!("#define GPUSAN_{name} {value}\n"));
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn params_tile_their_block() {
        let mut at = 0;
        for f in PARAMS_FIELDS {
            assert_eq!(f.offset, at, "{f:?}");
            assert_eq!(f.offset % f.bytes, 0, "{f:?}");
            at = f.end();
        }
        assert_eq!(at, PARAMS_BYTES);
    }

    #[test]
    fn kinds_read_back_what_they_write() {
        assert_eq!(Kinds::parse("all"), Some(Kinds::ALL));
        assert_eq!(Kinds::parse("none"), Some(Kinds::NONE));
        assert_eq!(Kinds::parse("heap, shared"), Some(Kinds { shared: true, heap: true, ..Kinds::NONE }));
        assert_eq!(Kinds::parse("shared,local"), None);
        assert_eq!(Kinds::parse(""), None);
        for k in [Kinds::ALL, Kinds::NONE, Kinds { bulk: true, ..Kinds::NONE }] {
            assert_eq!(Kinds::parse(&k.name()), Some(k), "{k:?}");
        }
        assert_eq!(Kinds::ALL.name(), "shared,async,bulk,heap");
    }

    #[test]
    fn slack_fits_every_alignment_the_driver_gives() {
        assert_eq!(SLACK_KINDS & 1, 0, "kind 0 (other) is no allocation the driver aligned");
    }

    /// The header the patch module is compiled with is this crate's; `BLESS=1` rewrites it.
    #[test]
    fn the_patch_modules_header_is_this_crates() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../inject/patches/gpusan_abi.h");
        let want = c_header();
        if std::env::var_os("BLESS").is_some() {
            std::fs::write(&path, &want).unwrap();
        }
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(have == want, "{} is stale: run `BLESS=1 cargo test -p gpusan-abi`", path.display());
    }
}
