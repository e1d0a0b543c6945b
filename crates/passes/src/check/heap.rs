//! The device heap for `check`: blocks kernels get from `malloc` and give back with `free`.
//!
//! The runtime's allocation table only knows memory the host allocated; the device heap is
//! carved up by the kernels themselves, so a module that calls `malloc` or `free` gets a
//! table of its own:
//!
//! ```ptx
//! .visible .global .align 16 .b8 __gpusan_heap[2097168];  // 16-byte header, 65536 entries of 32 bytes
//! ```
//!
//! (The layout is [`gpusan_abi::heap`]'s.) The header's first word is set to 1 when an
//! insert found no free slot (the table *overflowed*). Entry `h` is at
//! `__gpusan_heap + 16 + 32 * h`: the block's base (the key; 0 marks an empty slot), its
//! size as asked of `malloc` (+8), and its state (+24, `u32`: [`STATE_LIVE`],
//! [`STATE_FREED`]). It is an open-addressing hash with linear probing over
//! at most [`PROBES`] slots from the Fibonacci hash of `base >> 4`. Keys are never removed:
//! when `malloc` returns a block at a base it returned before, the entry of that base is
//! reused (the insert's `atom.cas` finds the key already there), so the number of entries is
//! bounded by the distinct bases the heap hands out, not by the number of calls.
//!
//! # What the pass adds around the calls
//!
//! - **After `malloc`** (inside nvcc's `{ // callseq }` block, right after the call): the
//!   result is read from the return parameter and inserted as {base, size asked, live}. A
//!   null result is not inserted; a full table sets the overflow flag.
//! - **Before `free`**: the pointer is looked up. An entry in state live becomes freed
//!   (`atom.cas` live → freed, so of two threads freeing one block exactly one wins); an
//!   entry already freed is a **double free**. A pointer that is no base in the table is an
//!   **invalid free** when a live block of the table contains it (searched over the
//!   [`SEARCH_STEPS`] 16-byte steps below it) or when it is not 16-byte aligned (the heap
//!   returns 16-byte aligned blocks, so no module's `malloc` made it). Both are reported
//!   (`CODE_DOUBLE_FREE`, `CODE_INVALID_FREE`) and the call is skipped, as a faulting access
//!   is. `free(NULL)` and pointers the table does not know are left alone.
//! - **Roots that are a `malloc` result** (the `ld.param` of its return value) get their
//!   metadata from the call itself: base = result, limit = result + size argument, live,
//!   and the entry the insert found. No table is searched.
//! - **Every other root** is first looked up in the runtime's table as before; when that
//!   misses, the heap table is searched for the root's value as a block base, and a hit
//!   counts only when the block is live then (a freed entry's base may since have become an
//!   interior address of a larger block: keys outlive their blocks).
//! - **Use after device free**: a heap block can be freed after its root was looked up (by
//!   this thread or another), so for roots that can be heap blocks each check re-reads the
//!   state word of the entry the root found (one predicated load; no search).
//!
//! Error records of heap blocks carry [`BLOCK_TAG`]` | base` as their allocation, which
//! the runtime shows as a device-heap block instead of looking for a host allocation.
//!
//! # Limits
//!
//! - **Interior pointers loaded from memory** (`q = p + 4` stored, then loaded and used)
//!   are not resolved: the heap table is searched by exact base only.
//! - **A pointer loaded from memory after its block was freed** is not judged (see the
//!   roots above); use after free is found through `malloc` results and through loaded
//!   pointers whose block was live when they were loaded.
//! - **The table belongs to one module.** A block one module allocates and another frees
//!   or uses is unknown to the second one's table (never judged there, which is why an
//!   unknown 16-byte aligned pointer is not an invalid free), and the first module's entry
//!   stays live. When blocks travel between modules both ways, a stale entry of one module
//!   can describe memory another module has since reallocated; a context-wide heap table
//!   set by the runtime (like `__gpusan_table`) would close this.
//! - `__nv_aligned_device_malloc` and device-side `cudaMalloc` are not tracked.
//! - A block inserted while the table is full is not in it: checks through its `malloc`
//!   result still bound it, but its use after free and a double free of it go unseen.

