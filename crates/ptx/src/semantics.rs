//! What instructions mean for memory: which touch memory, in which state space, through
//! which operand, how many bytes, and whether they read, write or are atomic.
//!
//! The parser keeps instructions generic; this table is where their meaning lives, so
//! passes (the checker, the fence, the tracer) ask one place.
//!
//! Three questions are answered here:
//!
//! - registers: [`has_destination`], [`for_each_def`], [`for_each_use`];
//! - memory: [`memory_accesses`] lists every memory location an instruction reaches
//!   through an address operand ([`MemAccess`]);
//! - addresses: [`address_conversion`] (`cvta`) and [`space_test`] (`isspacep`).
//!
//! Modifiers are matched by name wherever they stand in the modifier list, so the table
//! does not depend on the order PTX writes them in (`atom.global.add.v4.f32` and
//! `atom.global.v4.f32.add` mean the same) nor on modifiers it does not know (cache
//! operators, eviction priorities, `L2::cache_hint`, prefetch sizes, scopes, memory
//! semantics). References are to the PTX ISA 9.0 ("Data Movement and Conversion
//! Instructions", "Parallel Synchronization and Communication Instructions", "Texture",
//! "Surface", "Warp Level Matrix Multiply-Accumulate", "TensorCore 5th Generation").

use smallvec::SmallVec;

use crate::ast::{Instruction, Name, Operand};

pub use crate::ast::type_width;

// ---- registers --------------------------------------------------------------------------

/// Whether the instruction's first operand is a destination it writes. Most PTX
/// instructions write their first operand; these families do not. An instruction without
/// operands, or whose first operand is a memory operand (`[a]`), has no destination.
pub fn has_destination(inst: &Instruction) -> bool {
    // A memory operand first means a store-like form: `wmma.store.d [p], r`,
    // `tcgen05.st [taddr], r`, and whatever such forms the ISA adds.
    match inst.operands.first() {
        None | Some(Operand::Address { .. } | Operand::AddressList(_)) => return false,
        Some(_) => {}
    }
    // Only a few opcodes look at their first modifier: found when one does, not for every
    // instruction (this runs for each one of a module in every analysis).
    let first = || inst.modifiers().next().unwrap_or("");
    match inst.opcode.as_str() {
        "st" | "red" | "bra" | "brx" | "ret" | "exit" | "trap" | "brkpt" | "membar" | "fence" | "prefetch"
        | "prefetchu" | "sust" | "sured" | "pmevent" | "nanosleep" | "setmaxnreg" | "griddepcontrol"
        | "stackrestore" | "stmatrix" | "discard" | "applypriority" | "cp" | "tensormap" | "call" => false,
        // `bar.red`/`barrier.red` return the reduction; the other barriers write nothing.
        "bar" | "barrier" => inst.has_modifier("red"),
        "wgmma" => first() == "mma_async",
        "mbarrier" => matches!(first(), "arrive" | "arrive_drop" | "test_wait" | "try_wait" | "pending_count"),
        "multimem" => first() == "ld_reduce",
        // Only `tcgen05.ld` writes registers; `tcgen05.dealloc taddr, n` reads `taddr`.
        "tcgen05" => first() == "ld",
        // `clusterlaunchcontrol.query_cancel` decodes a response into a register;
        // `try_cancel` writes memory.
        "clusterlaunchcontrol" => first() == "query_cancel",
        _ => true,
    }
}

/// Calls `f` on each register the instruction writes. `call (r), f, (a)` writes `r`;
/// a vector or pair destination writes each element; `_` is no register.
pub fn for_each_def(inst: &Instruction, mut f: impl FnMut(Name)) {
    let dest = if inst.opcode == "call" {
        match (inst.operands.first(), inst.operands.get(1)) {
            (Some(ret @ Operand::List(_)), Some(_)) => Some(ret),
            _ => None,
        }
    } else if has_destination(inst) {
        inst.operands.first()
    } else {
        None
    };
    if let Some(d) = dest {
        d.for_each_name(&mut |n| {
            if n != "_" {
                f(n)
            }
        });
    }
}

