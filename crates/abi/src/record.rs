//! The error buffer kernels write and the runtime drains: a 16-byte header, then
//! [`ERROR_CAPACITY`] records of 64 bytes, all little-endian.
//!
//! | offset | field | type |
//! | --- | --- | --- |
//! | 0 | [`COUNT`] | `u32`: errors found since the buffer was made; may exceed the capacity (those were counted, not stored) |
//! | 4 | [`CAPACITY`] | `u32`: records the buffer holds |
//! | 8 | reserved | `u64` |
//! | 16 + 64 `i` | record `i` | below |
//!
//! A kernel that finds an error does `i = atom.add(count, 1)` and writes record `i` only
//! when `i < capacity`. The runtime remembers the count it drained up to; the records
//! between that and the new count, both capped at the capacity, are the new ones
//! ([`stored_between`]), and the rest of the difference was counted but not stored.
//!
//! A record:
//!
//! | offset | field | type |
//! | --- | --- | --- |
//! | 0 | [`ADDRESS`] | `u64`: first byte of the faulting access |
//! | 8 | [`ALLOCATION`] | `u64`: the table `id` of the allocation the pointer came from, [`crate::heap::BLOCK_TAG`]` \| base` for a device-heap block, [`FrameObject`] for a local one (below), 0 if unknown |
//! | 16 | [`KERNEL`] | `u32`: `(module << 16) \| function` ([`kernel`]) |
//! | 20 | [`CODE`] | `u32`: an [`crate::ErrorCode`] |
//! | 24 | [`SIZE`] | `u32`: bytes the access spans |
//! | 28 | [`PTX_LINE`] | `u32`: line of the access in the module's PTX as the program supplied it, 0 if unknown |
//! | 32 | [`BLOCK`] | `u32` × 3: `%ctaid` x, y, z |
//! | 44 | [`THREAD`] | `u32` × 3: `%tid` x, y, z |
//! | 56 | [`SPACE`] | `u32`: `SPACE_*` |
//! | 60 | [`ACCESS`] | `u32`: `ACCESS_*` |

use crate::Field;

/// Bytes of the buffer's header, before record 0.
pub const HEADER_BYTES: usize = 16;
pub const COUNT: Field = Field { offset: 0, bytes: 4 };
pub const CAPACITY: Field = Field { offset: 4, bytes: 4 };

/// Records the buffer holds between two drains.
pub const ERROR_CAPACITY: u32 = 4096;

/// Bytes of one record.
pub const RECORD_BYTES: usize = 64;

pub const ADDRESS: Field = Field { offset: 0, bytes: 8 };
pub const ALLOCATION: Field = Field { offset: 8, bytes: 8 };
pub const KERNEL: Field = Field { offset: 16, bytes: 4 };
pub const CODE: Field = Field { offset: 20, bytes: 4 };
pub const SIZE: Field = Field { offset: 24, bytes: 4 };
pub const PTX_LINE: Field = Field { offset: 28, bytes: 4 };
pub const BLOCK: Field = Field { offset: 32, bytes: 12 };
pub const THREAD: Field = Field { offset: 44, bytes: 12 };
pub const SPACE: Field = Field { offset: 56, bytes: 4 };
pub const ACCESS: Field = Field { offset: 60, bytes: 4 };

/// Every field of a record, in offset order.
pub const FIELDS: [Field; 10] = [ADDRESS, ALLOCATION, KERNEL, CODE, SIZE, PTX_LINE, BLOCK, THREAD, SPACE, ACCESS];

pub const SPACE_GLOBAL: u32 = 0;
pub const SPACE_SHARED: u32 = 1;
pub const SPACE_LOCAL: u32 = 2;
pub const SPACE_GENERIC: u32 = 3;

pub const ACCESS_READ: u32 = 0;
pub const ACCESS_WRITE: u32 = 1;
pub const ACCESS_ATOMIC: u32 = 2;