use std::collections::HashMap;

use gpusan_ptx::ast::{Function, Instruction, Item, Name, Operand, Statement};
use gpusan_ptx::cfg::{Cfg, InstId};
use gpusan_ptx::Module;

use gpusan_abi::heap::{
    BITS, BLOCK_TAG, CAPACITY, ENTRY_BASE, ENTRY_BYTES, ENTRY_SIZE, ENTRY_STATE, HEADER_BYTES, OVERFLOW, STATE_FREED,
    STATE_LIVE, TABLE_BYTES,
};
use gpusan_abi::{record, CODE_DOUBLE_FREE, CODE_INVALID_FREE, HEAP_SYMBOL};

use super::plan::Insertion;
use super::records::{claim_text, field, kernel_text, memory_operand};

// A slot number becomes its entry's offset by a shift; the code reads and writes each
// field at its width.
const _: () = assert!(ENTRY_BYTES.is_power_of_two());
const _: () = assert!(ENTRY_BASE.bytes == 8 && ENTRY_SIZE.bytes == 8 && ENTRY_STATE.bytes == 4 && OVERFLOW.bytes == 4);

/// Slots an insert or lookup visits before giving up.
pub(super) const PROBES: u32 = 32;
/// How many 16-byte steps below a freed pointer the search for a containing block goes.
pub(super) const SEARCH_STEPS: u32 = 64;

/// 2^64 / φ, for Fibonacci hashing.
const FIB: &str = "0x9E3779B97F4A7C15U";

/// Whether `module` calls the device heap: only then does it get a heap table (a module
/// that never calls `malloc` can have no block in a table of its own).
pub(super) fn module_uses_heap(module: &Module) -> bool {
    fn calls(stmts: &[Statement]) -> bool {
        stmts.iter().any(|s| match s {
            Statement::Inst(i) => callee(i).is_some_and(|c| c == "malloc" || c == "free"),
            Statement::Block(b) => calls(b),
            _ => false,
        })
    }
    module.items.iter().any(|i| matches!(i, Item::Function(f) if calls(f.body.as_deref().unwrap_or_default())))
}

/// The declaration of the heap table.
pub(super) fn table_decl() -> gpusan_ptx::ast::VarDecl {
    let mut v = super::declare::abi_var(HEAP_SYMBOL, "b8", 16);
    v.array = vec![Some(TABLE_BYTES)];
    v
}

fn callee(i: &Instruction) -> Option<Name> {
    if i.opcode != "call" {
        return None;
    }
    let at = usize::from(matches!(i.operands.first(), Some(Operand::List(_))));
    match i.operands.get(at) {
        Some(Operand::Name(n)) => Some(*n),
        _ => None,
    }
}

/// The first name of a call's argument or return list.
fn list_head(op: Option<&Operand>) -> Option<Name> {
    match op {
        Some(Operand::List(l)) => match l.first() {
            Some(Operand::Name(n)) => Some(*n),
            _ => None,
        },
        _ => None,
    }
}

/// One `malloc` call nvcc's way: `st.param.b64 [param0+0], size;` then
/// `call (retval0), malloc, (param0);` then `ld.param.b64 %r, [retval0+0];`.
struct Malloc {
    call: InstId,
    size: Operand,
    ret: Name,
}

struct Free {
    call: InstId,
    ptr: Operand,
}

/// The heap calls of one function, and the roots that are `malloc` results.
#[derive(Default)]
pub(super) struct Calls {
    mallocs: Vec<Malloc>,
    frees: Vec<Free>,
    /// `ld.param` of a `malloc` result → index in `mallocs`.
    results: HashMap<InstId, usize>,
    /// Calls whose argument could not be found (not nvcc's call sequence): left alone.
    pub unrecognized: u32,
}

