//! Canary mode (`gpusan run --mode canary`): what the guard's device code
//! (`crates/inject/canary/gpusan_canary.cu`) and the host agree on. No kernel of the
//! program is touched: the bytes past the end of each guarded allocation (its tail canary)
//! hold a keyed hash of their address, written and scanned by gpusan's own two kernels on a
//! low-priority stream of its own.
//!
//! # Canary bytes
//!
//! The canary of an allocation whose requested end is `end` covers `[end, end + len)`. The
//! byte at address `a` is byte `a % 8` (little-endian) of
//! [`canary_word`]`(secret, a & !7, end)`, with `canary_word(s, w, e) = mix64(s ^ w ^
//! rotl(e, 29))` and `mix64` splitmix64's finalizer: one hash per 8 bytes, so the scanner
//! compares whole words. `secret` is a per-process random key: data cannot forge a canary
//! without it, and two allocations' canaries differ even at equal offsets.
//!
//! # The entry array
//!
//! Per context, a device array of [`ENTRY_BYTES`]-byte entries ([`Entry`]); the scan kernel
//! checks every entry whose `len` is not 0. Entries change only through the update kernel's
//! commands ([`Command`]), launched on the guard stream before a scan, so a scan never sees
//! an entry whose bytes are not written yet.
//!
//! # Kernels
//!
//! - [`UPDATE_KERNEL`]`(secret: u64, entries: *mut Entry, commands: *const Command, count:
//!   u32)`: for each command, unless [`Command::cancelled`] became non-zero (the host
//!   cancels an arm whose memory a pool may hand out again: the slot is then written
//!   empty, nothing else), writes the canary bytes when [`COMMAND_WRITE_BYTES`] is set,
//!   then the entry.
//! - [`SCAN_KERNEL`]`(secret: u64, entries: *const Entry, count: u32, errors: *mut u8,
//!   scan: u32)`: for each armed entry whose checked bytes ([`checked`]: the first and last
//!   [`EDGE_BYTES`]) differ from the canary, claims a record
//!   (`atomicAdd` on the count, written only below [`ERROR_CAPACITY`]) and writes it
//!   ([`ErrorRecord`], with the `%globaltimer` it read once the bad bytes were seen).
//! - [`BATCH_KERNEL`]`(secret: u64, entries: *mut Entry, commands: *const Command,
//!   ncommands: u32, count: u32, errors: *mut u8, scan: u32)`: the update of `ncommands`
//!   commands then the scan of `count` entries in one launch, of one block or more: block
//!   `b` of `n` owns entries `b * per .. (b + 1) * per` (`per = ceil(count / n)`) and the
//!   commands naming them, copies the commands to shared memory in one read, applies its
//!   own, then (the block's barrier between them) scans its entries; no block waits for
//!   another. For a batch of at most [`BATCH_MAX_COMMANDS`] commands and
//!   [`BATCH_MAX_ENTRIES`] entries, in place of two launches.

/// The kernel that writes one allocation's canary bytes when it is made (`write(secret:
/// u64, start: u64, len: u32)`), before the program's next kernel can overflow into them.
pub const WRITE_KERNEL: &str = "gpusan_canary_write";
/// The kernel that writes canary bytes and entries.
pub const UPDATE_KERNEL: &str = "gpusan_canary_update";
/// The kernel that checks armed entries' canaries.
pub const SCAN_KERNEL: &str = "gpusan_canary_scan";
/// The kernel that does a small batch's update and scan in one block.
pub const BATCH_KERNEL: &str = "gpusan_canary_batch";
/// A batch with at most this many commands, and at most [`BATCH_MAX_ENTRIES`] entries to
/// scan, runs as one [`BATCH_KERNEL`] launch: 8 commands per warp of the block, each a few
/// reads of mapped host memory, against the update kernel's 64 blocks.
pub const BATCH_MAX_COMMANDS: usize = 64;
/// See [`BATCH_MAX_COMMANDS`]: 16 entries per thread of the block.
pub const BATCH_MAX_ENTRIES: u32 = 16 * BLOCK_THREADS;

/// The scan checks a canary's first and last this many bytes (all of a shorter one): an
/// overflow past an allocation's end meets the first, an underflow below the next
/// allocation's start the last (canary mode fills the driver's rounding up to the next
/// allocation), and the scan's cost stays bounded however long the slack is. The write
/// kernels write every byte.
pub const EDGE_BYTES: u32 = 32;

/// Whether byte `offset` of a canary of `len` bytes is checked ([`EDGE_BYTES`]).
pub fn checked(offset: u32, len: u32) -> bool {
    offset < len && (offset < EDGE_BYTES || len - offset <= EDGE_BYTES)
}

/// One entry: `tail_start: u64` (the allocation's requested end), `tail_len: u32` (0: not
/// armed), `generation: u32` (the arm's number, unique in its context while it lives).
pub const ENTRY_BYTES: usize = 16;

