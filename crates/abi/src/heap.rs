//! The table of device-heap blocks a module declares when its kernels call `malloc` or
//! `free` (`__gpusan_heap`, [`crate::HEAP_SYMBOL`]): the runtime never sets it, kernels
//! alone read and write it, and the runtime only decodes what records say of it
//! ([`BLOCK_TAG`]).
//!
//! ```ptx
//! .visible .global .align 16 .b8 __gpusan_heap[2097168];  // TABLE_BYTES
//! ```
//!
//! A [`HEADER_BYTES`] header whose first `u32` ([`OVERFLOW`]) is set to 1 when an insert
//! found no free slot, then [`CAPACITY`] entries of [`ENTRY_BYTES`], an open-addressing
//! hash keyed by base:
//!
//! | offset | field | type |
//! | --- | --- | --- |
//! | 0 | [`ENTRY_BASE`] | `u64`: the block's base, the key; 0 marks an empty slot |
//! | 8 | [`ENTRY_SIZE`] | `u64`: bytes asked of `malloc` |
//! | 16 | unused | `u64` |
//! | 24 | [`ENTRY_STATE`] | `u32`: [`STATE_LIVE`], [`STATE_FREED`] |
//! | 28 | padding | `u32` |

use crate::Field;

/// log2 of [`CAPACITY`].
pub const BITS: u32 = 16;
/// Entries of the table.
pub const CAPACITY: u64 = 1 << BITS;
/// Bytes before the first entry: the overflow flag and padding.
pub const HEADER_BYTES: u64 = 16;
pub const ENTRY_BYTES: u64 = 32;
/// Bytes the module declares.
pub const TABLE_BYTES: u64 = HEADER_BYTES + CAPACITY * ENTRY_BYTES;

pub const OVERFLOW: Field = Field { offset: 0, bytes: 4 };
pub const ENTRY_BASE: Field = Field { offset: 0, bytes: 8 };
pub const ENTRY_SIZE: Field = Field { offset: 8, bytes: 8 };
pub const ENTRY_STATE: Field = Field { offset: 24, bytes: 4 };

/// The states are the allocation table's ([`crate::table::STATE_LIVE`]…): the check pass
/// compares a root's state with one constant whichever table it came from.
pub const STATE_LIVE: u32 = crate::table::STATE_LIVE;
pub const STATE_FREED: u32 = crate::table::STATE_FREED;

/// Set in a record's [`crate::record::ALLOCATION`] when the rest is the base of a
/// device-heap block rather than an allocation id.
pub const BLOCK_TAG: u64 = 1 << 63;

/// Where entry `h` starts, from the table's address.
pub const fn entry_offset(h: u64) -> u64 {
    HEADER_BYTES + ENTRY_BYTES * h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_what_the_module_declares() {
        assert_eq!(TABLE_BYTES, 2_097_168);
        assert_eq!(entry_offset(CAPACITY), TABLE_BYTES);
        assert_eq!(entry_offset(1), 16 + 32);
        assert!(OVERFLOW.end() as u64 <= HEADER_BYTES);
    }

    #[test]
    fn entry_fields_fit_an_entry_apart() {
        let fields = [ENTRY_BASE, ENTRY_SIZE, ENTRY_STATE];
        for (i, f) in fields.iter().enumerate() {
            assert!(f.end() as u64 <= ENTRY_BYTES, "{f:?}");
            assert_eq!(f.offset % f.bytes, 0, "{f:?} is not aligned to its width");
            assert!(fields[..i].iter().all(|g| g.end() <= f.offset), "{f:?} overlaps");
        }
    }

    #[test]
    fn the_block_tag_is_above_every_base_and_id() {
        // Device addresses and allocation ids stay below 2^63.
        assert_eq!(BLOCK_TAG, 0x8000_0000_0000_0000);
        assert_eq!((BLOCK_TAG | 0x7000_0010_0000) & !BLOCK_TAG, 0x7000_0010_0000);
        assert_ne!(STATE_LIVE, STATE_FREED);
    }
}