/// The plan of a function's heap calls (`explain`): one line each, by instruction.
impl std::fmt::Display for Calls {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        let mut results: Vec<(&InstId, &usize)> = self.results.iter().collect();
        results.sort();
        for (k, m) in self.mallocs.iter().enumerate() {
            let result = results.iter().find(|(_, &r)| r == k).map(|(i, _)| format!(", result read at inst {}", i.0));
            writeln!(f, "malloc at inst {} into {}{}", m.call.0, m.ret, result.unwrap_or_default())?;
        }
        for fr in &self.frees {
            writeln!(f, "free at inst {}", fr.call.0)?;
        }
        if self.unrecognized > 0 {
            writeln!(f, "{} calls not in nvcc's sequence, left alone", self.unrecognized)?;
        }
        Ok(())
    }
}

impl Calls {
    pub(super) fn find(cfg: &Cfg, f: &Function) -> Calls {
        let insts = cfg.instructions(f);
        let mut calls = Calls::default();
        // Instructions by the statement list they are in, in order.
        let mut lists: HashMap<&[u32], Vec<InstId>> = HashMap::new();
        for i in (0..cfg.num_insts() as u32).map(InstId) {
            let path = cfg.inst_path(i);
            lists.entry(&path[..path.len() - 1]).or_default().push(i);
        }
        for i in (0..cfg.num_insts() as u32).map(InstId) {
            let inst = insts[i.index()];
            let Some(name) = callee(inst) else { continue };
            if name != "malloc" && name != "free" {
                continue;
            }
            let path = cfg.inst_path(i);
            let list = &lists[&path[..path.len() - 1]];
            let at = list.iter().position(|&j| j == i).unwrap_or(0);
            let args = inst.operands.last();
            // The argument: the last store to the argument parameter before the call.
            let arg = list_head(args).and_then(|param| {
                list[..at].iter().rev().find_map(|&j| {
                    let s = insts[j.index()];
                    let stores_param = s.opcode == "st"
                        && s.modifiers().next() == Some("param")
                        && matches!(s.operands.first(), Some(Operand::Address { base: Some(b), offset: 0, .. }) if *b == param);
                    stores_param.then(|| s.operands.get(1).cloned()).flatten()
                })
            });
            let arg =
                arg.filter(|a| matches!(a, Operand::Name(n) if n.starts_with('%')) || matches!(a, Operand::Int(_)));
            let Some(arg) = arg else {
                calls.unrecognized += 1;
                continue;
            };
            if name == "free" {
                if !matches!(arg, Operand::Int(_)) {
                    calls.frees.push(Free { call: i, ptr: arg });
                }
                continue;
            }
            let Some(ret) = list_head(inst.operands.first()) else {
                calls.unrecognized += 1;
                continue;
            };
            let m = calls.mallocs.len();
            for &j in &list[at + 1..] {
                let s = insts[j.index()];
                let reads_ret = s.opcode == "ld"
                    && s.modifiers().next() == Some("param")
                    && matches!(s.operands.get(1), Some(Operand::Address { base: Some(b), offset: 0, .. }) if *b == ret);
                if reads_ret {
                    calls.results.insert(j, m);
                }
            }
            calls.mallocs.push(Malloc { call: i, size: arg, ret });
        }
        calls
    }

    pub(super) fn is_empty(&self) -> bool {
        self.mallocs.is_empty() && self.frees.is_empty()
    }

    /// Calls instrumented.
    pub(super) fn count(&self) -> u32 {
        (self.mallocs.len() + self.frees.len()) as u32
    }

    /// Whether the root defined by instruction `d` is a `malloc` result.
    pub(super) fn is_result(&self, d: InstId) -> bool {
        self.results.contains_key(&d)
    }