/// An entry of the array the scan kernel reads.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Entry {
    pub tail_start: u64,
    pub tail_len: u32,
    pub generation: u32,
}

/// [`Command::flags`]: write the canary bytes before the entry (an arm); without it only
/// the entry is written (a disarm, or an entry moved by compaction or growth).
pub const COMMAND_WRITE_BYTES: u32 = 1;

/// One command of the update kernel, in mapped host memory.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Command {
    pub index: u32,
    pub flags: u32,
    pub entry: Entry,
    /// Set by the host (a volatile store) to cancel the command after it was handed to the
    /// kernel: read by the kernel just before it writes anything.
    pub cancelled: u32,
    pub _pad: u32,
}

/// Bytes of a [`Command`].
pub const COMMAND_BYTES: usize = 32;

/// The error buffer (mapped host memory): a header of [`ERRORS_HEADER_BYTES`] (`count:
/// u32` claimed records, including those past capacity, then padding), then
/// [`ERROR_CAPACITY`] records of [`ERROR_RECORD_BYTES`].
pub const ERRORS_HEADER_BYTES: usize = 16;
pub const ERROR_CAPACITY: usize = 256;
pub const ERROR_RECORD_BYTES: usize = 40;
/// Bytes of the whole error buffer.
pub const ERRORS_BYTES: usize = ERRORS_HEADER_BYTES + ERROR_CAPACITY * ERROR_RECORD_BYTES;

/// A canary found overwritten, as the scan kernel records it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ErrorRecord {
    /// The entry's index in the array scanned.
    pub index: u32,
    /// The entry's generation as the scan read it.
    pub generation: u32,
    /// The first byte that differs.
    pub address: u64,
    /// Bytes of the canary that differ.
    pub bad: u32,
    /// The scan's number (its `scan` parameter).
    pub scan: u32,
    /// The byte the canary holds there, and the byte found.
    pub expected: u8,
    pub found: u8,
    pub _pad: [u8; 6],
    /// The GPU's `%globaltimer` (nanoseconds) when the scan found the canary overwritten:
    /// on the clock a program's own kernels read, so the time from an overflow to its
    /// detection is measured GPU clock to GPU clock (GMOD's detection latency). 0: unknown.
    pub gpu_ns: u64,
}

const _: () = assert!(std::mem::size_of::<Entry>() == ENTRY_BYTES);
const _: () = assert!(std::mem::size_of::<Command>() == COMMAND_BYTES);
const _: () = assert!(std::mem::size_of::<ErrorRecord>() == ERROR_RECORD_BYTES);

/// Threads per block of the kernels (the update: a warp per command; the scan: a thread
/// per entry).
pub const BLOCK_THREADS: u32 = 256;
/// Blocks of a scan at most: the guard must leave the GPU to the program.
pub const SCAN_MAX_BLOCKS: u32 = 16;

/// splitmix64's finalizer.
pub const fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The canary word of the 8-byte-aligned address `word` of an allocation ending at `end`.
pub const fn canary_word(secret: u64, word: u64, end: u64) -> u64 {
    mix64(secret ^ word ^ end.rotate_left(29))
}

/// The canary byte at `address` of an allocation ending at `end`.
pub const fn canary_byte(secret: u64, address: u64, end: u64) -> u8 {
    (canary_word(secret, address & !7, end) >> (8 * (address & 7))) as u8
}

/// The device heap's canaries in canary mode (`gpusan_passes::canary_heap`): what the
/// functions that pass appends to a module declare, write and record, and what the
/// runtime reads.
pub mod heap {
    /// Bytes of canary after each block.
    pub const CANARY_BYTES: u32 = 32;
    /// The module's table of blocks (module-local: each module its own).
    pub const TABLE_SYMBOL: &str = "__gpusan_canary_heap";
    /// Entries of the table, 16 bytes each (base, size); a power of two.
    pub const TABLE_ENTRIES: u64 = 1 << 16;
    /// Slots an insert or a lookup probes at most.
    pub const PROBES: u32 = 32;
    /// The size an entry holds once its block was freed.
    pub const FREED: u64 = u64::MAX;
    /// The run's secret (`u64`), written by the runtime after the module's load.
    pub const SECRET_SYMBOL: &str = "__gpusan_canary_heap_secret";
    /// The address (`u64`, generic) of the errors buffer in mapped host memory, written by
    /// the runtime after the load; 0: no records.
    pub const ERRORS_SYMBOL: &str = "__gpusan_canary_heap_errors";
    /// The buffer: a `u32` count of records claimed (it may pass [`RECORDS`]: those are
    /// lost), padding to [`HEADER_BYTES`], then [`RECORDS`] records of [`RECORD_BYTES`]:
    /// base (`u64`), size (`u64`), the first byte differing past the end (`u32`), bytes
    /// differing (`u32`), a `u32` set to 1 once the record is whole, and the first
    /// differing byte as found (`u32`).
    pub const HEADER_BYTES: u32 = 16;
    pub const RECORD_BYTES: u32 = 32;
    pub const RECORDS: u32 = 64;
    pub const BUFFER_BYTES: usize = (HEADER_BYTES + RECORDS * RECORD_BYTES) as usize;

