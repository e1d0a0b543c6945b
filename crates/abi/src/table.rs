//! The allocation table instrumented kernels search: one device buffer, the lookup cache
//! first, then a 32-byte header, then 32-byte entries sorted by base with disjoint ranges.
//! `__gpusan_table` holds the header's address, so entry `i` is at
//! `table + HEADER_BYTES + ENTRY_BYTES * i` ([`entry_offset`]) and the cache at
//! `table - LOOKUP_CACHE_BYTES`.
//!
//! Header:
//!
//! | offset | field | type |
//! | --- | --- | --- |
//! | 0 | [`HEADER_MAGIC`] | `u32`: [`MAGIC`] ("GSAT") |
//! | 4 | [`HEADER_LAYOUT`] | `u32`: [`LAYOUT`] |
//! | 8 | [`HEADER_LEN`] | `u64`: number of entries |
//! | 16 | [`HEADER_VERSION`] | `u64`: registry version the entries reflect |
//! | 24 | [`HEADER_RESERVED`] | `u64`: 0 |
//!
//! Entry (32 bytes, 32-aligned: one L2 sector, loaded with two `ld.v2.u64`):
//!
//! | offset | field | type |
//! | --- | --- | --- |
//! | 0 | [`ENTRY_BASE`] | `u64`: first byte |
//! | 8 | [`ENTRY_SIZE`] | `u64`: bytes; `addr - base < size` (unsigned) is the bounds test |
//! | 16 | [`ENTRY_ID`] | `u64`: the registry's allocation id, counted up from 1 and never reused |
//! | 24 | [`ENTRY_FLAGS`] | `u32`: bits 0–7 state ([`STATE_LIVE`], [`STATE_FREED`]), 8–15 kind, 16–31 red zone ([`REDZONE_SHIFT`]) |
//! | 28 | [`ENTRY_DEVICE`] | `i32`: device ordinal |
//!
//! The search kernels run is the runtime's `device_lookup` (`crates/runtime/src/registry.rs`):
//! the last entry whose base is at most the address, if the address lies inside it.
//!
//! **The lookup cache** is [`LOOKUP_CACHE_BYTES`] of `u32` entry indices, slot
//! [`lookup_cache_slot`] for a looked-up pointer. Kernels read and write it as a hint, used
//! only when the entry it names contains the value (entries are disjoint, so that entry is
//! the one the search would find), so the runtime neither initializes nor invalidates it:
//! it only allocates it with the table.

use crate::Field;

pub const HEADER_BYTES: u64 = 32;
pub const ENTRY_BYTES: u64 = 32;

pub const HEADER_MAGIC: Field = Field { offset: 0, bytes: 4 };
pub const HEADER_LAYOUT: Field = Field { offset: 4, bytes: 4 };
pub const HEADER_LEN: Field = Field { offset: 8, bytes: 8 };
pub const HEADER_VERSION: Field = Field { offset: 16, bytes: 8 };
pub const HEADER_RESERVED: Field = Field { offset: 24, bytes: 8 };
pub const HEADER_FIELDS: [Field; 5] = [HEADER_MAGIC, HEADER_LAYOUT, HEADER_LEN, HEADER_VERSION, HEADER_RESERVED];

pub const MAGIC: u32 = u32::from_le_bytes(*b"GSAT");
/// The layout's version, in every header: change it with any layout here. 2: the lookup
/// cache below the header. 3: the red zone in an entry's flags.
pub const LAYOUT: u32 = 3;

pub const ENTRY_BASE: Field = Field { offset: 0, bytes: 8 };
pub const ENTRY_SIZE: Field = Field { offset: 8, bytes: 8 };
pub const ENTRY_ID: Field = Field { offset: 16, bytes: 8 };
pub const ENTRY_FLAGS: Field = Field { offset: 24, bytes: 4 };
pub const ENTRY_DEVICE: Field = Field { offset: 28, bytes: 4 };
pub const ENTRY_FIELDS: [Field; 5] = [ENTRY_BASE, ENTRY_SIZE, ENTRY_ID, ENTRY_FLAGS, ENTRY_DEVICE];

/// The state bits of [`ENTRY_FLAGS`].
pub const STATE_MASK: u32 = 0xff;
/// State of a live allocation.
pub const STATE_LIVE: u32 = 1;
/// State of a freed allocation held in quarantine: any access to it is a use after free.
pub const STATE_FREED: u32 = 2;
/// Where the allocation's kind starts in [`ENTRY_FLAGS`].
pub const KIND_SHIFT: u32 = 8;
/// Where the allocation's red zone starts in [`ENTRY_FLAGS`]: the bytes gpusan asked the
/// driver for after the allocation's end, which nothing else can occupy (the binary route's
/// `--redzone`), in [`REDZONE_UNIT`]s, rounded down; 0 for none. Code that reads the state
/// or the kind masks them out, so the PTX route never sees these bits.
pub const REDZONE_SHIFT: u32 = 16;
/// The unit of an entry's red zone: the alignment every padded allocation starts at.
pub const REDZONE_UNIT: u64 = 256;
/// The largest red zone an entry records, in [`REDZONE_UNIT`]s (16 bits: just under 16 MiB).
pub const REDZONE_MAX_UNITS: u32 = u32::MAX >> REDZONE_SHIFT;