    /// The code around each call, as insertions in the original body's paths.
    pub(super) fn insertions(
        &self,
        cfg: &Cfg,
        f: &Function,
        function: u32,
        line_of: &dyn Fn(gpusan_ptx::ast::Span) -> u32,
        label: &mut dyn FnMut() -> String,
    ) -> Vec<Insertion> {
        let insts = cfg.instructions(f);
        let at = |i: InstId, after: bool| {
            let mut p = cfg.inst_path(i).to_vec();
            *p.last_mut().unwrap() += u32::from(after);
            p
        };
        let mut out = Vec::new();
        for m in &self.mallocs {
            // The size is copied before the call: the register holding it may be reused
            // once the argument is stored.
            let before = format!("\tmov.b64 %__gs_hs, {};\n", operand(&m.size));
            out.push(Insertion {
                at: at(m.call, false),
                order: super::plan::order::BEFORE,
                stmts: super::snippet::parse(&before),
            });
            let text = format!("\tld.param.b64 %__gs_hb, [{}+0];\n{}", m.ret, insert(label));
            out.push(Insertion {
                at: at(m.call, true),
                order: super::plan::order::BEFORE,
                stmts: super::snippet::parse(&text),
            });
        }
        for fr in &self.frees {
            let line = line_of(insts[fr.call.index()].span);
            let skip = label();
            let text = format!(
                "{}{}\t@%__gs_hbad bra {skip};\n",
                free_check(&operand(&fr.ptr), label),
                free_record(line, function, label)
            );
            out.push(Insertion {
                at: at(fr.call, false),
                order: super::plan::order::BEFORE,
                stmts: super::snippet::parse(&text),
            });
            out.push(Insertion {
                at: at(fr.call, true),
                order: super::plan::order::AFTER_ACCESS,
                stmts: super::snippet::parse(&format!("{skip}:\n")),
            });
        }
        out
    }
}

fn operand(op: &Operand) -> String {
    match op {
        Operand::Name(n) => n.to_string(),
        Operand::Int(i) => {
            let (negative, value) = (i.negative, i.value);
            format!("{}{value}", if negative { "-" } else { "" })
        }
        _ => unreachable!("only registers and integers are kept as arguments"),
    }
}

/// Declarations of the registers the heap code uses; `n` roots.
pub(super) fn declarations(n: u32) -> String {
    let mut s = String::new();
    for name in ["hh", "hb", "hs", "he", "hx", "hc", "hid", "hv"] {
        s.push_str(&format!("\t.reg .b64 %__gs_{name};\n"));
    }
    for name in ["hn", "hm", "hk"] {
        s.push_str(&format!("\t.reg .b32 %__gs_{name};\n"));
    }
    for name in ["hq", "hbad"] {
        s.push_str(&format!("\t.reg .pred %__gs_{name};\n"));
    }
    s.push_str(&format!("\t.reg .b64 %__gs_hp<{n}>;\n"));
    s
}

/// The first slot of `value`'s probe sequence into `%__gs_hx`, and the table into `%__gs_hh`.
fn hash(value: &str) -> String {
    format!(
        "\tmov.u64 %__gs_hh, {HEAP_SYMBOL};\n\
         \tshr.u64 %__gs_hx, {value}, 4;\n\
         \tmul.lo.u64 %__gs_hx, %__gs_hx, {FIB};\n\
         \tshr.u64 %__gs_hx, %__gs_hx, {shift};\n\
         \tmov.u32 %__gs_hn, 0;\n",
        shift = 64 - BITS
    )
}

/// `%__gs_hc` = slot `%__gs_hx`'s entry address; and the step to the next slot.
fn slot() -> String {
    format!(
        "\tshl.b64 %__gs_hc, %__gs_hx, {shift};\n\
         \tadd.s64 %__gs_hc, %__gs_hh, %__gs_hc;\n\
         \tadd.s64 %__gs_hc, %__gs_hc, {HEADER_BYTES};\n",
        shift = ENTRY_BYTES.trailing_zeros()
    )
}

