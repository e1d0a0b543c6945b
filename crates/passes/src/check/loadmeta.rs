//! LOADMETA: the lookup of a root's allocation in the runtime's table, into the root's
//! metadata registers.

use std::fmt::Write as _;
use std::sync::LazyLock;

use gpusan_abi::table::{
    self, ENTRY_BASE, ENTRY_BYTES, ENTRY_FLAGS, ENTRY_ID, ENTRY_SIZE, HEADER_LEN, LOOKUP_CACHE_BITS,
    LOOKUP_CACHE_BYTES, LOOKUP_CACHE_HASH, STATE_LIVE, STATE_MASK,
};
use gpusan_abi::TABLE_SYMBOL;

use super::heap;
use super::plan::{Layout, DEAD_BIT};

// Entry `lo - 1` is at `table + ENTRY_BYTES * lo` only because the header is one entry
// long; an index becomes an offset by a shift.
const _: () = assert!(table::HEADER_BYTES == ENTRY_BYTES && ENTRY_BYTES.is_power_of_two());
// An entry's base and size load as one `v2.u64` from its start, its id and flags (in the
// low half of the second `u64`, little-endian) as another.
const _: () = assert!(ENTRY_BASE.offset == 0 && ENTRY_SIZE.offset == ENTRY_BASE.end() && ENTRY_SIZE.bytes == 8);
const _: () =
    assert!(ENTRY_ID.offset.is_multiple_of(16) && ENTRY_ID.bytes == 8 && ENTRY_FLAGS.offset == ENTRY_ID.end());

/// The runs of LOADMETA that are the same for every root, written once with the ABI's
/// numbers in them: LOADMETA is made for every root, and formatting those numbers for each
/// made it a quarter slower (callgrind, the five largest corpus modules).
struct Fixed {
    /// `%__gs_x` = entry `lo - 1`'s address, its base into `%__gs_mid` and size into `%__gs_sz`.
    entry: String,
    /// With `%__gs_nb` = there is an entry below, that entry's base and size into `%__gs_a`,
    /// `%__gs_e`.
    below: String,
    /// From `%__gs_h` = value × hash: the slot's address into `%__gs_h`, its index `c`, the
    /// table's `len` (`%__gs_hi`) and first base (`%__gs_f`), and `%__gs_q` = `c + 1 > len`
    /// with `lo = c + 1`.
    slot: String,
    /// `mid = lo + (hi - lo) / 2` and entry `mid`'s base into `%__gs_x`.
    bisect: String,
    /// `cache[slot] = lo - 1`.
    refill: String,
    /// `%__gs_q` = the state in the low half of `%__gs_r` (entry `lo - 1`'s flags) is not live.
    not_live: String,
    /// Offsets of an entry's id and flags, the step to the entry below, the state's mask.
    id: String,
    flags: String,
    entry_below: String,
    state_mask: String,
    /// The not-live mark in a folded root's id.
    dead_bit: String,
}