/// Calls `f` on each name the instruction reads: the guard, source operands, address
/// bases, and the destination of instructions that also read it (`wgmma.mma_async`
/// accumulates into its first operand). Symbols (labels, variables, parameters) are
/// included; callers keep the registers they declared.
pub fn for_each_use(inst: &Instruction, mut f: impl FnMut(Name)) {
    if let Some(g) = &inst.guard {
        f(g.reg);
    }
    let skip_first = if inst.opcode == "call" {
        matches!((inst.operands.first(), inst.operands.get(1)), (Some(Operand::List(_)), Some(_)))
    } else {
        has_destination(inst) && inst.opcode != "wgmma"
    };
    for op in inst.operands.iter().skip(skip_first as usize) {
        op.for_each_name(&mut |n| {
            if n != "_" {
                f(n)
            }
        });
    }
}

// ---- memory accesses --------------------------------------------------------------------

/// The state space an access is made in, as the instruction names it.
///
/// `Generic` means no space was written: the address is generic and the hardware finds
/// the window (global, shared, local, …) at run time. `Shared` is the plain `.shared`
/// spelling, which PTX defines as `.shared::cta`; it is kept apart so tools can report
/// what was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Space {
    Global,
    Shared,
    SharedCta,
    SharedCluster,
    Local,
    Generic,
    Const,
    /// `.param` in all its spellings (`.param::entry`, `.param::func`).
    Param,
    /// Memory reached through an opaque handle and coordinates rather than an address:
    /// textures and surfaces (`[tex, {x, y}]`) and the tensor maps of bulk tensor copies
    /// (`[tmap, {c0, c1}]`). The operand is an [`Operand::AddressList`]; the hardware
    /// bounds the coordinates against the handle's description.
    Tex,
}

impl Space {
    /// The space a modifier names (`global`, `shared::cta`, `param::entry`, …), if any.
    pub fn from_modifier(m: &str) -> Option<Space> {
        Some(match m {
            "global" => Space::Global,
            "shared" => Space::Shared,
            "shared::cta" => Space::SharedCta,
            "shared::cluster" => Space::SharedCluster,
            "local" => Space::Local,
            "const" => Space::Const,
            "param" | "param::entry" | "param::func" => Space::Param,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Space::Global => "global",
            Space::Shared => "shared",
            Space::SharedCta => "shared::cta",
            Space::SharedCluster => "shared::cluster",
            Space::Local => "local",
            Space::Generic => "generic",
            Space::Const => "const",
            Space::Param => "param",
            Space::Tex => "tex",
        }
    }

    /// Shared memory in any of its spellings.
    pub fn is_shared(self) -> bool {
        matches!(self, Space::Shared | Space::SharedCta | Space::SharedCluster)
    }
}

/// What an access does to the memory it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AccessKind {
    /// Data flows from memory (into registers, or into another memory for copies).
    Read,
    /// Memory is overwritten (also `discard`, which leaves the line's content undefined,
    /// and `mbarrier.init`/`inval`).
    Write,
    /// Read-modify-write: `atom`, `red`, `sured`, bulk reductions, mbarrier arrivals and
    /// transaction counts.
    Atomic,
    /// The address is used but no data moves into registers and memory does not change:
    /// `prefetch`, `prefetchu`, `cp.async.bulk.prefetch`, `applypriority`, and the
    /// `fence.proxy.tensormap::generic.acquire [a], 128` proxy fence.
    Prefetch,
}

impl AccessKind {
    pub fn reads(self) -> bool {
        matches!(self, AccessKind::Read | AccessKind::Atomic)
    }

    pub fn writes(self) -> bool {
        matches!(self, AccessKind::Write | AccessKind::Atomic)
    }
}

/// How many bytes an access covers, starting at its address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Width {
    /// Exactly this many bytes.
    Bytes(u32),
    /// As many bytes as the run-time value of this operand (an index into
    /// `inst.operands`): the `size` register of `cp.async.bulk`, `cp.reduce.async.bulk`,
    /// `cp.async.bulk.prefetch` and `st.bulk`. An immediate size is given as `Bytes`.
    Operand(usize),
    /// At most `max` bytes, fewer as operand `operand` says at run time: the source of
    /// `cp.async [dst], [src], cp-size, src-size` reads `src-size` bytes (an integer
    /// register), or nothing if the operand is the `ignore-src` predicate and it is true.
    /// The two are told apart by the register's declared type.
    AtMost { max: u32, operand: usize },
    /// Not known from the instruction: bulk tensor copies move the box their tensor map
    /// describes; `wmma.load`/`wmma.store` fragments span rows of a run-time stride.
    Unknown,
}