fn next_slot(head: &str) -> String {
    format!(
        "\tadd.s64 %__gs_hx, %__gs_hx, 1;\n\
         \tand.b64 %__gs_hx, %__gs_hx, {mask};\n\
         \tadd.u32 %__gs_hn, %__gs_hn, 1;\n\
         \tsetp.lt.u32 %__gs_hq, %__gs_hn, {PROBES};\n\
         \t@%__gs_hq bra {head};\n",
        mask = CAPACITY - 1
    )
}

/// The entry whose base is exactly `value` into `%__gs_he`, or 0. Clobbers `hh`, `hx`,
/// `hc`, `hid`, `hn`, `hq`.
fn lookup(value: &str, label: &mut dyn FnMut() -> String) -> String {
    let (head, done) = (label(), label());
    format!(
        "\tmov.b64 %__gs_he, 0;\n\
         \tsetp.eq.u64 %__gs_hq, {value}, 0;\n\
         \t@%__gs_hq bra {done};\n\
         {hash}\
         {head}:\n\
         {slot}\
         \tld.volatile.global.u64 %__gs_hid, {base};\n\
         \tsetp.eq.u64 %__gs_hq, %__gs_hid, {value};\n\
         \t@%__gs_hq mov.b64 %__gs_he, %__gs_hc;\n\
         \t@%__gs_hq bra {done};\n\
         \tsetp.eq.u64 %__gs_hq, %__gs_hid, 0;\n\
         \t@%__gs_hq bra {done};\n\
         {next}\
         {done}:\n",
        hash = hash(value),
        slot = slot(),
        next = next_slot(&head),
        base = memory_operand("%__gs_hc", ENTRY_BASE.offset),
    )
}

/// Inserts {`%__gs_hb`, `%__gs_hs`, live}, leaving the entry in `%__gs_he` (0 when the
/// result is null or the table is full; full sets the overflow flag).
fn insert(label: &mut dyn FnMut() -> String) -> String {
    let (head, found, done) = (label(), label(), label());
    format!(
        "\tmov.b64 %__gs_he, 0;\n\
         \tsetp.eq.u64 %__gs_hq, %__gs_hb, 0;\n\
         \t@%__gs_hq bra {done};\n\
         {hash}\
         {head}:\n\
         {slot}\
         \tatom.global.cas.b64 %__gs_hid, {base}, 0, %__gs_hb;\n\
         \tsetp.eq.u64 %__gs_hq, %__gs_hid, 0;\n\
         \tsetp.eq.or.u64 %__gs_hq, %__gs_hid, %__gs_hb, %__gs_hq;\n\
         \t@%__gs_hq bra {found};\n\
         {next}\
         \tst.global.u32 {overflow}, 1;\n\
         \tbra.uni {done};\n\
         {found}:\n\
         \tmov.b64 %__gs_he, %__gs_hc;\n\
         \tst.global.u64 [%__gs_he+{size}], %__gs_hs;\n\
         \tst.volatile.global.u32 [%__gs_he+{state}], {STATE_LIVE};\n\
         {done}:\n",
        hash = hash("%__gs_hb"),
        slot = slot(),
        next = next_slot(&head),
        base = memory_operand("%__gs_hc", ENTRY_BASE.offset),
        overflow = memory_operand("%__gs_hh", OVERFLOW.offset),
        size = ENTRY_SIZE.offset,
        state = ENTRY_STATE.offset,
    )
}

