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