/// The [`ENTRY_FLAGS`] bits of a red zone of `bytes` (rounded down to whole units, capped).
pub const fn redzone_flags(bytes: u64) -> u32 {
    let units = bytes / REDZONE_UNIT;
    let units = if units > REDZONE_MAX_UNITS as u64 { REDZONE_MAX_UNITS } else { units as u32 };
    units << REDZONE_SHIFT
}

/// The red zone, in bytes, an entry's flags record.
pub const fn redzone_bytes(flags: u32) -> u64 {
    (flags >> REDZONE_SHIFT) as u64 * REDZONE_UNIT
}

/// The cache below the header: 2^18 slots of `u32` (1 MiB).
pub const LOOKUP_CACHE_BYTES: u64 = 1 << 20;
/// log2 of the cache's slots.
pub const LOOKUP_CACHE_BITS: u32 = (LOOKUP_CACHE_BYTES / 4).trailing_zeros();
/// Fibonacci hashing (2^64 / φ): the top bits of the product depend on every bit of the
/// value.
pub const LOOKUP_CACHE_HASH: u64 = 0x9e37_79b9_7f4a_7c15;

/// The cache slot of a looked-up pointer `value`: `(value * LOOKUP_CACHE_HASH) >> (64 -
/// LOOKUP_CACHE_BITS)`; its `u32` lies at `table - LOOKUP_CACHE_BYTES + 4 * slot`.
pub const fn lookup_cache_slot(value: u64) -> u64 {
    value.wrapping_mul(LOOKUP_CACHE_HASH) >> (64 - LOOKUP_CACHE_BITS)
}

/// Where entry `i` starts, from the header's address.
pub const fn entry_offset(i: u64) -> u64 {
    HEADER_BYTES + ENTRY_BYTES * i
}

/// Bytes of a table of `entries` entries, header included (the cache below it not).
pub const fn table_bytes(entries: u64) -> u64 {
    entry_offset(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiles(fields: &[Field], bytes: u64) {
        let mut at = 0;
        for f in fields {
            assert_eq!(f.offset, at, "{f:?} leaves a gap or overlaps");
            assert_eq!(f.offset % f.bytes, 0, "{f:?} is not aligned to its width");
            at = f.end();
        }
        assert_eq!(at as u64, bytes);
    }

    #[test]
    fn header_and_entries_are_32_bytes_without_gaps() {
        tiles(&HEADER_FIELDS, HEADER_BYTES);
        tiles(&ENTRY_FIELDS, ENTRY_BYTES);
    }

    #[test]
    fn entries_follow_the_header() {
        assert_eq!(entry_offset(0), 32);
        assert_eq!(entry_offset(5), 32 + 5 * 32);
        assert_eq!(table_bytes(0), HEADER_BYTES);
        // Base and size of an entry load as one `ld.v2.u64`, id and flags as another.
        assert_eq!(ENTRY_SIZE.offset, ENTRY_BASE.end());
        assert_eq!(ENTRY_BASE.offset % 16, 0);
        assert_eq!(ENTRY_ID.offset % 16, 0);
    }

    #[test]
    fn states_fit_their_mask_below_the_kind() {
        for s in [STATE_LIVE, STATE_FREED] {
            assert_eq!(s & STATE_MASK, s);
            assert_ne!(s, 0, "a zeroed entry is neither live nor freed");
        }
        assert_ne!(STATE_LIVE, STATE_FREED);
        assert_eq!(STATE_MASK >> KIND_SHIFT, 0);
        // The kind's byte ends where the red zone starts.
        assert_eq!(KIND_SHIFT + 8, REDZONE_SHIFT);
        assert_eq!(&MAGIC.to_le_bytes(), b"GSAT");
    }

    #[test]
    fn red_zones_round_down_to_units_and_cap() {
        assert_eq!(redzone_flags(0), 0);
        assert_eq!(redzone_flags(255), 0, "less than a unit records none: never more than was asked for");
        assert_eq!(redzone_bytes(redzone_flags(256)), 256);
        assert_eq!(redzone_bytes(redzone_flags(1000)), 768);
        assert_eq!(redzone_bytes(redzone_flags(u64::MAX)), REDZONE_MAX_UNITS as u64 * REDZONE_UNIT);
        let flags = STATE_FREED | 5 << KIND_SHIFT | redzone_flags(4096);
        assert_eq!(flags & STATE_MASK, STATE_FREED);
        assert_eq!((flags >> KIND_SHIFT) & 0xff, 5);
        assert_eq!(redzone_bytes(flags), 4096);
    }

    #[test]
    fn the_cache_slot_indexes_the_cache() {
        assert_eq!(LOOKUP_CACHE_BITS, 18);
        assert_eq!(4u64 << LOOKUP_CACHE_BITS, LOOKUP_CACHE_BYTES);
        for v in [0, 1, 0x7000_0000_0404, u64::MAX, LOOKUP_CACHE_HASH] {
            assert!(lookup_cache_slot(v) < LOOKUP_CACHE_BYTES / 4, "{v:#x}");
        }
        // The top bits of the product: neighbouring 256-byte blocks land apart.
        assert_ne!(lookup_cache_slot(0x7000_0000_0000), lookup_cache_slot(0x7000_0000_0100));
    }
}