/// The metadata of root `k` whose value `value` is a `malloc` result, right after the
/// insert: bounds from the call, the entry the insert found.
pub(super) fn loadmeta_result(k: usize, value: &str) -> String {
    format!(
        "\tmov.b64 %__gs_base{k}, {value};\n\
         \tmov.b64 %__gs_low{k}, {value};\n\
         \tadd.s64 %__gs_lim{k}, {value}, %__gs_hs;\n\
         \tor.b64 %__gs_id{k}, {value}, {BLOCK_TAG:#x}U;\n\
         \tmov.u32 %__gs_st{k}, {STATE_LIVE};\n\
         \tmov.b64 %__gs_hp{k}, %__gs_he;\n\
         \tsetp.ne.u64 %__gs_ok{k}, {value}, 0;\n"
    )
}

/// After the runtime table's LOADMETA of root `k`: when it found nothing, the heap entry
/// whose base is `value`, if that block is live. A freed entry is not used: its base may
/// now lie inside a larger live block (the heap reuses memory with other boundaries, and
/// keys stay), so a pointer equal to it proves nothing.
pub(super) fn loadmeta_fallback(k: usize, value: &str, label: &mut dyn FnMut() -> String) -> String {
    let done = label();
    format!(
        "\tmov.b64 %__gs_hp{k}, 0;\n\
         \t@%__gs_ok{k} bra {done};\n\
         {lookup}\
         \tsetp.eq.u64 %__gs_hq, %__gs_he, 0;\n\
         \t@%__gs_hq bra {done};\n\
         \tld.volatile.global.u32 %__gs_st{k}, [%__gs_he+{state}];\n\
         \tsetp.ne.u32 %__gs_hq, %__gs_st{k}, {STATE_LIVE};\n\
         \t@%__gs_hq bra {done};\n\
         \tmov.b64 %__gs_base{k}, {value};\n\
         \tmov.b64 %__gs_low{k}, {value};\n\
         \tld.global.u64 %__gs_hs, [%__gs_he+{size}];\n\
         \tadd.s64 %__gs_lim{k}, {value}, %__gs_hs;\n\
         \tor.b64 %__gs_id{k}, {value}, {BLOCK_TAG:#x}U;\n\
         \tmov.b64 %__gs_hp{k}, %__gs_he;\n\
         \tmov.pred %__gs_ok{k}, 1;\n\
         {done}:\n",
        lookup = lookup(value, label),
        size = ENTRY_SIZE.offset,
        state = ENTRY_STATE.offset,
    )
}

/// Before a check against root `k`: the state of its heap block as it is now.
pub(super) fn reload_state(k: usize) -> String {
    format!(
        "\tsetp.ne.u64 %__gs_hq, %__gs_hp{k}, 0;\n\
         \t@%__gs_hq ld.volatile.global.u32 %__gs_st{k}, [%__gs_hp{k}+{state}];\n",
        state = ENTRY_STATE.offset,
    )
}