impl Width {
    /// The width when it is a constant number of bytes.
    pub fn bytes(self) -> Option<u32> {
        match self {
            Width::Bytes(n) => Some(n),
            _ => None,
        }
    }
}

/// One memory location an instruction reaches through an address operand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MemAccess {
    pub space: Space,
    /// Index into `inst.operands` of the address operand: an [`Operand::Address`] (`[a]`,
    /// `[a+8]`) or, for [`Space::Tex`], an [`Operand::AddressList`] (`[tex, {x, y}]`).
    pub operand: usize,
    pub width: Width,
    pub kind: AccessKind,
}

impl MemAccess {
    /// The address operand of `inst` this access goes through.
    pub fn address<'a>(&self, inst: &'a Instruction) -> &'a Operand {
        &inst.operands[self.operand]
    }
}

/// The accesses of one instruction; inline up to three (copies with a completion barrier).
pub type MemAccesses = SmallVec<[MemAccess; 3]>;

/// Every memory location `inst` reaches through an address operand, in a fixed order:
/// destination before source for copies, the completion mbarrier last. Empty for
/// instructions that touch no memory through an operand (arithmetic, `mov`, `cvta`,
/// `isspacep`, `mapa`, `alloca`, `stacksave`, barriers, `wgmma.mma_async` whose matrix
/// operands are descriptors, `cp.async.wait_group`, …).
///
/// An access is only listed when its operand really is bracketed (`[…]`), so
/// [`MemAccess::operand`] always names an [`Operand::Address`] or
/// [`Operand::AddressList`].
///
/// Notes per family:
/// - `ld`/`ldu`/`st`/`atom`/`red`/`multimem`: width = type × vector count; no state space
///   means [`Space::Generic`]. `.L2::cache_hint` appends a cache-policy operand at the end,
///   which moves no address.
/// - `cp.async.ca/cg`: the shared destination gets `cp-size` bytes, the global source is
///   read with [`Width::AtMost`] when a `src-size`/`ignore-src` operand is present.
/// - `ldmatrix`/`stmatrix`: each thread gives the address of one 16-byte row. With `.x1`
///   only threads 0–7 give addresses, with `.x2` threads 0–15; the others' are unused.
/// - mbarriers are 8 bytes; `try_wait`/`test_wait` read them, arrivals and `expect_tx`/
///   `complete_tx` are atomic, `init`/`inval` write.
pub fn memory_accesses(inst: &Instruction) -> MemAccesses {
    let mut out = Acc { inst, list: SmallVec::new() };
    let mut mods = inst.modifiers();
    let first = mods.next().unwrap_or("");
    use AccessKind::*;
    match inst.opcode.as_str() {
        "ld" | "ldu" => out.push(space_or_generic(inst), 1, data_width(inst), Read),
        "st" => {
            if inst.has_modifier("async") {
                out.async_store(Write)
            } else if inst.has_modifier("bulk") {
                // st.bulk{.weak}{.shared::cta} [a], size, 0
                out.push(space_or_generic(inst), 0, size_operand(inst, 1), Write)
            } else {
                out.push(space_or_generic(inst), 0, data_width(inst), Write)
            }
        }
        "atom" => out.push(space_or_generic(inst), 1, data_width(inst), Atomic),
        "red" => {
            if inst.has_modifier("async") {
                out.async_store(Atomic)
            } else {
                out.push(space_or_generic(inst), 0, data_width(inst), Atomic)
            }
        }
        "multimem" => match first {
            "ld_reduce" => out.push(space_or_generic(inst), 1, data_width(inst), Read),
            "st" => out.push(space_or_generic(inst), 0, data_width(inst), Write),
            "red" => out.push(space_or_generic(inst), 0, data_width(inst), Atomic),
            // `multimem.cp.async.bulk…`, `multimem.cp.reduce.async.bulk…` (PTX 9.1): bulk
            // copies whose destination is a multimem address.
            "cp" => out.copy(mods),
            _ => {}
        },
        "cp" => out.copy(inst.modifiers()),
        "prefetch" => {
            if inst.has_modifier("tensormap") {
                out.push(space_or_generic(inst), 0, Width::Bytes(TENSORMAP_BYTES), Prefetch)
            } else {
                out.push(space_or_generic(inst), 0, Width::Bytes(1), Prefetch)
            }
        }
        "prefetchu" => out.push(Space::Generic, 0, Width::Bytes(1), Prefetch),
        "applypriority" => out.push(space_or_generic(inst), 0, Width::Bytes(L2_LINE), Prefetch),
        "discard" => out.push(space_or_generic(inst), 0, Width::Bytes(L2_LINE), Write),
        "ldmatrix" => out.push(space_or_generic(inst), 1, Width::Bytes(MATRIX_ROW), Read),
        "stmatrix" => out.push(space_or_generic(inst), 0, Width::Bytes(MATRIX_ROW), Write),
        "mbarrier" => {
            let space = space_or_generic(inst);
            match first {
                "init" | "inval" => out.push(space, 0, Width::Bytes(MBARRIER), Write),
                "expect_tx" | "complete_tx" => out.push(space, 0, Width::Bytes(MBARRIER), Atomic),
                "arrive" | "arrive_drop" => out.push(space, 1, Width::Bytes(MBARRIER), Atomic),
                "test_wait" | "try_wait" => out.push(space, 1, Width::Bytes(MBARRIER), Read),
                _ => {} // pending_count decodes a state register
            }
        }
        "tex" | "tld4" | "suld" => out.push(Space::Tex, 1, data_width(inst), Read),
        "sust" => out.push(Space::Tex, 0, data_width(inst), Write),
        "sured" => out.push(Space::Tex, 0, data_width(inst), Atomic),
        "wmma" => match first {
            "load" => out.push(space_or_generic(inst), 1, Width::Unknown, Read),
            "store" => out.push(space_or_generic(inst), 0, Width::Unknown, Write),
            _ => {}
        },
        "tensormap" => match first {
            // Rewrites a field of the 128-byte tensor map in place.
            "replace" => out.push(space_or_generic(inst), 0, Width::Bytes(TENSORMAP_BYTES), Write),
            // `tensormap.cp_fenceproxy.global.shared::cta… [dst], [src], 128`
            "cp_fenceproxy" => {
                let (dst, src) = two_spaces(inst);
                let w = size_operand(inst, 2);
                out.push(dst, 0, w, Write);
                out.push(src, 1, w, Read);
            }
            _ => {}
        },
        // `fence.proxy.tensormap::generic.acquire.gpu [a], 128`: the only fence with an address.
        "fence" => out.push(Space::Generic, 0, size_operand(inst, 1), Prefetch),
        "tcgen05" => match first {
            // Writes the allocated tensor-memory address to shared memory.
            "alloc" => out.push(space_or_generic(inst), 0, Width::Bytes(4), Write),
            // Arrives on an mbarrier when the prior tcgen05 operations complete.
            "commit" => out.push(space_or_generic(inst), 0, Width::Bytes(MBARRIER), Atomic),
            _ => {} // ld/st/cp/mma/shift address tensor memory, not a state space
        },
        // `clusterlaunchcontrol.try_cancel… [addr], [mbar]` writes a 16-byte response.
        "clusterlaunchcontrol" if first == "try_cancel" => {
            let space = space_or_generic(inst);
            out.push(space, 0, Width::Bytes(16), Write);
            out.push(space, 1, Width::Bytes(MBARRIER), Atomic);
        }
        _ => {}
    }
    out.list
}