    /// The key of the canary after a block at `base` of `size` bytes: byte `i` of the
    /// canary is byte `i % 8` of it (murmur3's fmix64 of `secret ^ base ^ size·φ`).
    pub const fn heap_key(secret: u64, base: u64, size: u64) -> u64 {
        let mut k = size.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ base ^ secret;
        k ^= k >> 33;
        k = k.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
        k ^= k >> 33;
        k = k.wrapping_mul(0xC4CE_B9FE_1A85_EC53);
        k ^ (k >> 33)
    }
}

/// Fixed vectors the device code is held to at compile time (`build.rs` writes them as
/// `static_assert`s the `.cu` includes): `(secret, word, end)`.
pub const VECTORS: [(u64, u64, u64); 4] = [
    (0, 0, 0),
    (0x0123_4567_89ab_cdef, 0x7f00_0000_1000, 0x7f00_0000_1003),
    (u64::MAX, 0x7fff_ffff_fff8, 0x7fff_ffff_fffd),
    (0xdead_beef_cafe_f00d, 0x3_0000_0200, 0x3_0000_01f4),
];

/// The C header the device code includes (`crates/inject/canary/gpusan_canary_abi.h`):
/// the layouts, and [`VECTORS`] as `static_assert`s on its own `canary_word`, so device
/// code whose hash differs from [`canary_word`] does not compile. A test holds the
/// committed header to this.
pub fn c_header() -> String {
    let mut h = String::from(concat!(
        "/* Generated from crates/abi (gpusan_abi::canary::c_header): do not edit.\n",
        " * `cargo test -p gpusan-abi` fails when this file is stale; BLESS=1 rewrites it. */\n",
        "#pragma once\n",
    ));
    let mut def = |name: &str, value: u64| h.push_str(&format!("#define GPUSAN_CANARY_{name} {value}ull\n"));
    def("ENTRY_BYTES", ENTRY_BYTES as u64);
    def("COMMAND_BYTES", COMMAND_BYTES as u64);
    def("WRITE_BYTES", COMMAND_WRITE_BYTES.into());
    def("ERRORS_HEADER_BYTES", ERRORS_HEADER_BYTES as u64);
    def("ERROR_CAPACITY", ERROR_CAPACITY as u64);
    def("ERROR_RECORD_BYTES", ERROR_RECORD_BYTES as u64);
    def("EDGE_BYTES", EDGE_BYTES.into());
    def("BATCH_MAX_COMMANDS", BATCH_MAX_COMMANDS as u64);
    h.push_str("#define GPUSAN_CANARY_VECTORS \\\n");
    for (secret, word, end) in VECTORS {
        h.push_str(&format!(
            "    static_assert(canary_word({secret:#x}ull, {word:#x}ull, {end:#x}ull) == {:#x}ull, \"canary_word\"); \\\n",
            canary_word(secret, word, end)
        ));
    }
    h.push_str("    /* end */\n");
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_canary_is_checked_at_both_edges_a_short_one_whole() {
        assert!((0..20).all(|o| checked(o, 20)));
        assert!(!checked(20, 20));
        let long: Vec<u32> = (0..100).filter(|&o| checked(o, 100)).collect();
        assert_eq!(long, (0..32).chain(68..100).collect::<Vec<_>>());
        assert_eq!((0..64).filter(|&o| checked(o, 64)).count(), 64, "edges meeting: all of it");
    }

    /// The header the device code is compiled with is this crate's; `BLESS=1` rewrites it.
    #[test]
    fn the_device_codes_header_is_this_crates() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../inject/canary/gpusan_canary_abi.h");
        let want = c_header();
        if std::env::var_os("BLESS").is_some() {
            std::fs::write(&path, &want).unwrap();
        }
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(have == want, "{} is stale: run `BLESS=1 cargo test -p gpusan-abi`", path.display());
    }

    #[test]
    fn mix64_is_splitmix64s_finalizer() {
        // splitmix64's first output for seed 0 is mix64(0x9e3779b97f4a7c15).
        assert_eq!(mix64(0x9e37_79b9_7f4a_7c15), 0xe220_a839_7b1d_cdaf);
        assert_eq!(mix64(0), 0);
    }

    #[test]
    fn bytes_are_the_words_bytes_by_address() {
        let (s, e) = (0x1234, 0x1003);
        let w = canary_word(s, 0x1000, e);
        for i in 0..8 {
            assert_eq!(canary_byte(s, 0x1000 + i, e), (w >> (8 * i)) as u8);
        }
        assert_ne!(canary_byte(s, 0x1003, e), canary_byte(s, 0x1003, e + 8), "the end is part of the key");
        assert_ne!(canary_word(1, 0x1000, e), canary_word(2, 0x1000, e), "so is the secret");
    }
}