/// The verdict on `free(ptr)`: `%__gs_hbad`, with the code in `%__gs_hk`, the pointer in
/// `%__gs_hb` and the block in `%__gs_hid` (tagged base, or 0). A good free leaves the
/// entry freed, ordered before the call so no later `malloc` of the block can see it live.
fn free_check(ptr: &str, label: &mut dyn FnMut() -> String) -> String {
    let (search, head, next, found, done) = (label(), label(), label(), label(), label());
    format!(
        "\tmov.b64 %__gs_hb, {ptr};\n\
         \tmov.pred %__gs_hbad, 0;\n\
         \tsetp.eq.u64 %__gs_hq, %__gs_hb, 0;\n\
         \t@%__gs_hq bra {done};\n\
         {lookup}\
         \tsetp.eq.u64 %__gs_hq, %__gs_he, 0;\n\
         \t@%__gs_hq bra {search};\n\
         \tatom.global.cas.b32 %__gs_hn, [%__gs_he+{state}], {STATE_LIVE}, {STATE_FREED};\n\
         \tsetp.eq.u32 %__gs_hbad, %__gs_hn, {STATE_FREED};\n\
         \tmov.u32 %__gs_hk, {CODE_DOUBLE_FREE};\n\
         \tor.b64 %__gs_hid, %__gs_hb, {BLOCK_TAG:#x}U;\n\
         \tmembar.gl;\n\
         \tbra.uni {done};\n\
         {search}:\n\
         \tmov.u32 %__gs_hk, {CODE_INVALID_FREE};\n\
         \tand.b64 %__gs_hv, %__gs_hb, -16;\n\
         \tmov.u32 %__gs_hm, 0;\n\
         {head}:\n\
         {lookup_v}\
         \tsetp.eq.u64 %__gs_hq, %__gs_he, 0;\n\
         \t@%__gs_hq bra {next};\n\
         \tld.volatile.global.u32 %__gs_hn, [%__gs_he+{state}];\n\
         \tsetp.ne.u32 %__gs_hq, %__gs_hn, {STATE_LIVE};\n\
         \t@%__gs_hq bra {next};\n\
         \tld.global.u64 %__gs_hs, [%__gs_he+{size}];\n\
         \tsub.s64 %__gs_hc, %__gs_hb, %__gs_hv;\n\
         \tsetp.lt.u64 %__gs_hq, %__gs_hc, %__gs_hs;\n\
         \t@%__gs_hq bra {found};\n\
         {next}:\n\
         \tsub.s64 %__gs_hv, %__gs_hv, 16;\n\
         \tadd.u32 %__gs_hm, %__gs_hm, 1;\n\
         \tsetp.lt.u32 %__gs_hq, %__gs_hm, {SEARCH_STEPS};\n\
         \t@%__gs_hq bra {head};\n\
         \tand.b64 %__gs_hc, %__gs_hb, 15;\n\
         \tsetp.ne.u64 %__gs_hbad, %__gs_hc, 0;\n\
         \tmov.b64 %__gs_hid, 0;\n\
         \tbra.uni {done};\n\
         {found}:\n\
         \tmov.pred %__gs_hbad, 1;\n\
         \tor.b64 %__gs_hid, %__gs_hv, {BLOCK_TAG:#x}U;\n\
         {done}:\n",
        lookup = lookup("%__gs_hb", label),
        lookup_v = lookup("%__gs_hv", label),
        size = ENTRY_SIZE.offset,
        state = ENTRY_STATE.offset,
    )
}