/// Bytes of a tensor map (`.b1024`).
const TENSORMAP_BYTES: u32 = 128;
/// Bytes `applypriority` and `discard` act on: one L2 line.
const L2_LINE: u32 = 128;
/// Bytes of an mbarrier object (`.b64`).
const MBARRIER: u32 = 8;
/// Bytes of one matrix row addressed by `ldmatrix`/`stmatrix`.
const MATRIX_ROW: u32 = 16;

struct Acc<'a> {
    inst: &'a Instruction,
    list: MemAccesses,
}

impl Acc<'_> {
    /// Records an access if operand `operand` is bracketed.
    fn push(&mut self, space: Space, operand: usize, width: Width, kind: AccessKind) {
        if is_memory_operand(self.inst.operands.get(operand)) {
            self.list.push(MemAccess { space, operand, width, kind });
        }
    }

    /// Records the completion mbarrier: the first bracketed operand at or after `from`.
    fn push_mbarrier(&mut self, space: Space, from: usize) {
        if let Some(i) = (from..self.inst.operands.len()).find(|&i| is_memory_operand(self.inst.operands.get(i))) {
            self.push(space, i, Width::Bytes(MBARRIER), AccessKind::Atomic);
        }
    }

    /// `st.async`/`red.async`: `[a], b, [mbar]` into another CTA's shared memory, or
    /// `[a], b` with release semantics into global memory.
    fn async_store(&mut self, kind: AccessKind) {
        let inst = self.inst;
        let with_mbarrier = is_memory_operand(inst.operands.get(2));
        let space = first_space(inst).unwrap_or(if with_mbarrier { Space::SharedCluster } else { Space::Generic });
        self.push(space, 0, data_width(inst), kind);
        if with_mbarrier {
            self.push(space, 2, Width::Bytes(MBARRIER), AccessKind::Atomic);
        }
    }

    /// The `cp` family; `mods` starts at the modifier after `cp` (`async`, `reduce`).
    fn copy<'m>(&mut self, mut mods: impl Iterator<Item = &'m str>) {
        use AccessKind::*;
        let inst = self.inst;
        let reduce = match mods.next() {
            Some("async") => false,
            Some("reduce") => {
                if mods.next() != Some("async") {
                    return;
                }
                true
            }
            _ => return,
        };
        let (dst, src) = two_spaces(inst);
        match mods.next() {
            // cp.async.ca/cg.shared{::cta}.global [dst], [src], cp-size{, src-size|ignore-src}{, cache-policy}
            Some("ca" | "cg") if !reduce => {
                let cp_size = match inst.operands.get(2) {
                    Some(Operand::Int(n)) => Width::Bytes(n.value as u32),
                    _ => Width::Unknown,
                };
                // Operands after cp-size: src-size or ignore-src, then the cache policy.
                let extra = inst.operands.len().saturating_sub(3);
                let limit = extra > usize::from(inst.has_modifier("L2::cache_hint"));
                let src_width = match (limit, cp_size, inst.operands.get(3)) {
                    (true, _, Some(Operand::Int(n))) => Width::Bytes(n.value as u32),
                    (true, Width::Bytes(max), _) => Width::AtMost { max, operand: 3 },
                    (true, _, _) => Width::Unknown,
                    (false, w, _) => w,
                };
                self.push(dst, 0, cp_size, Write);
                self.push(src, 1, src_width, Read);
            }
            // cp.async.mbarrier.arrive{.noinc}{.shared{::cta}}.b64 [addr]
            Some("mbarrier") if !reduce => self.push(dst, 0, Width::Bytes(MBARRIER), Atomic),
            Some("bulk") => match mods.next() {
                Some("commit_group" | "wait_group") => {}
                // cp.async.bulk.prefetch.L2.global [src], size
                // cp.async.bulk.prefetch.tensor.Nd.L2.global [tmap, coords]
                Some("prefetch") => {
                    if inst.has_modifier("tensor") {
                        self.push(Space::Tex, 0, Width::Unknown, Prefetch)
                    } else {
                        self.push(dst, 0, size_operand(inst, 1), Prefetch)
                    }
                }
                // cp{.reduce}.async.bulk.tensor.Nd.dst.src…
                Some("tensor") => {
                    let dst_kind = if reduce { Atomic } else { Write };
                    if dst == Space::Global {
                        // [tmap, coords], [srcMem]
                        self.push(Space::Tex, 0, Width::Unknown, dst_kind);
                        self.push(src, 1, Width::Unknown, Read);
                    } else {
                        // [dstMem], [tmap, coords], [mbar]
                        self.push(dst, 0, Width::Unknown, dst_kind);
                        self.push(Space::Tex, 1, Width::Unknown, Read);
                        self.push_mbarrier(dst, 2);
                    }
                }
                // cp{.reduce}.async.bulk.dst.src… [dstMem], [srcMem], size{, [mbar]}…
                _ => {
                    let w = size_operand(inst, 2);
                    self.push(dst, 0, w, if reduce { Atomic } else { Write });
                    self.push(src, 1, w, Read);
                    if inst.has_modifier("mbarrier::complete_tx::bytes") {
                        self.push_mbarrier(dst, 3);
                    }
                }
            },
            _ => {} // commit_group, wait_group, wait_all
        }
    }
}