/// What a local-memory record's [`ALLOCATION`] says of the object the access was held to
/// (a kernel's records about local memory carry no allocation id): the pass knows it when
/// instrumenting and writes it as a constant, so the report can name the object.
///
/// | bits | field |
/// | --- | --- |
/// | 0..32 | the object's (or frame's) size in bytes |
/// | 32..61 | the object's offset in its function's frame (`__local_depotN`) |
/// | 61 | [`RETURNED_FRAME_TAG`]: a `.func` returns an address in its own frame (use after scope) |
/// | 62 | [`LOCAL_OBJECT_TAG`]: a local array or struct (local out of bounds) |
///
/// Read only for the codes that write it ([`FrameObject::of`]): other records keep their
/// allocation id there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameObject {
    /// An access left the object at `offset` of its frame, `size` bytes.
    Object { offset: u64, size: u64 },
    /// A function returned an address in its own frame of `size` bytes.
    ReturnedFrame { size: u64 },
}

pub const LOCAL_OBJECT_TAG: u64 = 1 << 62;
pub const RETURNED_FRAME_TAG: u64 = 1 << 61;
const FRAME_OFFSET_BITS: u64 = (1 << 29) - 1;

impl FrameObject {
    /// The [`ALLOCATION`] word of this object; sizes and offsets past what the fields hold
    /// (never, for a thread's frame of at most 512 KiB) are cut to them.
    pub const fn word(self) -> u64 {
        match self {
            FrameObject::Object { offset, size } => {
                LOCAL_OBJECT_TAG | ((offset & FRAME_OFFSET_BITS) << 32) | (size & 0xffff_ffff)
            }
            FrameObject::ReturnedFrame { size } => RETURNED_FRAME_TAG | (size & 0xffff_ffff),
        }
    }

    /// The object a record's `allocation` names, for a record of `code`.
    pub fn of(allocation: u64, code: u32) -> Option<FrameObject> {
        let size = allocation & 0xffff_ffff;
        if code == crate::CODE_LOCAL_OUT_OF_BOUNDS && allocation & LOCAL_OBJECT_TAG != 0 {
            let offset = (allocation >> 32) & FRAME_OFFSET_BITS;
            return Some(FrameObject::Object { offset, size });
        }
        (code == crate::CODE_LOCAL_USE_AFTER_SCOPE && allocation & RETURNED_FRAME_TAG != 0)
            .then_some(FrameObject::ReturnedFrame { size })
    }
}

/// Bits of [`KERNEL`] below the module number: the function number's.
pub const FUNCTION_BITS: u32 = 16;

/// [`KERNEL`] of a record: module number (`__gpusan_module`) high, function number low.
pub const fn kernel(module: u32, function: u32) -> u32 {
    (module << FUNCTION_BITS) | (function & ((1 << FUNCTION_BITS) - 1))
}

pub const fn module_of(kernel: u32) -> u32 {
    kernel >> FUNCTION_BITS
}

/// The function's number ([`crate::function_numbers`]).
pub const fn function_of(kernel: u32) -> u32 {
    kernel & ((1 << FUNCTION_BITS) - 1)
}

/// Where record `i` starts in the buffer.
pub const fn record_offset(i: u32) -> u64 {
    HEADER_BYTES as u64 + RECORD_BYTES as u64 * i as u64
}

/// Bytes of a buffer of `capacity` records, header included.
pub const fn buffer_bytes(capacity: u32) -> usize {
    HEADER_BYTES + RECORD_BYTES * capacity as usize
}

/// The records stored for the errors counted from `drained` to `count`: those with an
/// index below the capacity.
pub fn stored_between(drained: u32, count: u32, capacity: u32) -> std::ops::Range<u32> {
    drained.min(capacity)..count.min(capacity).max(drained.min(capacity))
}