/// One error record for a bad free (when `%__gs_hbad`): as `records` writes them, with
/// the pointer as address, size 0, global space (and the access field a read's: the
/// runtime tells a free by its code).
fn free_record(line: u32, function: u32, label: &mut dyn FnMut() -> String) -> String {
    let skip = label();
    format!(
        "\t@!%__gs_hbad bra {skip};\n\
         {claim}\
         \tst.global.u64 [%__gs_r+{address}], %__gs_hb;\n\
         \tst.global.u64 [%__gs_r+{allocation}], %__gs_hid;\n\
         {kernel}\
         \tst.global.u32 [%__gs_r+{code}], %__gs_hk;\n\
         \tst.global.u32 [%__gs_r+{size}], 0;\n\
         \tst.global.u32 [%__gs_r+{ptx_line}], {line};\n\
         {where}\
         \tst.global.u32 [%__gs_r+{space}], {global};\n\
         \tst.global.u32 [%__gs_r+{access}], {read};\n\
         {skip}:\n",
        claim = claim_text("%__gs_hq", &skip),
        address = field(record::ADDRESS),
        allocation = field(record::ALLOCATION),
        kernel = kernel_text(&function.to_string()),
        code = field(record::CODE),
        size = field(record::SIZE),
        ptx_line = field(record::PTX_LINE),
        where = super::records::record_where(),
        space = field(record::SPACE),
        global = record::SPACE_GLOBAL,
        access = field(record::ACCESS),
        read = record::ACCESS_READ,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = ".version 9.0\n.target sm_90\n.address_size 64\n\
        .extern .func (.param .b64 func_retval0) malloc(.param .b64 malloc_param_0);\n\
        .extern .func free(.param .b64 free_param_0);\n";

    fn calls(body: &str) -> Calls {
        let src = format!("{HEAD}.visible .entry k(.param .u64 k_p)\n{{\n\t.reg .b64 %rd<4>;\n{body}\tret;\n}}\n");
        let m = gpusan_ptx::parse(&src).unwrap();
        let Some(Item::Function(f)) = m.items.iter().find(|i| matches!(i, Item::Function(f) if f.body.is_some()))
        else {
            unreachable!()
        };
        Calls::find(&Cfg::build(f).unwrap(), f)
    }

    const MALLOC: &str = "\t{\n\t.param .b64 param0;\n\tst.param.b64 [param0+0], 60;\n\t.param .b64 retval0;\n\
        \tcall.uni (retval0), malloc, (param0);\n\tld.param.b64 %rd1, [retval0+0];\n\t}\n";

    #[test]
    fn nvcc_call_sequences_are_recognized() {
        let free = "\t{\n\t.param .b64 param0;\n\tst.param.b64 [param0+0], %rd1;\n\tcall.uni free, (param0);\n\t}\n";
        let c = calls(&format!("{MALLOC}{free}"));
        assert_eq!((c.mallocs.len(), c.frees.len(), c.unrecognized), (1, 1, 0));
        assert!(matches!(c.mallocs[0].size, Operand::Int(_)));
        assert_eq!(c.mallocs[0].ret, "retval0");
        assert!(matches!(&c.frees[0].ptr, Operand::Name(n) if *n == "%rd1"));
        assert_eq!(c.results.len(), 1, "the ld.param of the result is a malloc root");
    }

    #[test]
    fn free_of_null_constant_and_unknown_sequences_are_left_alone() {
        let null = "\t{\n\t.param .b64 param0;\n\tst.param.b64 [param0+0], 0;\n\tcall.uni free, (param0);\n\t}\n";
        let c = calls(null);
        assert!(c.is_empty() && c.unrecognized == 0);
        // No store to the argument before the call: not nvcc's sequence.
        let bare = "\t{\n\t.param .b64 param0;\n\tcall.uni free, (param0);\n\t}\n";
        let c = calls(bare);
        assert!(c.is_empty());
        assert_eq!(c.unrecognized, 1);
    }

    #[test]
    fn only_modules_calling_the_heap_get_a_table() {
        let with =
            gpusan_ptx::parse(&format!("{HEAD}.visible .entry k()\n{{\n\t.reg .b64 %rd<2>;\n{MALLOC}\tret;\n}}\n"))
                .unwrap();
        assert!(module_uses_heap(&with));
        // Declaring malloc without calling it needs no table.
        let without = gpusan_ptx::parse(&format!("{HEAD}.visible .entry k()\n{{\n\tret;\n}}\n")).unwrap();
        assert!(!module_uses_heap(&without));
    }

    /// A bad free's record is a whole record: every field stored once, where the ABI puts it.
    #[test]
    fn a_bad_free_fills_every_field_of_the_record() {
        use super::super::records::{every_field, stored_offsets};
        let text = free_record(12, 3, &mut || "$__gs_L1".to_string());
        let (mut got, mut want) = (stored_offsets(&text), every_field());
        got.sort();
        want.sort();
        assert_eq!(got, want, "{text}");
        let code = format!("st.global.u32 [%__gs_r+{}], %__gs_hk;", field(record::CODE));
        assert!(text.contains(&code), "{text}");
    }

    #[test]
    fn the_table_stays_well_under_16_mib() {
        let d = table_decl();
        let bytes = d.array[0].unwrap();
        assert_eq!(bytes, HEADER_BYTES + CAPACITY * ENTRY_BYTES);
        assert!(bytes <= 4 << 20, "{bytes} bytes");
    }
}