fn is_memory_operand(op: Option<&Operand>) -> bool {
    matches!(op, Some(Operand::Address { .. } | Operand::AddressList(_)))
}

/// The first state space among the modifiers.
fn first_space(inst: &Instruction) -> Option<Space> {
    inst.modifiers().find_map(Space::from_modifier)
}

fn space_or_generic(inst: &Instruction) -> Space {
    first_space(inst).unwrap_or(Space::Generic)
}

/// The destination and source spaces of a copy, as written `.dst.src`; a missing one is
/// generic.
fn two_spaces(inst: &Instruction) -> (Space, Space) {
    let mut spaces = inst.modifiers().filter_map(Space::from_modifier);
    let dst = spaces.next().unwrap_or(Space::Generic);
    let src = spaces.next().unwrap_or(Space::Generic);
    (dst, src)
}

/// Width of the data an instruction moves: its first type modifier times its vector
/// count (`v4.f32` → 16, `b128` → 16). `Unknown` without a sized type.
fn data_width(inst: &Instruction) -> Width {
    let mut ty = None;
    let mut count = 1;
    for m in inst.modifiers() {
        match m {
            "v2" => count = 2,
            "v4" => count = 4,
            "v8" => count = 8,
            _ => {
                if ty.is_none() {
                    ty = type_width(m);
                }
            }
        }
    }
    match ty {
        Some(w) => Width::Bytes(w * count),
        None => Width::Unknown,
    }
}

