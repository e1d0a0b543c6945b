//! The types the stages of the pass hand each other: roots, shadows, sites, insertions.

use std::collections::HashMap;

use gpusan_ptx::ast::{Name, Statement};
use gpusan_ptx::cfg::InstId;
use gpusan_ptx::dataflow::RegId;

/// Prefix of every register the pass adds (`%__gs_…`) and of its labels (`$__gs_…`); the
/// module must not use it.
pub(super) const PREFIX: &str = "__gs_";

/// The top bit of a folded root's `id`: the allocation is not live.
pub(super) const DEAD_BIT: u64 = 1 << 63;

/// Bytes of `__gs_meta` (shared memory) per root of the block-wide lookup (`block`):
/// `low`, `lim`, `id`.
pub(super) const BLOCK_META_BYTES: u64 = 32;

/// A root: the definition of one register whose value the accesses derive from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) enum Root {
    /// A `.reg` parameter, on entry.
    Entry(RegId),
    Inst(InstId, RegId),
}

/// What a definition on the way from several roots to an address does to the shadow
/// metadata of the register it defines (GPUArmor's "BB1/BB2" moves: the metadata travels
/// with the value along each path, so at the merge it is the one of the root the value
/// came from).
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Shadow {
    /// A root: its own metadata.
    Root(Root),
    /// Pointer arithmetic on one pointer: that register's shadow.
    Copy(RegId),
    /// `selp r, a, b, p`: `a`'s shadow when `p`, else `b`'s (`None`: an integer there).
    Select(Option<RegId>, Option<RegId>, Name),
    /// `add r, a, b` where either may be the pointer (a pointer plus a 64-bit offset loaded
    /// from memory: both are roots to the analysis): the shadow of the one the table knows,
    /// `a`'s when both are known. An integer offset is found nowhere (no allocation starts
    /// at a small number; LOADMETA rejects a value below the first entry at once).
    Either(RegId, RegId),
    /// An integer reaching a use as a pointer (a null pointer on one path): found nowhere.
    Nothing,
}

/// A hash map for the pass's own keys (instruction ids, registers, its own text): no
/// attacker chooses them, so a fast unkeyed hash does instead of the standard SipHash.
pub(super) type FastMap<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<ahash::AHasher>>;

/// Where a rewrite goes: before or after the statement at a path.
pub(super) struct Insertion {
    /// Path of the statement list's parent blocks, then the index to insert at.
    pub(super) at: Vec<u32>,
    /// Where among the insertions at one point ([`order`]).
    pub(super) order: u8,
    pub(super) stmts: Vec<Statement>,
}

/// The order of insertions at one point, which is both "after statement `j`" and "before
/// statement `j + 1`": first what ends statement `j` (the label a faulting access skips
/// to), then its LOADMETA, then group checks of the register it defined, then what belongs
/// before statement `j + 1` (its check).
pub(super) mod order {
    pub const AFTER_ACCESS: u8 = 0;
    pub const LOADMETA: u8 = 1;
    /// Shadow moves (multi-root values), after the LOADMETA they may copy from.
    pub const SHADOW: u8 = 2;
    pub const GROUP: u8 = 3;
    pub const BEFORE: u8 = 4;
    /// The slow paths after the body's last statement.
    pub const TAIL: u8 = 5;
}

/// How a function keeps its roots' metadata in registers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Layout {
    /// `low`, `lim`, `id` per root, with "found" and "live" folded into the bounds by
    /// [`loadmeta`](super::loadmeta::loadmeta): a check is two comparisons.
    Folded,
    /// Modules calling the device heap: `base`, `low`, `lim`, `id`, `st`, `ok`, because a
    /// heap block's state is read again before every check (`check/heap.rs`).
    Heap,
}

/// The alignment the hardware requires of an access's address: it faults on a `ld.v4.f32`
/// whose address is not a multiple of 16 (`CUDA_ERROR_MISALIGNED_ADDRESS`), and the check
/// reports it first ([`gpusan_abi::CODE_MISALIGNED`]). Held as "the address's low bits
/// `mask` equal `want`": a single access wants 0 under `width - 1`; a group's range check
/// tests its first byte, which may sit a known distance before the access that needs the
/// largest alignment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub(super) struct Align {
    pub(super) mask: u32,
    pub(super) want: u32,
}

impl Align {
    /// The alignment `bytes` (a power of two; 1 or 0: none).
    pub(super) fn of(bytes: u32) -> Align {
        Align { mask: bytes.saturating_sub(1), want: 0 }
    }

    pub(super) fn is_none(self) -> bool {
        self.mask == 0
    }

    /// The bytes it requires.
    pub(super) fn bytes(self) -> u32 {
        self.mask + 1
    }

    /// The alignment of bytes `[a + offset, …)` when `a + reference` must be a multiple
    /// of `self.bytes()`: what `a + offset` has to be modulo it.
    pub(super) fn moved(self, offset: i64, reference: i64) -> Align {
        let n = i64::from(self.bytes());
        Align { mask: self.mask, want: (offset - reference).rem_euclid(n) as u32 }
    }

    /// Code setting `pred` too when the 64-bit address in `a` breaks the alignment:
    /// `or` into `pred` (`bad`), or clearing it (`and`, an `ok` predicate). Only the low
    /// word is tested; empty when nothing is required. Clobbers `%__gs_al`.
    pub(super) fn text(self, a: &str, pred: &str, bad: bool) -> String {
        if self.is_none() {
            return String::new();
        }
        let (cmp, op) = if bad { ("ne", "or") } else { ("eq", "and") };
        format!(
            "\tcvt.u32.u64 %__gs_al, {a};\n\tand.b32 %__gs_al, %__gs_al, {};\n\tsetp.{cmp}.{op}.u32 {pred}, %__gs_al, {}, {pred};\n",
            self.mask, self.want
        )
    }
}

/// The alignment an access requires: its width for the instructions that move data of a
/// type (`ld`, `st`, `atom`, `red`, `multimem`, vectors as a whole), 16 for the rows of
/// `ldmatrix`/`stmatrix`, 8 for an mbarrier; none for copies and anything else, and for a
/// width that is not a power of two.
pub(super) fn required_alignment(inst: &gpusan_ptx::ast::Instruction, width: u32) -> u32 {
    let typed = match inst.opcode.as_str() {
        "ld" | "ldu" | "atom" => true,
        "multimem" => !inst.has_modifier("cp"),
        "st" | "red" => !inst.has_modifier("async") && !inst.has_modifier("bulk"),
        "ldmatrix" | "stmatrix" | "mbarrier" => true,
        _ => false,
    };
    if typed && width.is_power_of_two() && width <= 32 {
        width
    } else {
        1
    }
}