static FIXED: LazyLock<Fixed> = LazyLock::new(|| {
    let shift = ENTRY_BYTES.trailing_zeros();
    let below = -(ENTRY_BYTES as i64);
    let (first, cache) = (table::entry_offset(0), LOOKUP_CACHE_BYTES);
    Fixed {
        entry: format!(
            "\tshl.b64 %__gs_x, %__gs_lo, {shift};\n\
             \tadd.s64 %__gs_x, %__gs_t, %__gs_x;\n\
             \tld.global.v2.u64 {{%__gs_mid, %__gs_sz}}, [%__gs_x];\n"
        ),
        below: format!(
            "\tsetp.ge.u64 %__gs_nb, %__gs_lo, 2;\n\
             \t@%__gs_nb ld.global.v2.u64 {{%__gs_a, %__gs_e}}, [%__gs_x+{below}];\n"
        ),
        slot: format!(
            "\tshr.u64 %__gs_h, %__gs_h, {hash_shift};\n\
             \tshl.b64 %__gs_h, %__gs_h, {slot_shift};\n\
             \tadd.s64 %__gs_h, %__gs_t, %__gs_h;\n\
             \tld.global.u32 %__gs_c, [%__gs_h+-{cache}];\n\
             \tld.global.u64 %__gs_hi, [%__gs_t+{len}];\n\
             \tld.global.u64 %__gs_f, [%__gs_t+{first}];\n\
             \tcvt.u64.u32 %__gs_lo, %__gs_c;\n\
             \tadd.s64 %__gs_lo, %__gs_lo, 1;\n\
             \tsetp.gt.u64 %__gs_q, %__gs_lo, %__gs_hi;\n",
            hash_shift = 64 - LOOKUP_CACHE_BITS,
            // A slot is a `u32` entry index.
            slot_shift = (LOOKUP_CACHE_BYTES >> LOOKUP_CACHE_BITS).trailing_zeros(),
            len = HEADER_LEN.offset,
        ),
        bisect: format!(
            "\tsub.s64 %__gs_mid, %__gs_hi, %__gs_lo;\n\
             \tshr.u64 %__gs_mid, %__gs_mid, 1;\n\
             \tadd.s64 %__gs_mid, %__gs_lo, %__gs_mid;\n\
             \tshl.b64 %__gs_x, %__gs_mid, {shift};\n\
             \tadd.s64 %__gs_x, %__gs_t, %__gs_x;\n\
             \tld.global.u64 %__gs_x, [%__gs_x+{first}];\n"
        ),
        refill: format!(
            "\tadd.s64 %__gs_y, %__gs_lo, -1;\n\
             \tcvt.u32.u64 %__gs_c, %__gs_y;\n\
             \tst.global.u32 [%__gs_h+-{cache}], %__gs_c;\n"
        ),
        not_live: format!(
            "\tcvt.u32.u64 %__gs_c, %__gs_r;\n\
             \tand.b32 %__gs_c, %__gs_c, {STATE_MASK};\n\
             \tsetp.ne.u32 %__gs_q, %__gs_c, {STATE_LIVE};\n"
        ),
        id: ENTRY_ID.offset.to_string(),
        flags: ENTRY_FLAGS.offset.to_string(),
        entry_below: below.to_string(),
        state_mask: STATE_MASK.to_string(),
        dead_bit: format!("{DEAD_BIT:#x}"),
    }
});

/// Root `k` found nowhere: nothing of it is judged.
pub(super) fn found_nothing(k: usize, layout: Layout) -> String {
    match layout {
        Layout::Folded => format!("\tmov.b64 %__gs_low{k}, 0;\n\tmov.b64 %__gs_lim{k}, -1;\n"),
        Layout::Heap => format!("\tmov.pred %__gs_ok{k}, 0;\n"),
    }
}

/// The LOADMETA of root `k`. Roots of a heap module may be heap blocks: a `malloc` result
/// has its metadata from the call, any other root falls back on the heap table when the
/// runtime's table has no entry for it.
pub(super) fn root_meta_k(
    k: usize,
    value: &str,
    malloc_result: bool,
    layout: Layout,
    label: &mut dyn FnMut() -> String,
) -> String {
    match layout {
        Layout::Heap if malloc_result => heap::loadmeta_result(k, value),
        Layout::Heap => {
            let mut text = loadmeta(k, value, layout, label);
            text.push_str(&heap::loadmeta_fallback(k, value, label));
            text
        }
        Layout::Folded => loadmeta(k, value, layout, label),
    }
}