/// The buffer's header as the runtime writes it before kernels run and reads it back.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ErrorBufferHeader {
    /// Errors found so far; may exceed `capacity` (those were counted, not stored).
    pub count: u32,
    pub capacity: u32,
    pub reserved: u64,
}

const _: () = assert!(std::mem::size_of::<ErrorBufferHeader>() == HEADER_BYTES);
const _: () = assert!(std::mem::offset_of!(ErrorBufferHeader, count) == COUNT.offset);
const _: () = assert!(std::mem::offset_of!(ErrorBufferHeader, capacity) == CAPACITY.offset);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_tile_the_record() {
        let mut at = 0;
        for f in FIELDS {
            assert_eq!(f.offset, at, "{f:?} leaves a gap or overlaps");
            // Arrays of `u32` align to 4: the largest power of two in the width, at most 8.
            let align = 1 << f.bytes.trailing_zeros().min(3);
            assert_eq!(f.offset % align, 0, "{f:?} is not aligned to its element");
            at = f.end();
        }
        assert_eq!(at, RECORD_BYTES);
        assert_eq!(BLOCK.bytes, 3 * 4);
        assert_eq!(THREAD.bytes, 3 * 4);
    }

    #[test]
    fn frame_objects_round_trip_for_their_codes_only() {
        let o = FrameObject::Object { offset: 32, size: 96 };
        assert_eq!(FrameObject::of(o.word(), crate::CODE_LOCAL_OUT_OF_BOUNDS), Some(o));
        assert_eq!(FrameObject::of(o.word(), crate::CODE_LOCAL_USE_AFTER_SCOPE), None);
        let r = FrameObject::ReturnedFrame { size: 64 };
        assert_eq!(FrameObject::of(r.word(), crate::CODE_LOCAL_USE_AFTER_SCOPE), Some(r));
        assert_eq!(FrameObject::of(0, crate::CODE_LOCAL_OUT_OF_BOUNDS), None);
        // Neither tag is the device heap's, which every record's reader looks at.
        assert_eq!((o.word() | r.word()) & crate::heap::BLOCK_TAG, 0);
    }

    #[test]
    fn the_header_holds_count_then_capacity() {
        assert_eq!((COUNT.offset, CAPACITY.offset, CAPACITY.end()), (0, 4, 8));
        assert!(CAPACITY.end() <= HEADER_BYTES);
        assert_eq!(HEADER_BYTES % 16, 0, "records stay 16-byte aligned after the header");
    }

    #[test]
    fn records_follow_the_header() {
        assert_eq!(record_offset(0), 16);
        assert_eq!(record_offset(3), 16 + 3 * 64);
        assert_eq!(buffer_bytes(ERROR_CAPACITY), 16 + 4096 * 64);
        assert_eq!(record_offset(ERROR_CAPACITY), buffer_bytes(ERROR_CAPACITY) as u64);
    }

    #[test]
    fn kernel_packs_module_and_function() {
        let k = kernel(3, 1);
        assert_eq!(k, (3 << 16) | 1);
        assert_eq!((module_of(k), function_of(k)), (3, 1));
        assert_eq!(function_of(kernel(1, 0x1_0005)), 5, "a function number keeps to its 16 bits");
    }

    #[test]
    fn only_records_below_the_capacity_are_stored() {
        assert_eq!(stored_between(0, 3, 8), 0..3);
        assert_eq!(stored_between(3, 20, 8), 3..8);
        assert_eq!(stored_between(9, 20, 8), 8..8, "all counted, none stored");
        assert_eq!(stored_between(5, 5, 8), 5..5);
    }

    #[test]
    fn space_and_access_numbers_are_the_ones_records_carry() {
        assert_eq!([SPACE_GLOBAL, SPACE_SHARED, SPACE_LOCAL, SPACE_GENERIC], [0, 1, 2, 3]);
        assert_eq!([ACCESS_READ, ACCESS_WRITE, ACCESS_ATOMIC], [0, 1, 2]);
    }
}