/// A size given by operand `i`: an immediate is `Bytes`, anything else `Operand(i)`.
fn size_operand(inst: &Instruction, i: usize) -> Width {
    match inst.operands.get(i) {
        Some(Operand::Int(n)) if !n.negative && n.value <= u32::MAX as u64 => Width::Bytes(n.value as u32),
        _ => Width::Operand(i),
    }
}

// ---- address conversions ----------------------------------------------------------------

/// What a `cvta` does to an address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Conversion {
    /// `cvta.space.size p, a`: an address in `space` becomes generic.
    ToGeneric(Space),
    /// `cvta.to.space.size p, a`: a generic address becomes one in `space`.
    FromGeneric(Space),
}

/// The conversion a `cvta` instruction performs; `None` for every other instruction.
pub fn address_conversion(inst: &Instruction) -> Option<Conversion> {
    if inst.opcode != "cvta" {
        return None;
    }
    let mut mods = inst.modifiers();
    match mods.next()? {
        "to" => mods.next().and_then(Space::from_modifier).map(Conversion::FromGeneric),
        m => Space::from_modifier(m).map(Conversion::ToGeneric),
    }
}

/// The space an `isspacep.space p, a` tests a generic address for; `None` for every other
/// instruction.
pub fn space_test(inst: &Instruction) -> Option<Space> {
    if inst.opcode != "isspacep" {
        return None;
    }
    first_space(inst)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inst(opcode: &str, mods: &[&str], operands: Vec<Operand>) -> Instruction {
        Instruction::new(opcode, mods, operands)
    }

    #[test]
    fn data_width_scans_the_whole_modifier_list() {
        let w = |mods: &[&str]| data_width(&inst("ld", mods, vec![]));
        assert_eq!(w(&["global", "nc", "L1::no_allocate", "v4", "f32"]), Width::Bytes(16));
        assert_eq!(w(&["v8", "f16", "global", "add"]), Width::Bytes(16));
        assert_eq!(w(&["global", "b128"]), Width::Bytes(16));
        assert_eq!(w(&["global", "L2::256B", "s8"]), Width::Bytes(1));
        // The first type is the data type (`tex.2d.v4.f32.s32`: f32 data, s32 coordinates).
        assert_eq!(w(&["2d", "v2", "f16x2", "f32"]), Width::Bytes(8));
        assert_eq!(w(&["global", "v4"]), Width::Unknown);
    }

    #[test]
    fn copy_spaces_are_destination_then_source() {
        let i = inst("cp", &["async", "bulk", "shared::cluster", "global", "mbarrier::complete_tx::bytes"], vec![]);
        assert_eq!(two_spaces(&i), (Space::SharedCluster, Space::Global));
        let i = inst("cp", &["async", "bulk", "global", "shared::cta", "bulk_group"], vec![]);
        assert_eq!(two_spaces(&i), (Space::Global, Space::SharedCta));
        assert_eq!(two_spaces(&inst("cp", &["async", "bulk"], vec![])), (Space::Generic, Space::Generic));
    }

    #[test]
    fn sizes_are_immediates_or_operands() {
        let i = inst("st", &["bulk"], vec![Operand::address("%rd1", 0), Operand::int(256), Operand::reg("%r1")]);
        assert_eq!(size_operand(&i, 1), Width::Bytes(256));
        assert_eq!(size_operand(&i, 2), Width::Operand(2));
        let neg = inst("st", &["bulk"], vec![Operand::address("%rd1", 0), Operand::int(-16)]);
        assert_eq!(size_operand(&neg, 1), Width::Operand(1));
    }

    #[test]
    fn spaces_by_modifier() {
        assert_eq!(Space::from_modifier("param::func"), Some(Space::Param));
        assert_eq!(Space::from_modifier("shared::cluster"), Some(Space::SharedCluster));
        assert_eq!(Space::from_modifier("cluster"), None);
        assert_eq!(Space::from_modifier("tensormap::generic"), None);
        assert_eq!(Space::from_modifier("reg"), None);
        for s in [Space::Shared, Space::SharedCta, Space::SharedCluster] {
            assert!(s.is_shared());
            assert_eq!(Space::from_modifier(s.name()), Some(s));
        }
        assert!(!Space::Global.is_shared());
        assert!(AccessKind::Atomic.reads() && AccessKind::Atomic.writes());
        assert!(!AccessKind::Prefetch.reads() && !AccessKind::Prefetch.writes());
    }
}