/// LOADMETA for root number `k` whose value is in register `value`: a probe of the lookup
/// cache, then, when it misses, the table lookup of
/// `gpusan_runtime::registry::device_lookup`, line for line:
///
/// ```text
/// c = cache[hash(addr)]
/// if c < len && addr - e[c].base < e[c].size (unsigned) { lo = c + 1 } else {
///   lo = 0; hi = len
///   while lo < hi { mid = lo + (hi - lo) / 2; if e[mid].base <= addr { lo = mid + 1 } else { hi = mid } }
///   if lo == 0 { miss }; cache[hash(addr)] = lo - 1
/// }
/// if addr - e[lo-1].base < e[lo-1].size (unsigned) { hit e[lo-1] } else { miss }
/// ```
///
/// The table is a header (`len` at [`HEADER_LEN`]) followed by entries (`base`, `size`,
/// `id`, `flags`) of the header's size, [`ENTRY_BYTES`] (the layout is
/// [`gpusan_abi::table`]'s), so entry `i` is at `table + ENTRY_BYTES * (1 + i)` and entry
/// `lo - 1` at `table + ENTRY_BYTES * lo`. After a hit, `low` is the entry's base, or the
/// base of entry `lo - 2` when the value is the entry's base and entry `lo - 2` ends there
/// (a pointer one past the end of that neighbour).
///
/// **The cache** is [`LOOKUP_CACHE_BYTES`] of `u32` entry indices right below the header,
/// indexed by a multiplicative hash of the value ([`LOOKUP_CACHE_HASH`]). It is only a
/// hint, which is why nobody initializes or invalidates it: a slot is used only when it
/// names an entry of the current table that contains the value, and entries are disjoint,
/// so that entry is the one the search would find. Stale indices (the runtime re-sorted
/// the table), collisions and garbage fail the test and fall back on the search, which
/// writes the slot. A kernel parameter or a pointer read from a table is looked up by
/// every block or thread with the same value, so after the first search it costs two
/// dependent loads (slot and length, then the entry) instead of `log2(len) + 2`.
///
/// Why 2^18 slots (1 MiB, [`LOOKUP_CACHE_BITS`]): of 20,000 allocations a kernel touches
/// (`bench/workloads/many_allocs.cu`), about 96 % own their slot where 2^14 slots leave
/// 58 % (a uniform hash's expectation, `m (1 - e^(-n/m)) / n`, not a measurement), and each
/// miss is a binary search of the table; measured, many_allocs went from 1.48x to 1.23x
/// native (`bench/results/h200-run5/check-overhead-call2.json`).
pub(super) fn loadmeta(k: usize, value: &str, layout: Layout, label: &mut dyn FnMut() -> String) -> String {
    let (search, head, end, found, done) = (label(), label(), label(), label(), label());
    let fixed = &*FIXED;
    // Entry `lo - 1` at `%__gs_x`: its bounds, its id and flags, and (when there is one) the
    // entry below, all in one round of loads.
    let entry = |x: &str| match layout {
        Layout::Folded => format!(
            "{entry}\
             \tld.global.v2.u64 {{%__gs_id{k}, %__gs_r}}, [%__gs_x+{id}];\n\
             {below}\
             \tsub.s64 %__gs_y, {value}, %__gs_mid;\n\
             {x}",
            entry = fixed.entry,
            id = fixed.id,
            below = fixed.below,
        ),
        Layout::Heap => format!("{entry}\tsub.s64 %__gs_y, {value}, %__gs_mid;\n{x}", entry = fixed.entry),
    };
    // The probe's entry must contain the value to be trusted; after a search the entry is
    // the one `device_lookup` finds, which may not contain it.
    let probe = entry(&format!("\tsetp.lt.u64 %__gs_q, %__gs_y, %__gs_sz;\n\t@%__gs_q bra {found};\n"));
    let searched = match layout {
        Layout::Folded => entry(&format!("\tsetp.ge.u64 %__gs_q, %__gs_y, %__gs_sz;\n\t@%__gs_q bra {done};\n")),
        Layout::Heap => entry(""),
    };
    let hit = match layout {
        // Found and live: `[low, base + size)`. Found and not live: every byte from the
        // base on is bad, so the limit is the base. The id keeps "not live" in its top bit
        // for the record's code (ids count up from 1 and never reach it).
        Layout::Folded => format!(
            "{not_live}\
             \tadd.s64 %__gs_lim{k}, %__gs_mid, %__gs_sz;\n\
             \t@%__gs_q mov.b64 %__gs_lim{k}, %__gs_mid;\n\
             \t@%__gs_q or.b64 %__gs_id{k}, %__gs_id{k}, {dead};\n\
             \tmov.b64 %__gs_low{k}, %__gs_mid;\n\
             \tsetp.eq.and.u64 %__gs_nb, {value}, %__gs_mid, %__gs_nb;\n\
             \t@!%__gs_nb bra {done};\n\
             \tadd.s64 %__gs_e, %__gs_a, %__gs_e;\n\
             \tsetp.eq.u64 %__gs_q, %__gs_e, %__gs_mid;\n\
             \t@%__gs_q mov.b64 %__gs_low{k}, %__gs_a;\n",
            not_live = fixed.not_live,
            dead = fixed.dead_bit,
        ),
        Layout::Heap => format!(
            "\tmov.b64 %__gs_base{k}, %__gs_mid;\n\
             \tld.global.u64 %__gs_id{k}, [%__gs_x+{id}];\n\
             \tld.global.u32 %__gs_st{k}, [%__gs_x+{flags}];\n\
             \tand.b32 %__gs_st{k}, %__gs_st{k}, {mask};\n\
             \tadd.s64 %__gs_lim{k}, %__gs_base{k}, %__gs_sz;\n\
             \tsub.s64 %__gs_y, {value}, %__gs_base{k};\n\
             \tsetp.lt.u64 %__gs_ok{k}, %__gs_y, %__gs_sz;\n\
             \tmov.b64 %__gs_low{k}, %__gs_base{k};\n\
             \tsetp.ne.u64 %__gs_q, {value}, %__gs_mid;\n\
             \t@%__gs_q bra {done};\n\
             \tsetp.lt.u64 %__gs_q, %__gs_lo, 2;\n\
             \t@%__gs_q bra {done};\n\
             \tld.global.v2.u64 {{%__gs_y, %__gs_sz}}, [%__gs_x+{below}];\n\
             \tadd.s64 %__gs_sz, %__gs_y, %__gs_sz;\n\
             \tsetp.eq.u64 %__gs_q, %__gs_sz, %__gs_mid;\n\
             \t@%__gs_q mov.b64 %__gs_low{k}, %__gs_y;\n",
            id = fixed.id,
            flags = fixed.flags,
            mask = fixed.state_mask,
            below = fixed.entry_below,
        ),
    };
    // Room for it all at once: `format!` would size the text by its literal parts alone,
    // and the fixed runs are most of it.
    let room = probe.len() + searched.len() + hit.len() + fixed.slot.len() + fixed.bisect.len() + 1024;
    let mut text = String::with_capacity(room);
    let _ = write!(
        text,
        "{reset}\
         \tld.const.u64 %__gs_t, [{TABLE_SYMBOL}];\n\
         \tsetp.eq.u64 %__gs_q, %__gs_t, 0;\n\
         \t@%__gs_q bra {done};\n\
         \tmul.lo.u64 %__gs_h, {value}, {LOOKUP_CACHE_HASH:#x};\n\
         {slot}\
         \t@%__gs_q bra {search};\n\
         {probe}\
         {search}:\n\
         \tsetp.lt.u64 %__gs_q, {value}, %__gs_f;\n\
         \t@%__gs_q bra {done};\n\
         \tmov.u64 %__gs_lo, 0;\n\
         {head}:\n\
         \tsetp.ge.u64 %__gs_q, %__gs_lo, %__gs_hi;\n\
         \t@%__gs_q bra {end};\n\
         {bisect}\
         \tsetp.le.u64 %__gs_q, %__gs_x, {value};\n\
         \t@%__gs_q add.s64 %__gs_lo, %__gs_mid, 1;\n\
         \t@!%__gs_q mov.u64 %__gs_hi, %__gs_mid;\n\
         \tbra {head};\n\
         {end}:\n\
         \tsetp.eq.u64 %__gs_q, %__gs_lo, 0;\n\
         \t@%__gs_q bra {done};\n\
         {refill}\
         {searched}\
         {found}:\n\
         {hit}\
         {done}:\n",
        reset = found_nothing(k, layout),
        slot = fixed.slot,
        bisect = fixed.bisect,
        refill = fixed.refill,
    );
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_is_device_lookup() {
        for layout in [Layout::Folded, Layout::Heap] {
            let text = loadmeta(0, "%rd1", layout, &mut {
                let mut n = 0;
                move || {
                    n += 1;
                    format!("$__gs_L{n}")
                }
            });
            // lo = mid + 1 when e[mid].base <= addr; hi = mid otherwise; then e[lo - 1].
            assert!(text.contains("setp.le.u64 %__gs_q, %__gs_x, %rd1;"));
            assert!(text.contains("@%__gs_q add.s64 %__gs_lo, %__gs_mid, 1;"));
            assert!(text.contains("@!%__gs_q mov.u64 %__gs_hi, %__gs_mid;"));
        }
    }

    #[test]
    fn a_cache_slot_is_trusted_only_for_an_entry_that_contains_the_value() {
        let text = loadmeta(0, "%rd1", Layout::Folded, &mut {
            let mut n = 0;
            move || {
                n += 1;
                format!("$__gs_L{n}")
            }
        });
        let at = |needle: &str| text.find(needle).unwrap_or_else(|| panic!("no `{needle}` in\n{text}"));
        // Probe: the table's address from the constant bank, the slot below the header, an
        // index below the length, an entry containing the value, and only then the jump
        // past the search ($__gs_L1 is `search`, $__gs_L4 `found`).
        let table = at("ld.const.u64 %__gs_t, [__gpusan_table];");
        let slot = at(&format!("ld.global.u32 %__gs_c, [%__gs_h+-{LOOKUP_CACHE_BYTES}];"));
        let in_table = at("setp.gt.u64 %__gs_q, %__gs_lo, %__gs_hi;\n\t@%__gs_q bra $__gs_L1;");
        let contains = at("setp.lt.u64 %__gs_q, %__gs_y, %__gs_sz;\n\t@%__gs_q bra $__gs_L4;");
        let search = at("$__gs_L1:\n");
        let refill = at(&format!("st.global.u32 [%__gs_h+-{LOOKUP_CACHE_BYTES}], %__gs_c;"));
        let judged = at("setp.ge.u64 %__gs_q, %__gs_y, %__gs_sz;\n\t@%__gs_q bra $__gs_L5;");
        let found = at("$__gs_L4:\n");
        assert!(table < slot && slot < in_table && in_table < contains && contains < search);
        assert!(search < refill && refill < judged && judged < found);
        // The entry, its flags and its neighbour load in one round, before the test.
        assert_eq!(text.matches("ld.global.v2.u64 {%__gs_id0, %__gs_r}, [%__gs_x+16];").count(), 2);
    }

    #[test]
    fn folded_bounds_say_found_and_live() {
        let text = loadmeta(3, "%rd1", Layout::Folded, &mut || "$L".to_string());
        // Nothing found: the whole address space; found: a hit only when the value is
        // inside the entry; not live: the limit drops to the base and the id is marked.
        assert!(text.starts_with("\tmov.b64 %__gs_low3, 0;\n\tmov.b64 %__gs_lim3, -1;\n"), "{text}");
        assert!(text.contains("setp.ge.u64 %__gs_q, %__gs_y, %__gs_sz;"));
        assert!(text.contains("@%__gs_q mov.b64 %__gs_lim3, %__gs_mid;"));
        assert!(text.contains(&format!("@%__gs_q or.b64 %__gs_id3, %__gs_id3, {DEAD_BIT:#x};")));
    }
}