/// Special registers (PTX ISA "Special Registers") and predefined constants; `%tid.x`
/// and the like are checked by their base.
pub fn is_predefined(name: &str) -> bool {
    const FIXED: &[&str] = &[
        "%tid",
        "%ntid",
        "%laneid",
        "%warpid",
        "%nwarpid",
        "%ctaid",
        "%nctaid",
        "%smid",
        "%nsmid",
        "%gridid",
        "%is_explicit_cluster",
        "%clusterid",
        "%nclusterid",
        "%cluster_ctaid",
        "%cluster_nctaid",
        "%cluster_ctarank",
        "%cluster_nctarank",
        "%lanemask_eq",
        "%lanemask_le",
        "%lanemask_lt",
        "%lanemask_ge",
        "%lanemask_gt",
        "%clock",
        "%clock_hi",
        "%clock64",
        "%globaltimer",
        "%globaltimer_lo",
        "%globaltimer_hi",
        "%reserved_smem_offset_begin",
        "%reserved_smem_offset_end",
        "%reserved_smem_offset_cap",
        "%reserved_smem_offset_0",
        "%reserved_smem_offset_1",
        "%total_smem_size",
        "%aggr_smem_size",
        "%dynamic_smem_size",
        "%current_graph_exec",
        "WARP_SZ",
    ];
    if FIXED.contains(&name) {
        return true;
    }
    // %pm0…%pm7, %pm0_64…%pm7_64, %envreg0…%envreg31
    let pm = name.strip_prefix("%pm").map(|n| n.strip_suffix("_64").unwrap_or(n));
    if pm.is_some_and(|n| matches!(n.as_bytes(), [b'0'..=b'7'])) {
        return true;
    }
    name.strip_prefix("%envreg").is_some_and(|n| {
        matches!(n.len(), 1 | 2) && n.bytes().all(|b| b.is_ascii_digit()) && n.parse::<u32>().is_ok_and(|v| v <= 31)
    })
}

#[cfg(test)]
mod predefined_tests {
    use super::is_predefined;

    #[test]
    fn special_registers_and_constants() {
        for n in ["%tid", "%ctaid", "%clock64", "%lanemask_lt", "%dynamic_smem_size", "WARP_SZ", "%pm7_64", "%envreg31"]
        {
            assert!(is_predefined(n), "{n}");
        }
        for n in ["%r1", "%rd", "%pm8", "%envreg32", "%envreg", "warp_sz", "%tidx"] {
            assert!(!is_predefined(n), "{n}");
        }
    }
}
