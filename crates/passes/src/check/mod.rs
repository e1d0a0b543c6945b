//! `check`: spatial and temporal safety of global memory, checked against the
//! runtime's allocation table through the pointer each address was derived from (its
//! *root*), as cuCatch's base pointer analysis and GPUArmor's root pointer analysis do.
//!
//! # What the pass adds
//!
//! Once per module, the three variables of the device ABI (`crates/runtime/src/device_abi.rs`),
//! which the runtime sets after loading the module and which stay 0 when it does not:
//!
//! ```ptx
//! .visible .global .align 8 .u64 __gpusan_table;   // device address of the allocation table
//! .visible .global .align 8 .u64 __gpusan_errors;  // device address of the error buffer
//! .visible .global .align 4 .u32 __gpusan_module;  // this module's number
//! ```
//!
//! Per function:
//!
//! 1. **Root pointer analysis** on reaching definitions ([`gpusan_ptx::dataflow`]). From
//!    the address register of each global or generic access the pass walks back through
//!    pointer arithmetic: `mov` of a register, `add` (every register operand), `sub` (the
//!    minuend), `mad`/`mad.wide` (the addend), `selp` (both values), `cvta.to.global` and
//!    `cvta.global` of a register. Operands computed by integer arithmetic (`mul`,
//!    `mul.wide`, `shl`, `cvt`, `and`, immediates, special registers…) are offsets, not
//!    pointers, and end their branch of the walk. Every other definition is a root: `ld`
//!    of a kernel parameter or of a pointer from memory, `call` results, `mov` from a
//!    symbol, `cvta` of a symbol or from another window, a `.reg` parameter of a `.func`,
//!    anything not listed above.
//! 2. **LOADMETA**, once per root, right after the instruction defining it (at the top of
//!    the body for a `.reg` parameter): a probe of the lookup cache below the table and,
//!    when it misses, a binary search of the table for the root's value, exactly
//!    `device_lookup` of `crates/runtime/src/registry.rs` (see [`loadmeta`]), leaving the entry's
//!    base, `base + size`, id and state in registers of that root, and a predicate saying
//!    whether an entry was found. A table address of 0 (the module runs without gpusan)
//!    finds nothing. These predicates are also cleared at the top of the body, so a path
//!    that reaches an access without running the root's definition finds nothing.
//!
//!    **Pointers one past the end.** A root equal to the base of an entry whose neighbour
//!    below ends exactly there may be the neighbour's end pointer (`p + n`, as loops and
//!    `std::end` make), not a pointer to the entry: cuCatch pads allocations so this
//!    cannot happen; the runtime does not, so the lookup also keeps a *low* bound, the
//!    neighbour's base in that case and the entry's base otherwise, and accesses between
//!    the two are not judged.
//! 3. **MEMCHECK** before each checked access, with `a` = address + offset and `w` the
//!    access's constant width: bad when an entry was found and `a < low` or
//!    `a + w > base + size` (`CODE_OUT_OF_BOUNDS`), or `a >= base` and the entry is not
//!    live (`CODE_USE_AFTER_FREE`; the code is that whenever the entry is not live); a
//!    generic access is judged only when `isspacep.global` holds for `a`. A bad access writes an `ErrorRecord` (the sequence of
//!    `bench/injection/abi_test.cpp`) and is skipped: its guard becomes "not bad" (and its
//!    old guard, composed with `and.pred`).
//!
//! Outside device-heap modules the verdicts of LOADMETA are folded into the bounds
//! (`Layout::Folded`): a root found nowhere gets `[0, 2^64)`, a freed one the limit
//! `base`, so MEMCHECK is `a < low || a + w > lim`; the slow path that writes the record
//! sits after the function's last `ret`. Checks are grouped per address definition
//! (`groups`) and straight runs of grouped accesses get two versions (`spans`). Innermost
//! loops whose accesses walk induction variables by a constant stride (or stay put) get two
//! versions too (`loops`): the preheader checks each access's range over all iterations
//! once and picks an unchecked clone of the loop when every range is in bounds.
//!
//! A root in no entry of the table (a module variable, memory gpusan did not see
//! allocated, a shared or local window) is never judged: the rule is zero false positives.
//!
//! Modules that call `malloc` or `free` also get a device-heap table and checks around
//! those calls; roots can then be heap blocks (`check/heap.rs`).
//!
//! # Shared and local memory ([`onchip`])
//!
//! Shared and local accesses, and generic accesses whose address leads back to one shared
//! or local variable, are checked against that variable's bounds instead: static arrays
//! against their declared size, dynamic shared memory against `%dynamic_smem_size`, nvcc's
//! frame `__local_depotN` as a whole (`CODE_SHARED_OUT_OF_BOUNDS`, `CODE_LOCAL_OUT_OF_BOUNDS`;
//! no table lookup). In kernels, local and generic accesses through a call result or a
//! loaded pointer must also stay inside the kernel's frame (`CODE_LOCAL_USE_AFTER_SCOPE`:
//! a returned function's local address). See the submodule for what it follows and what it
//! leaves.
//!
//! # Reactions
//!
//! [`CheckConfig::reaction`]: [`Reaction::Report`] writes the record and skips the access;
//! [`Reaction::Abort`] writes it and traps.
//!
//! # Counting (measurement builds)
//!
//! [`CheckConfig::counting`]: [`Counting::Dynamic`] also declares four `.u64` counters
//! (`__gpusan_n_access`, `__gpusan_n_check`, `__gpusan_n_group`, `__gpusan_n_span`) and
//! increments them where accesses and checks run, so a run tells what fraction of the
//! checks a naive checker makes the optimizations remove (`counting`; the runtime sums them
//! into the report's `check_counts`). Nothing else in the code changes.
//!
//! # Several roots
//!
//! A pointer merged at a branch join or a loop head (`p = c ? a : b`, a list walked
//! through loaded pointers) reaches its access from several roots. As GPUArmor's "BB1/BB2"
//! moves do, the metadata then travels with the value: each register on the way from the
//! roots to the address gets shadow metadata registers (numbered after the roots'), and
//! right after each of its definitions a move sets them ([`Shadow`]: the root's own after a
//! root, the operand's after pointer arithmetic, picked like the value after `selp`, found
//! nowhere after an integer; after an `add` of two values that may each be a pointer, a
//! pointer plus a 64-bit offset loaded from memory, the one the table knows); the access is
//! checked against the address's shadow. Left unchecked: modules using the device heap.
//!
//! # What is left unchecked
//!
//! Counted per function in [`CheckFunction`]: accesses whose address has several roots and
//! no one shadow (see below), no root (an address that is
//! a symbol or comes only from integer arithmetic), a width not known from the instruction
//! (bulk copies, `wmma`), and accesses in other state spaces (param, const, textures),
//! shared or local accesses bound to no one variable, and accesses that move no data
//! (prefetches).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt::Write as _;

use gpusan_ptx::ast::{Function, Item, Linkage, Name, Operand, Span, StateSpace, Statement, VarDecl};
use gpusan_ptx::cfg::{Cfg, InstId};
use gpusan_ptx::dataflow::{reaching_defs, BitSet, DefSite, ReachingDefs, RegId};
use gpusan_ptx::semantics::{memory_accesses, AccessKind, Space};
use gpusan_ptx::Module;

use crate::{FunctionReport, Pass, PassError, PassReport};

mod counting;
mod groups;
mod heap;
mod spans;
pub use heap::{
    CODE_DOUBLE_FREE, CODE_INVALID_FREE, HEAP_BLOCK_TAG, HEAP_CAPACITY, HEAP_ENTRY_BYTES, HEAP_HEADER_BYTES,
    HEAP_SYMBOL, STATE_FREED,
};
mod insert;
mod loops;
mod onchip;
mod snippet;

pub use counting::{Counting, COUNTER_SYMBOLS, N_ACCESS_SYMBOL, N_CHECK_SYMBOL, N_GROUP_SYMBOL, N_SPAN_SYMBOL};
pub use onchip::{CODE_LOCAL_OUT_OF_BOUNDS, CODE_LOCAL_USE_AFTER_SCOPE, CODE_SHARED_OUT_OF_BOUNDS};

/// `device_abi::TABLE_SYMBOL`.
pub const TABLE_SYMBOL: &str = "__gpusan_table";
/// `device_abi::ERRORS_SYMBOL`.
pub const ERRORS_SYMBOL: &str = "__gpusan_errors";
/// `device_abi::MODULE_SYMBOL`.
pub const MODULE_SYMBOL: &str = "__gpusan_module";

/// `device_abi::CODE_OUT_OF_BOUNDS`.
pub const CODE_OUT_OF_BOUNDS: u32 = 1;
/// `device_abi::CODE_USE_AFTER_FREE`.
pub const CODE_USE_AFTER_FREE: u32 = 2;

/// `DeviceEntry::LIVE`: state bits (0–7 of `flags`) of a live allocation.
pub const STATE_LIVE: u32 = 1;

/// Prefix of every register the pass adds (`%__gs_…`) and of its labels (`$__gs_…`); the
/// module must not use it.
const PREFIX: &str = "__gs_";

/// What a checked access does once it is found bad.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Reaction {
    /// Write the error record and skip the access; the kernel goes on (and may report more).
    #[default]
    Report,
    /// Write the error record, then `trap`: the kernel stops at its first error, where a
    /// debugger (cuda-gdb) shows it. The record is made visible system-wide first
    /// (`membar.sys`) for a runtime that can still read it.
    Abort,
}

impl Reaction {
    /// By the name the command line and `GPUSAN_CHECK_REACTION` use: `report`, `abort`.
    pub fn from_name(name: &str) -> Option<Reaction> {
        match name {
            "report" => Some(Reaction::Report),
            "abort" => Some(Reaction::Abort),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Reaction::Report => "report",
            Reaction::Abort => "abort",
        }
    }
}

/// How the pass instruments.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CheckConfig {
    pub reaction: Reaction,
    /// Measurement builds: count at run time the checks a naive checker would make and
    /// those that ran (`counting`).
    pub counting: Counting,
}

/// The pass as a [`Pass`] object, for [`crate::instrument`], with the default
/// [`CheckConfig`]; [`CheckWith`] takes another.
#[derive(Debug, Clone, Default)]
pub struct Check;

impl Pass for Check {
    fn name(&self) -> &'static str {
        "check"
    }

    fn run(&self, module: &mut Module) -> Result<PassReport, PassError> {
        run(module, None).map(|r| r.to_pass_report())
    }

    fn run_with_source(&self, module: &mut Module, src: &str) -> Result<PassReport, PassError> {
        run(module, Some(src)).map(|r| r.to_pass_report())
    }
}

/// The pass with a configuration.
#[derive(Debug, Clone, Default)]
pub struct CheckWith(pub CheckConfig);

impl Pass for CheckWith {
    fn name(&self) -> &'static str {
        "check"
    }

    fn run(&self, module: &mut Module) -> Result<PassReport, PassError> {
        run_with(module, None, &self.0).map(|r| r.to_pass_report())
    }

    fn run_with_source(&self, module: &mut Module, src: &str) -> Result<PassReport, PassError> {
        run_with(module, Some(src), &self.0).map(|r| r.to_pass_report())
    }
}

/// What the pass did, function by function, in module order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CheckReport {
    pub functions: Vec<CheckFunction>,
}

impl CheckReport {
    pub fn to_pass_report(&self) -> PassReport {
        PassReport {
            functions: self
                .functions
                .iter()
                .map(|f| FunctionReport {
                    name: f.name,
                    kind: f.kind,
                    sites: f.checked + f.shared + f.local + f.scope,
                    inserted: f.inserted,
                })
                .collect(),
        }
    }
}

/// One function with a body. Counts are of memory accesses (one instruction may make
/// several: a copy reads one place and writes another).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckFunction {
    pub name: Name,
    pub kind: gpusan_ptx::ast::FunctionKind,
    /// Index among the module's defined functions sorted by name: the low 16 bits of
    /// `ErrorRecord::kernel`.
    pub index: u32,
    /// Global and generic accesses checked against the allocation table.
    pub checked: u32,
    /// Accesses checked against a shared memory variable's bounds (shared, or generic
    /// into the shared window).
    pub shared: u32,
    /// Accesses checked against a local variable's bounds (nvcc's frame `__local_depotN`).
    pub local: u32,
    /// Accesses checked for use after scope: local or generic accesses in a kernel through
    /// a call result or a loaded pointer, which must stay in the kernel's frame (`onchip`).
    pub scope: u32,
    /// Roots looked up (one LOADMETA each).
    pub roots: u32,
    /// Left unchecked: the address has several roots and no one shadow (a definition adds
    /// two pointers, or the module uses the device heap).
    pub multi_root: u32,
    /// Checked although the address has several roots: the metadata travels with the value
    /// along each path in shadow registers ([`Shadow`]); counted in `checked` too.
    pub carried: u32,
    /// Left unchecked: the address has no root (a symbol, integer arithmetic only).
    pub no_root: u32,
    /// Left unchecked: the width is not a constant.
    pub unknown_width: u32,
    /// Left unchecked: shared and local accesses bound to no one variable, param, const
    /// or texture accesses, and prefetches.
    pub other: u32,
    /// Checked accesses whose own check runs only when their group's range check fails
    /// (cuCatch §4.6.1–4.6.2; see `groups`): the checks the optimization removes from the
    /// common path.
    pub grouped: u32,
    /// Range checks added for those groups.
    pub group_checks: u32,
    /// Roots whose metadata one thread per block looks up for all (kernel parameters).
    pub block_roots: u32,
    /// Straight runs of grouped accesses given two versions (`spans`): one branch picks the
    /// unchecked original when every group's range check passed.
    pub spans: u32,
    /// Shared and local accesses at a constant address inside their variable (`[sym+8]`):
    /// counted in `shared`/`local`, and left without a check because none can fail.
    pub static_in_bounds: u32,
    /// Innermost loops given two versions (`loops`): one branch in the preheader picks an
    /// unchecked clone when the whole range of every access over all iterations is in bounds.
    pub loops_versioned: u32,
    /// Checked accesses in those loops, covered by the preheader's range checks.
    pub loop_hoisted: u32,
    /// Instructions added.
    pub inserted: u32,
    /// Device-heap calls (`malloc`, `free`) instrumented (`check/heap.rs`).
    pub heap_calls: u32,
}

impl CheckFunction {
    pub fn unchecked(&self) -> u32 {
        self.multi_root + self.no_root + self.unknown_width + self.other
    }
}

/// Instruments `module` with the default [`CheckConfig`]. `src`, the text it was parsed
/// from, gives each access's PTX line for the error records (0 without it).
pub fn run(module: &mut Module, src: Option<&str>) -> Result<CheckReport, PassError> {
    run_with(module, src, &CheckConfig::default())
}

/// [`run`] with a configuration.
pub fn run_with(module: &mut Module, src: Option<&str>, config: &CheckConfig) -> Result<CheckReport, PassError> {
    let report = instrument_module(module, src, config);
    snippet::end_module();
    report
}

fn instrument_module(module: &mut Module, src: Option<&str>, config: &CheckConfig) -> Result<CheckReport, PassError> {
    check_unused(module, config.counting)?;
    let targets: Vec<&str> = module
        .items
        .iter()
        .filter_map(|i| match i {
            Item::Target(t) => Some(t.iter().map(|n| n.as_str())),
            _ => None,
        })
        .flatten()
        .collect();
    let emit = counting::Emit::new(config.counting, &targets);
    let line_starts: Vec<usize> = match src {
        Some(s) => std::iter::once(0).chain(s.match_indices('\n').map(|(i, _)| i + 1)).collect(),
        None => Vec::new(),
    };
    let line_of = |span: Span| -> u32 {
        if span.is_none() || line_starts.is_empty() {
            0
        } else {
            line_starts.partition_point(|&s| s <= span.start as usize) as u32
        }
    };

    let mut defined: Vec<Name> = module
        .items
        .iter()
        .filter_map(|i| match i {
            Item::Function(f) if f.body.is_some() => Some(f.name),
            _ => None,
        })
        .collect();
    defined.sort_by(|a, b| a.as_str().cmp(b.as_str()));

    let facts = ModuleFacts::of(module);
    let windows = onchip::Windows::of_module(module);
    let mut report = CheckReport::default();
    for item in &mut module.items {
        let Item::Function(f) = item else { continue };
        if f.body.is_none() {
            continue;
        }
        let index = defined.iter().position(|n| *n == f.name).unwrap_or(0) as u32;
        let r = instrument_function(f, index, &line_of, config, emit, &windows, &facts)?;
        if r.inserted > 0 {
            keep_launchable(f);
        }
        report.functions.push(r);
    }

    let at = module
        .items
        .iter()
        .position(|i| !matches!(i, Item::Version { .. } | Item::Target(_) | Item::AddressSize(_)))
        .unwrap_or(module.items.len());
    let vars = [(TABLE_SYMBOL, "u64", 8), (ERRORS_SYMBOL, "u64", 8), (MODULE_SYMBOL, "u32", 4)];
    for (k, (name, ty, align)) in vars.into_iter().enumerate() {
        module.items.insert(at + k, Item::Var(abi_var(name, ty, align)));
    }
    let mut next = at + vars.len();
    if config.counting.is_on() {
        for name in COUNTER_SYMBOLS {
            module.items.insert(next, Item::Var(abi_var(name, "u64", 8)));
            next += 1;
        }
    }
    if facts.uses_heap {
        module.items.insert(next, Item::Var(heap::table_decl()));
    }
    Ok(report)
}

/// What the block-wide lookup of kernel-parameter roots needs to know of the module.
struct ModuleFacts {
    /// The module declares dynamic shared memory: its kernels may ask for all the shared
    /// memory a block can have, and the few bytes the lookup adds could make their launch fail.
    dynamic_shared: bool,
    /// Static shared bytes declared anywhere in the module (an upper bound per kernel);
    /// `None` when a size is not known.
    static_shared_bytes: Option<u64>,
    /// The module calls `malloc`/`free`: roots may be heap blocks, whose state each check
    /// re-reads (`check/heap.rs`), so neither optimization applies.
    uses_heap: bool,
}

/// Static shared memory the pass may add per kernel, and the static total it stays under
/// (48 KiB is the most a block may declare statically).
const BLOCK_META_BYTES: u64 = 32;
const MAX_BLOCK_ROOTS: usize = 16;
const STATIC_SHARED_LIMIT: u64 = 40 * 1024;

impl ModuleFacts {
    fn of(module: &Module) -> ModuleFacts {
        fn bytes(v: &VarDecl) -> Option<u64> {
            let elem: u64 = match v.ty.as_str() {
                "pred" => return None,
                t => t.get(1..)?.parse::<u64>().ok()? / 8,
            };
            let mut n = elem.max(1) * u64::from(v.vector.unwrap_or(1));
            for d in &v.array {
                n = n.checked_mul((*d)?)?;
            }
            Some(n)
        }
        fn walk(stmts: &[Statement], total: &mut Option<u64>) {
            for s in stmts {
                match s {
                    Statement::Decl(d) if d.space.is_shared() => {
                        *total = total.zip(bytes(d)).map(|(a, b)| a + b);
                    }
                    Statement::Block(b) => walk(b, total),
                    _ => {}
                }
            }
        }
        let mut facts = ModuleFacts {
            dynamic_shared: false,
            static_shared_bytes: Some(0),
            uses_heap: heap::module_uses_heap(module),
        };
        for item in &module.items {
            match item {
                Item::Var(v) if v.space.is_shared() => {
                    if v.linkage.contains(&Linkage::Extern) || v.array.iter().any(Option::is_none) {
                        facts.dynamic_shared = true;
                    } else {
                        facts.static_shared_bytes = facts.static_shared_bytes.zip(bytes(v)).map(|(a, b)| a + b);
                    }
                }
                Item::Function(f) => walk(f.body.as_deref().unwrap_or_default(), &mut facts.static_shared_bytes),
                _ => {}
            }
        }
        facts
    }
}

/// The most threads a block can have: what `.maxntid` promises for every kernel.
const MAX_BLOCK_THREADS: u64 = 1024;

/// The checks add registers; a kernel the program launches with 1024 threads and that
/// natively fit in 64 registers could then fail to launch (`CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES`,
/// seen on the H100 with a 32×32-tile SGEMM). A kernel that says nothing about its block size
/// or registers gets `.maxntid 1024, 1, 1`, as `__launch_bounds__(1024)` writes it: true of
/// every launch, and it makes ptxas stay within 64 registers. `.maxnreg 64` would too, but
/// ptxas takes a register cap as a budget to fill: the instrumented SGEMM used 55 registers
/// under it and 32 under `.maxntid` (half the blocks per SM). One with
/// `.maxntid`/`.reqntid`/`.maxnreg` already tells ptxas its limits.
fn keep_launchable(f: &mut Function) {
    if f.kind != gpusan_ptx::ast::FunctionKind::Entry {
        return;
    }
    let said = f.attributes.iter().any(|a| matches!(a.name.as_str(), "maxntid" | "reqntid" | "maxnreg"));
    if !said {
        use gpusan_ptx::ast::AttrValue::Int;
        f.attributes.push(gpusan_ptx::ast::Attribute {
            name: "maxntid".into(),
            values: vec![Int(MAX_BLOCK_THREADS), Int(1), Int(1)],
        });
    }
}

fn abi_var(name: &str, ty: &str, align: u32) -> VarDecl {
    VarDecl {
        linkage: vec![Linkage::Visible],
        // The table's address is read at every lookup, which the constant cache serves
        // when streaming kernels have long evicted it from L1; it changes only between
        // launches (the runtime writes it like `cudaMemcpyToSymbol` does a `__constant__`).
        space: if name == TABLE_SYMBOL { StateSpace::Const } else { StateSpace::Global },
        attributes: Vec::new(),
        align: Some(align),
        vector: None,
        ty: ty.into(),
        name: name.into(),
        count: None,
        array: Vec::new(),
        init: None,
        span: Span::NONE,
    }
}

/// Refuses a module already declaring one of the ABI variables (instrumented PTX, or a
/// clash), or using the pass's name prefix.
fn check_unused(module: &Module, counting: Counting) -> Result<(), PassError> {
    let mut abi = vec![TABLE_SYMBOL, ERRORS_SYMBOL, MODULE_SYMBOL, HEAP_SYMBOL];
    if counting.is_on() {
        abi.extend(COUNTER_SYMBOLS);
    }
    let taken = |name: &str| {
        PassError::new(format!(
            "`{name}` is already declared, and it is a variable of gpusan's device ABI this pass adds; \
             if this is instrumented PTX, instrument the original instead"
        ))
    };
    for item in &module.items {
        match item {
            Item::Var(v) if abi.contains(&v.name.as_str()) => return Err(taken(&v.name).at(v.span)),
            Item::Alias { alias, .. } if abi.contains(&alias.as_str()) => return Err(taken(alias)),
            Item::Function(f) => {
                if abi.contains(&f.name.as_str()) {
                    return Err(taken(&f.name).at(f.span));
                }
                let mut bad = None;
                visit_names(f.body.as_deref().unwrap_or_default(), &mut |n, span| {
                    let bare = n.trim_start_matches(['%', '$']);
                    if bare.starts_with(PREFIX) || abi.contains(&n) {
                        bad.get_or_insert((n.to_string(), span));
                    }
                });
                if let Some((n, span)) = bad {
                    return Err(PassError::new(format!(
                        "`{n}` is declared in a function body; the names the check pass adds start with \
                         `{PREFIX}` (after `%` or `$`) and the ABI variables must not be shadowed"
                    ))
                    .at(span)
                    .in_function(f.name));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

fn visit_names(stmts: &[Statement], f: &mut impl FnMut(&str, Span)) {
    for s in stmts {
        match s {
            Statement::Decl(d) => f(&d.name, d.span),
            Statement::Label(l, span) => f(l, *span),
            Statement::Block(b) => visit_names(b, f),
            _ => {}
        }
    }
}

/// A root: the definition of one register whose value the accesses derive from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Root {
    /// A `.reg` parameter, on entry.
    Entry(RegId),
    Inst(InstId, RegId),
}

/// How a definition passes a pointer on.
enum Def {
    /// Pointer arithmetic: the pointer is one of these operand indices.
    Arith(&'static [usize]),
    /// An integer: no pointer flows through it.
    Offset,
    /// Anything else: the value is a root.
    Root,
}

fn classify(inst: &gpusan_ptx::ast::Instruction) -> Def {
    let reg_at = |k: usize| matches!(inst.operands.get(k), Some(Operand::Name(n)) if n.starts_with('%'));
    match inst.opcode.as_str() {
        "mov" => match inst.operands.get(1) {
            Some(Operand::Name(n)) if n.starts_with('%') => {
                // A register, or a special register (`%tid.x`, `%clock64`): an integer.
                if n.contains('.') || gpusan_ptx::semantics::is_predefined(n) {
                    Def::Offset
                } else {
                    Def::Arith(&[1])
                }
            }
            Some(Operand::Int(_)) => Def::Offset,
            _ => Def::Root,
        },
        "add" => Def::Arith(&[1, 2]),
        "sub" => Def::Arith(&[1]),
        "mad" => Def::Arith(&[3]),
        "selp" => Def::Arith(&[1, 2]),
        "cvta" => {
            let mut m = inst.modifiers();
            let global = match m.next() {
                Some("to") => m.next() == Some("global"),
                Some("global") => true,
                _ => false,
            };
            if global && reg_at(1) {
                Def::Arith(&[1])
            } else {
                Def::Root
            }
        }
        "mul" | "mul24" | "mad24" | "shl" | "shr" | "cvt" | "and" | "or" | "xor" | "not" | "neg" | "div" | "rem"
        | "min" | "max" | "abs" | "popc" | "clz" | "bfe" | "bfi" | "brev" | "prmt" | "setp" | "set" | "sad"
        | "bfind" | "fns" | "shf" | "cnot" | "lop3" => Def::Offset,
        _ => Def::Root,
    }
}

/// The root pointer analysis of one function.
struct Roots<'a> {
    cfg: &'a Cfg,
    rd: ReachingDefs<'a>,
    insts: Vec<&'a gpusan_ptx::ast::Instruction>,
    before: FastMap<InstId, BitSet>,
    /// The last instruction `before` got a fact for: the next one in its block carries
    /// that fact on rather than replaying the block (kernels have blocks of thousands of
    /// instructions with an access every few).
    last: Option<InstId>,
}

impl Roots<'_> {
    fn reaching(&mut self, i: InstId, reg: RegId) -> Vec<DefSite> {
        if !self.before.contains_key(&i) {
            let fact = match self.last {
                Some(j) if j <= i && self.cfg.block_of(j) == self.cfg.block_of(i) => {
                    let mut fact = self.before[&j].clone();
                    self.rd.advance(&mut fact, j, i);
                    fact
                }
                _ => self.rd.before(i),
            };
            self.before.insert(i, fact);
            self.last = Some(i);
        }
        let rd = &self.rd;
        let before = &self.before[&i];
        let a = rd.analysis();
        a.defs_of(reg).iter().filter(|&&d| before.contains(d as usize)).map(|&d| a.defs()[d as usize].site).collect()
    }

    fn resolve(&self, i: InstId, name: Name) -> Option<RegId> {
        self.rd.analysis().registers().resolve(self.cfg, self.cfg.inst_scope(i), name)
    }

    /// The roots of the value of `reg` as instruction `i` reads it.
    fn roots(&mut self, i: InstId, reg: RegId) -> BTreeSet<Root> {
        let mut out = BTreeSet::new();
        let mut seen: HashSet<_, std::hash::BuildHasherDefault<ahash::AHasher>> = HashSet::default();
        let mut work = vec![(i, reg)];
        while let Some((at, reg)) = work.pop() {
            for site in self.reaching(at, reg) {
                let d = match site {
                    DefSite::Entry => {
                        out.insert(Root::Entry(reg));
                        continue;
                    }
                    DefSite::Inst(d) => d,
                };
                if !seen.insert((d, reg)) {
                    continue;
                }
                let inst = self.insts[d.index()];
                match classify(inst) {
                    Def::Offset => {}
                    Def::Root => {
                        out.insert(Root::Inst(d, reg));
                    }
                    Def::Arith(ops) => {
                        for &k in ops {
                            if let Some(Operand::Name(n)) = inst.operands.get(k) {
                                if let Some(r) = self.resolve(d, *n) {
                                    work.push((d, r));
                                }
                            }
                        }
                    }
                }
            }
        }
        out
    }
}

/// What a definition on the way from several roots to an address does to the shadow
/// metadata of the register it defines (GPUArmor's "BB1/BB2" moves: the metadata travels
/// with the value along each path, so at the merge it is the one of the root the value
/// came from).
#[derive(Debug, Clone, PartialEq)]
enum Shadow {
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

/// The shadow moves of one multi-root address: after each listed definition, what the
/// defined register's shadow becomes; and the roots involved (defined in the function or
/// on entry).
struct Carriers {
    moves: Vec<(InstId, RegId, Shadow)>,
    roots: BTreeSet<Root>,
}

/// An operand a definition may read a pointer from: its index, register, and the
/// definitions of that register reaching it.
type PointerOperand = (usize, RegId, Vec<DefSite>);

impl Roots<'_> {
    /// The moves that carry metadata to the value of `reg` at instruction `i` through every
    /// definition it may come from; `None` where the moves cannot follow (a guarded `selp`
    /// or two-pointer `add`, or arithmetic mixing pointers some other way). The walk is
    /// [`Roots::roots`]'s, kept as a graph: multi-root accesses are rare, so the walk every
    /// access takes stays the cheap one.
    fn carriers(&mut self, i: InstId, reg: RegId) -> Option<Carriers> {
        // Every definition that may reach a pointer use on the way, with the registers it
        // reads as pointers, found by walking back from the address.
        let mut nodes: BTreeMap<(InstId, RegId), Vec<PointerOperand>> = BTreeMap::new();
        let mut work = vec![(i, reg)];
        let mut seen_use: HashSet<(InstId, RegId)> = HashSet::new();
        while let Some((at, r)) = work.pop() {
            if !seen_use.insert((at, r)) {
                continue;
            }
            for site in self.reaching(at, r) {
                let DefSite::Inst(d) = site else { continue };
                if nodes.contains_key(&(d, r)) {
                    continue;
                }
                let inst = self.insts[d.index()];
                let mut ops = Vec::new();
                if let Def::Arith(ks) = classify(inst) {
                    for &k in ks {
                        if let Some(Operand::Name(n)) = inst.operands.get(k) {
                            if let Some(s) = self.resolve(d, *n) {
                                let sites = self.reaching(d, s);
                                ops.push((k, s, sites));
                                work.push((d, s));
                            }
                        }
                    }
                }
                nodes.insert((d, r), ops);
            }
        }
        // Which definitions carry a pointer: roots, and arithmetic on a carried register
        // (a fixpoint: pointer increments in loops are cycles).
        let mut carrier: HashMap<(InstId, RegId), bool> = HashMap::new();
        for &(d, r) in nodes.keys() {
            carrier.insert((d, r), matches!(classify(self.insts[d.index()]), Def::Root));
        }
        let carries = |carrier: &HashMap<(InstId, RegId), bool>, s: RegId, sites: &[DefSite]| {
            sites.iter().any(|site| match site {
                DefSite::Entry => true,
                DefSite::Inst(d) => carrier.get(&(*d, s)).copied().unwrap_or(false),
            })
        };
        loop {
            let mut changed = false;
            for (&(d, r), ops) in &nodes {
                if carrier[&(d, r)] {
                    continue;
                }
                if ops.iter().any(|(_, s, sites)| carries(&carrier, *s, sites)) {
                    carrier.insert((d, r), true);
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        // The moves, for the definitions that reach a use as a pointer: the address, and
        // the pointer operands of the carrying arithmetic on the way (not its integers).
        let mut moves = Vec::new();
        let mut roots = BTreeSet::new();
        let mut done: HashSet<(InstId, RegId)> = HashSet::new();
        let first = self.reaching(i, reg);
        let mut todo: Vec<(RegId, Vec<DefSite>)> = vec![(reg, first)];
        while let Some((r, sites)) = todo.pop() {
            for site in sites {
                let d = match site {
                    DefSite::Entry => {
                        roots.insert(Root::Entry(r));
                        continue;
                    }
                    DefSite::Inst(d) => d,
                };
                if !done.insert((d, r)) {
                    continue;
                }
                let inst = self.insts[d.index()];
                let ops = &nodes[&(d, r)];
                let shadow = if !carrier[&(d, r)] {
                    Shadow::Nothing
                } else if matches!(classify(inst), Def::Root) {
                    roots.insert(Root::Inst(d, r));
                    Shadow::Root(Root::Inst(d, r))
                } else {
                    let pointers: Vec<&PointerOperand> =
                        ops.iter().filter(|(_, s, sites)| carries(&carrier, *s, sites)).collect();
                    for (_, s, sites) in &pointers {
                        todo.push((*s, sites.clone()));
                    }
                    let at = |k: usize| pointers.iter().find(|(j, _, _)| *j == k).map(|(_, s, _)| *s);
                    match (inst.opcode.as_str(), pointers.as_slice()) {
                        ("selp", _) => {
                            let Some(Operand::Name(p)) = inst.operands.get(3) else { return None };
                            Shadow::Select(at(1), at(2), *p)
                        }
                        (_, [(_, s, _)]) => Shadow::Copy(*s),
                        ("add", [(_, a, _), (_, b, _)]) => Shadow::Either(*a, *b),
                        _ => return None,
                    }
                };
                moves.push((d, r, shadow));
            }
        }
        Some(Carriers { moves, roots })
    }
}

/// The declared width of each register name, to keep the 64-bit ones (and, for shared
/// addresses, the 32-bit ones): `%rd<N>` declares `%rd0…`. Names declared with different
/// widths in different scopes have none.
#[derive(Default)]
struct RegWidths {
    plain: HashMap<Name, Option<u32>>,
    ranges: HashMap<Name, Option<u32>>,
}

impl RegWidths {
    fn collect(f: &Function) -> RegWidths {
        let mut w = RegWidths::default();
        fn bits(ty: &str) -> Option<u32> {
            match ty {
                "b64" | "u64" | "s64" => Some(64),
                "b32" | "u32" | "s32" => Some(32),
                _ => None,
            }
        }
        fn merge(e: &mut Option<u32>, b: Option<u32>) {
            if *e != b {
                *e = None;
            }
        }
        for p in f.params.iter().flatten().chain(f.returns.iter().flatten()) {
            if p.space == StateSpace::Reg {
                let b = if p.vector.is_none() { bits(&p.ty) } else { None };
                let e = w.plain.entry(p.name).or_insert(b);
                merge(e, b);
            }
        }
        fn walk(stmts: &[Statement], w: &mut RegWidths) {
            for s in stmts {
                match s {
                    Statement::Decl(d) if d.space == StateSpace::Reg => {
                        let map = if d.count.is_some() { &mut w.ranges } else { &mut w.plain };
                        let b = if d.vector.is_none() && d.array.is_empty() { bits(&d.ty) } else { None };
                        let e = map.entry(d.name).or_insert(b);
                        merge(e, b);
                    }
                    Statement::Block(b) => walk(b, w),
                    _ => {}
                }
            }
        }
        walk(f.body.as_deref().unwrap_or_default(), &mut w);
        w
    }

    /// 32 or 64 for an integer register of one known width.
    fn bits(&self, name: Name) -> Option<u32> {
        if let Some(&b) = self.plain.get(&name) {
            return b;
        }
        let digits = name.bytes().rev().take_while(u8::is_ascii_digit).count();
        let prefix = &name[..name.len() - digits];
        if digits == 0 {
            return None;
        }
        Name::from_existing(prefix).and_then(|p| self.ranges.get(&p)).copied().flatten()
    }

    fn is_64(&self, name: Name) -> bool {
        self.bits(name) == Some(64)
    }
}

/// A hash map for the pass's own keys (instruction ids, registers, its own text): no
/// attacker chooses them, so a fast unkeyed hash does instead of the standard SipHash.
pub(super) type FastMap<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<ahash::AHasher>>;

/// Where a rewrite goes: before or after the statement at a path.
struct Insertion {
    /// Path of the statement list's parent blocks, then the index to insert at.
    at: Vec<u32>,
    /// Where among the insertions at one point ([`order`]).
    order: u8,
    stmts: Vec<Statement>,
}

/// The order of insertions at one point, which is both "after statement `j`" and "before
/// statement `j + 1`": first what ends statement `j` (the label a faulting access skips
/// to), then its LOADMETA, then group checks of the register it defined, then what belongs
/// before statement `j + 1` (its check).
mod order {
    pub const AFTER_ACCESS: u8 = 0;
    pub const LOADMETA: u8 = 1;
    /// Shadow moves (multi-root values), after the LOADMETA they may copy from.
    pub const SHADOW: u8 = 2;
    pub const GROUP: u8 = 3;
    pub const BEFORE: u8 = 4;
    /// The slow paths after the body's last statement.
    pub const TAIL: u8 = 5;
}

fn instrument_function(
    f: &mut Function,
    index: u32,
    line_of: &dyn Fn(Span) -> u32,
    config: &CheckConfig,
    emit: counting::Emit,
    module_windows: &onchip::Windows,
    facts: &ModuleFacts,
) -> Result<CheckFunction, PassError> {
    let cfg = Cfg::build(f).map_err(|e| PassError::new(e.to_string()).in_function(f.name))?;
    let mut report = CheckFunction {
        name: f.name,
        kind: f.kind,
        index,
        checked: 0,
        shared: 0,
        local: 0,
        scope: 0,
        roots: 0,
        multi_root: 0,
        carried: 0,
        no_root: 0,
        unknown_width: 0,
        other: 0,
        grouped: 0,
        group_checks: 0,
        block_roots: 0,
        static_in_bounds: 0,
        spans: 0,
        loops_versioned: 0,
        loop_hoisted: 0,
        inserted: 0,
        heap_calls: 0,
    };
    let heap_calls = if facts.uses_heap { heap::Calls::find(&cfg, f) } else { heap::Calls::default() };
    report.heap_calls = heap_calls.count();

    // Analysis: which accesses are checked, against which root.
    let mut sites = Vec::new();
    let mut root_numbers: BTreeMap<Root, usize> = BTreeMap::new();
    let mut cands = Vec::new();
    // Statically in-bounds accesses by instruction: no check, but counted as accesses.
    let mut static_counts: BTreeMap<InstId, u32> = BTreeMap::new();
    let group_plan: groups::Plan;
    // Root number → the kernel parameter (and offset in it) the root was loaded from.
    let mut block_roots: BTreeMap<usize, (Name, i64)> = BTreeMap::new();
    // The registers of the roots by name, for the rewrite (the analysis has them all).
    let mut root_names: HashMap<RegId, Name> = HashMap::new();
    let mut loop_plan: Vec<loops::Version> = Vec::new();
    // Accesses with several roots, checked through shadows: (site, access, address register,
    // moves), then each register's shadow number, the moves, and registers read on entry.
    let mut pending: Vec<(usize, usize, RegId, Carriers)> = Vec::new();
    let first_shadow;
    let mut shadow_of: BTreeMap<RegId, usize> = BTreeMap::new();
    let mut shadow_moves: BTreeMap<(InstId, RegId), Shadow> = BTreeMap::new();
    let mut entry_shadows: BTreeSet<RegId> = BTreeSet::new();
    {
        let fref: &Function = f;
        let widths = RegWidths::collect(fref);
        let rd = reaching_defs(&cfg, fref);
        let mut an = Roots { cfg: &cfg, rd, insts: cfg.instructions(fref), before: FastMap::default(), last: None };
        let windows = module_windows.with_function(fref);
        for i in (0..cfg.num_insts() as u32).map(InstId) {
            let inst = an.insts[i.index()];
            let mut accesses = Vec::new();
            let mut on_chip = Vec::new();
            for acc in memory_accesses(inst) {
                // Shared and local memory, and generic accesses into their windows.
                match onchip::classify(&mut an, &widths, &windows, i, inst, &acc) {
                    onchip::Verdict::Check(c) => {
                        match c.counted() {
                            onchip::Counted::Shared => report.shared += 1,
                            onchip::Counted::Local => report.local += 1,
                            onchip::Counted::Scope => report.scope += 1,
                        }
                        if c.statically_in_bounds() {
                            report.static_in_bounds += 1;
                            *static_counts.entry(i).or_default() += 1;
                        } else {
                            on_chip.push(c);
                        }
                        continue;
                    }
                    onchip::Verdict::Unchecked => {
                        report.other += 1;
                        continue;
                    }
                    // A generic access may also reach local memory: both checks apply.
                    onchip::Verdict::Elsewhere(scope) => {
                        if let Some(c) = scope {
                            report.scope += 1;
                            on_chip.push(c);
                        }
                    }
                }
                if !matches!(acc.space, Space::Global | Space::Generic) || acc.kind == AccessKind::Prefetch {
                    report.other += 1;
                    continue;
                }
                let Some(w) = acc.width.bytes() else {
                    report.unknown_width += 1;
                    continue;
                };
                let base = acc.address(inst).as_address().and_then(|(b, _)| b);
                let Some(reg) = base.and_then(|b| an.resolve(i, b)) else {
                    report.no_root += 1;
                    continue;
                };
                let roots = an.roots(i, reg);
                // Both the address and the root are compared as 64-bit values.
                let wide = |r: RegId| widths.is_64(an.rd.analysis().registers().name(r));
                let root_reg = |r: &Root| match *r {
                    Root::Entry(r) | Root::Inst(_, r) => r,
                };
                if !wide(reg) || roots.iter().any(|r| !wide(root_reg(r))) {
                    report.no_root += 1;
                    continue;
                }
                match roots.len() {
                    0 => report.no_root += 1,
                    1 => {
                        let root = *roots.iter().next().unwrap();
                        let n = root_numbers.len();
                        let k = *root_numbers.entry(root).or_insert(n);
                        accesses.push((acc.operand, w, acc.space, acc.kind, k));
                        report.checked += 1;
                    }
                    _ => {
                        let carried = if facts.uses_heap { None } else { an.carriers(i, reg) };
                        // Shadows are 64-bit registers like the roots'.
                        let wide = |r: RegId| widths.is_64(an.rd.analysis().registers().name(r));
                        match carried.filter(|c| c.moves.iter().all(|(_, r, _)| wide(*r))) {
                            Some(c) => {
                                accesses.push((acc.operand, w, acc.space, acc.kind, usize::MAX));
                                pending.push((sites.len(), accesses.len() - 1, reg, c));
                                report.checked += 1;
                                report.carried += 1;
                            }
                            None => report.multi_root += 1,
                        }
                    }
                }
            }
            if !accesses.is_empty() || !on_chip.is_empty() {
                sites.push(Site { inst: i, accesses, windows: on_chip });
            }
        }
        // Multi-root accesses: their roots are looked up like any; then one shadow number per
        // register on the way, after the roots' numbers (the same registers as a root's).
        for (_, _, _, c) in &pending {
            for root in &c.roots {
                let n = root_numbers.len();
                root_numbers.entry(*root).or_insert(n);
            }
        }
        first_shadow = root_numbers.len();
        for (si, ai, reg, c) in pending {
            let mut number = |r: RegId| {
                let n = first_shadow + shadow_of.len();
                *shadow_of.entry(r).or_insert(n)
            };
            sites[si].accesses[ai].4 = number(reg);
            for (d, r, shadow) in c.moves {
                number(r);
                if let Shadow::Copy(x) | Shadow::Select(Some(x), _, _) = shadow {
                    number(x);
                }
                if let Shadow::Select(_, Some(x), _) | Shadow::Either(_, x) = shadow {
                    number(x);
                }
                if let Shadow::Either(x, _) = shadow {
                    number(x);
                }
                shadow_moves.entry((d, r)).or_insert(shadow);
            }
            for root in c.roots {
                if let Root::Entry(r) = root {
                    number(r);
                    entry_shadows.insert(r);
                }
            }
        }

        // Optimizations: group checks (see `groups`), and block-wide lookups of roots that
        // are kernel parameters.
        for (si, site) in sites.iter().enumerate() {
            let inst = an.insts[site.inst.index()];
            for &(operand, w, space, _, k) in &site.accesses {
                // Shadows change along the way: no range check stands for them.
                if space != Space::Global || k >= first_shadow {
                    continue;
                }
                let Some((Some(base), offset)) = inst.operands[operand].as_address() else { continue };
                let Some(reg) = an.resolve(site.inst, base) else { continue };
                let defs = an.reaching(site.inst, reg);
                let def = match defs.as_slice() {
                    [DefSite::Inst(d)] => Some(*d),
                    _ => None,
                };
                cands.push(groups::Candidate {
                    site: si,
                    inst: site.inst,
                    reg,
                    base,
                    offset,
                    width: w,
                    key: groups::Key::Root(k),
                    def,
                });
            }
            for c in &site.windows {
                let (Some((base, offset)), Some(symbol)) = (c.base_reg(), c.symbol()) else { continue };
                let Some(reg) = an.resolve(site.inst, base) else { continue };
                let def = match an.reaching(site.inst, reg).as_slice() {
                    [DefSite::Inst(d)] => Some(*d),
                    _ => None,
                };
                let key = groups::Key::Window(symbol);
                cands.push(groups::Candidate {
                    site: si,
                    inst: site.inst,
                    reg,
                    base,
                    offset,
                    width: c.width,
                    key,
                    def,
                });
            }
        }
        group_plan = if facts.uses_heap { groups::Plan::default() } else { groups::plan(&cands, &cfg) };

        let static_ok = |n: usize| {
            facts.static_shared_bytes.is_some_and(|b| b + BLOCK_META_BYTES * n as u64 <= STATIC_SHARED_LIMIT)
        };
        if fref.kind == gpusan_ptx::ast::FunctionKind::Entry && !facts.dynamic_shared && !facts.uses_heap {
            let params: HashSet<Name> = fref.params.iter().flatten().map(|p| p.name).collect();
            for (root, &k) in &root_numbers {
                let Root::Inst(d, _) = *root else { continue };
                let inst = an.insts[d.index()];
                if inst.opcode.as_str() != "ld" || inst.modifiers().next() != Some("param") {
                    continue;
                }
                if let Some((Some(p), off)) = inst.operands.get(1).and_then(|o| o.as_address()) {
                    if params.contains(&p) && block_roots.len() < MAX_BLOCK_ROOTS {
                        block_roots.insert(k, (p, off));
                    }
                }
            }
            if !static_ok(block_roots.len()) {
                block_roots.clear();
            }
        }
        // Loops whose accesses can be checked once by their range (not with the heap's
        // per-access state reloads).
        if !facts.uses_heap {
            loop_plan = loops::plan(loops::Input {
                an: &mut an,
                cfg: &cfg,
                body: fref.body.as_deref().unwrap_or_default(),
                sites: &sites,
                roots: &root_numbers,
                cands: &cands,
                groups: &group_plan,
            });
        }
        let registers = an.rd.analysis().registers();
        for root in root_numbers.keys() {
            let (Root::Entry(r) | Root::Inst(_, r)) = *root;
            root_names.insert(r, registers.name(r));
        }
    }
    report.roots = root_numbers.len() as u32;
    report.block_roots = block_roots.len() as u32;
    if !emit.counting.is_on() {
        static_counts.clear();
    }
    if sites.is_empty() && heap_calls.is_empty() && static_counts.is_empty() {
        return Ok(report);
    }

    // Rewrite: LOADMETA after each root's definition, MEMCHECK before each site.
    let layout = if facts.uses_heap { Layout::Heap } else { Layout::Folded };
    let mut labels = 0u32;
    let mut label = || {
        labels += 1;
        // Four or more a site: spelled out rather than through `format!`.
        let mut l = String::with_capacity(16);
        l.push_str("$__gs_L");
        l.push_str(itoa::Buffer::new().format(labels - 1));
        l
    };
    let mut insertions = Vec::new();
    let mut entry_code = String::new();
    let block_slot = |k: usize| block_roots.keys().position(|&b| b == k);
    for (root, &k) in &root_numbers {
        match *root {
            Root::Entry(reg) => entry_code.push_str(&root_meta_k(k, &root_names[&reg], false, layout, &mut label)),
            Root::Inst(d, reg) => {
                let path = cfg.inst_path(d);
                let mut at = path.to_vec();
                *at.last_mut().unwrap() += 1;
                let text = match block_slot(k) {
                    Some(slot) => fetch_block_meta(k, slot),
                    None => root_meta_k(k, &root_names[&reg], heap_calls.is_result(d), layout, &mut label),
                };
                insertions.push(Insertion { at, order: order::LOADMETA, stmts: snippet(&text) });
            }
        }
    }
    // Shadow moves after the definitions on the way to multi-root addresses, and on entry
    // for registers read before any definition.
    for (&(d, r), shadow) in &shadow_moves {
        let inst = cfg.inst(f, d);
        let text = shadow_move(
            shadow_of[&r],
            shadow,
            inst.guard.as_ref(),
            &|root| {
                let k = root_numbers[root];
                (k, block_slot(k))
            },
            &|x| shadow_of[&x],
        );
        let mut at = cfg.inst_path(d).to_vec();
        *at.last_mut().unwrap() += 1;
        insertions.push(Insertion { at, order: order::SHADOW, stmts: snippet(&text) });
    }
    for &r in &entry_shadows {
        let k = root_numbers[&Root::Entry(r)];
        entry_code.push_str(&shadow_copy(shadow_of[&r], k, block_slot(k), None));
    }
    // Group checks, and which sites take the fast path (every access grouped).
    let mut site_groups: Vec<Vec<usize>> = vec![Vec::new(); sites.len()];
    let mut site_grouped_accesses = vec![0usize; sites.len()];
    for (c, g) in cands.iter().zip(&group_plan.group_of) {
        if let Some(g) = *g {
            site_grouped_accesses[c.site] += 1;
            if !site_groups[c.site].contains(&g) {
                site_groups[c.site].push(g);
            }
        }
    }
    for (si, site) in sites.iter().enumerate() {
        if site_grouped_accesses[si] != site.accesses.len() + site.windows.len() {
            site_groups[si].clear();
        }
    }
    let mut used_groups: BTreeSet<usize> = BTreeSet::new();
    for (si, gs) in site_groups.iter().enumerate() {
        if !gs.is_empty() {
            report.grouped += (sites[si].accesses.len() + sites[si].windows.len()) as u32;
            used_groups.extend(gs.iter().copied());
        }
    }
    report.group_checks = used_groups.len() as u32;
    for &g in &used_groups {
        let group = &group_plan.groups[g];
        let mut at = cfg.inst_path(group.def).to_vec();
        *at.last_mut().unwrap() += 1;
        let text = match group.key {
            groups::Key::Root(_) => groups::check_text(g, group),
            groups::Key::Window(symbol) => {
                let site = &sites[cands[group.first].site];
                let c = site
                    .windows
                    .iter()
                    .find(|c| c.base_reg().is_some_and(|(b, _)| b == group.base) && c.symbol() == Some(symbol))
                    .expect("a window group's first member is a window check of its site");
                let mut t = onchip::check_text(&c.spanning(group.min, group.end));
                t.push_str(&format!("\tnot.pred %__gs_gok{g}, %__gs_bad;\n"));
                t
            }
        };
        // Every check hoisted out of the accesses counts as a group check where it runs
        // (loop versioning's hoisted checks too: `counting::Counter::Group`).
        let text = emit.bump(&[(counting::Counter::Group, 1)]) + &text;
        insertions.push(Insertion { at, order: order::GROUP, stmts: snippet(&text) });
    }
    insertions.extend(heap_calls.insertions(&cfg, f, index, line_of, &mut label));
    // Slow paths of sites at the body's top level go after its last statement, out of the
    // way of the code that runs; a site inside a `{ }` block keeps its own inline, since a
    // label inside the block is not visible outside it.
    let gen = SiteGen {
        layout,
        reaction: config.reaction,
        emit,
        function: index,
        block_roots: &block_roots,
        reg_bits: RegBits::collect(f),
    };
    // Each site's slow path, in order: they go into the body with the other insertions, so
    // the body is rebuilt once rather than grown again by a list as long as itself.
    let mut tail: Vec<Vec<Statement>> = Vec::new();
    let body = f.body.as_deref().unwrap_or_default();
    let site_paths: Vec<&[u32]> = sites.iter().map(|s| cfg.inst_path(s.inst)).collect();
    // Versioned loops: the range checks and branch in the preheader, the clone after them.
    for v in &loop_plan {
        let mut e = v.emit(body, &mut label);
        if emit.counting.is_on() {
            // The clone runs the loop's accesses without their checks: count them there
            // too, or the dynamic fraction removed would lose its denominator.
            let mut at: Vec<(usize, u32)> = sites
                .iter()
                .filter_map(|s| match cfg.inst_path(s.inst) {
                    &[j] if (v.first..=v.last).contains(&(j as usize)) => {
                        let n = (s.accesses.len() + s.windows.len()) as u32
                            + static_counts.get(&s.inst).copied().unwrap_or(0);
                        Some((j as usize - v.first, n))
                    }
                    _ => None,
                })
                .collect();
            at.sort_unstable();
            for (i, n) in at.into_iter().rev() {
                e.clone.splice(i..i, snippet(&emit.bump(&[(counting::Counter::Access, n)])));
            }
            e.checks.insert_str(0, &emit.bump(&[(counting::Counter::Group, v.range_checks())]));
        }
        // The unchecked clone goes inline, where the preheader falls into it, and the
        // checked loop is the branch: ptxas unrolls a loop in that place as it unrolls the
        // program's own (out of line after `ret`, gemm's clone kept nvcc's 4-fold unroll
        // where the native build runs 16 iterations a trip, 1.7x slower with no check left).
        let mut stmts = snippet(&e.checks);
        stmts.extend(e.clone);
        insertions.push(Insertion { at: vec![v.check_at as u32], order: order::BEFORE, stmts });
        insertions.push(Insertion {
            at: vec![v.last as u32 + 1],
            order: order::AFTER_ACCESS,
            stmts: snippet(&e.after),
        });
        report.loops_versioned += 1;
        report.loop_hoisted += v.accesses;
    }
    let spans = spans::find(body, &site_paths, &site_groups, &insertions);
    let mut in_span = vec![false; sites.len()];
    // Naive checks by instruction at the body's top level: a run counts its accesses at
    // its entry, since each version runs all of them.
    let site_naive = |s: &Site| (s.accesses.len() + s.windows.len()) as u32;
    let static_top: HashMap<u32, InstId> = static_counts
        .keys()
        .filter_map(|&i| match cfg.inst_path(i) {
            [j] => Some((*j, i)),
            _ => None,
        })
        .collect();
    for span in &spans {
        // Both versions of the span: the checked one, then the original statements.
        let fast = label();
        let end = label();
        let mut naive = span.sites.iter().map(|&(_, si)| site_naive(&sites[si])).sum::<u32>();
        for j in span.first..=span.last {
            naive += static_top.get(&(j as u32)).and_then(|i| static_counts.remove(i)).unwrap_or(0);
        }
        let enter = emit.bump(&[(counting::Counter::Access, naive), (counting::Counter::Span, 1)]);
        let mut stmts = snippet(&(enter + &spans::enter_text(&span.groups, &fast)));
        for j in span.first..=span.last {
            let stmt = &body[j];
            match span.sites.iter().find(|&&(at, _)| at == j) {
                Some(&(_, si)) => {
                    in_span[si] = true;
                    let Statement::Inst(inst) = stmt else { unreachable!("a span's sites are instructions") };
                    // The version that runs when a group failed: no per-access fast path.
                    let mut code = gen.code(&sites[si], inst, &[], line_of(inst.span), false, &mut label);
                    stmts.append(&mut code.before);
                    stmts.push(stmt.clone());
                    stmts.append(&mut code.after);
                    tail.push(std::mem::take(&mut code.slow));
                }
                None => stmts.push(stmt.clone()),
            }
        }
        stmts.extend(snippet(&format!("\tbra.uni {end};\n{fast}:\n")));
        report.spans += 1;
        insertions.push(Insertion { at: vec![span.first as u32], order: order::BEFORE, stmts });
        insertions.push(Insertion {
            at: vec![span.last as u32 + 1],
            order: order::AFTER_ACCESS,
            stmts: snippet(&format!("{end}:\n")),
        });
    }
    for (si, site) in sites.iter().enumerate() {
        if in_span[si] {
            continue;
        }
        let path = site_paths[si];
        let Some(Statement::Inst(inst)) = gpusan_ptx::cfg::statement_at(body, path) else { continue };
        let nested = path.len() > 1;
        let mut code = gen.code(site, inst, &site_groups[si], line_of(inst.span), nested, &mut label);
        tail.push(std::mem::take(&mut code.slow));
        let naive = site_naive(site) + static_counts.remove(&site.inst).unwrap_or(0);
        let bump = emit.bump(&[(counting::Counter::Access, naive)]);
        let before = if bump.is_empty() {
            code.before
        } else {
            let mut before = snippet(&bump);
            before.append(&mut code.before);
            before
        };
        insertions.push(Insertion { at: path.to_vec(), order: order::BEFORE, stmts: before });
        let mut after = path.to_vec();
        *after.last_mut().unwrap() += 1;
        insertions.push(Insertion { at: after, order: order::AFTER_ACCESS, stmts: code.after });
    }

    // Statically in-bounds accesses left (outside runs, at instructions with no check).
    for (&i, &n) in &static_counts {
        let at = cfg.inst_path(i).to_vec();
        insertions.push(Insertion {
            at,
            order: order::BEFORE,
            stmts: snippet(&emit.bump(&[(counting::Counter::Access, n)])),
        });
    }

    let body = f.body.as_mut().unwrap();

    // Declarations and the entry code at the top.
    // Roots' registers, then the shadows'.
    let n = (root_numbers.len() + shadow_of.len()) as u32;
    let mut top = String::new();
    for (ty, names) in [
        ("b64", &["t", "lo", "hi", "mid", "x", "y", "sz", "a", "e", "eb", "r", "h", "f"][..]),
        ("b32", &["i", "c", "k"][..]),
        ("pred", &["q", "g", "bad", "any", "nb"][..]),
    ] {
        for name in names {
            top.push_str(&format!("\t.reg .{ty} %__gs_{name};\n"));
        }
    }
    if sites.iter().any(|s| !s.windows.is_empty())
        || used_groups.iter().any(|&g| matches!(group_plan.groups[g].key, groups::Key::Window(_)))
    {
        top.push_str(onchip::REGISTERS);
    }
    // A function with only window checks has no roots (and `%r<0>` declares nothing).
    if n > 0 {
        let per_root: &[(&str, &str)] = match layout {
            Layout::Folded => &[("b64", "low"), ("b64", "lim"), ("b64", "id")],
            Layout::Heap => {
                &[("b64", "base"), ("b64", "low"), ("b64", "lim"), ("b64", "id"), ("b32", "st"), ("pred", "ok")]
            }
        };
        for (ty, name) in per_root {
            top.push_str(&format!("\t.reg .{ty} %__gs_{name}<{n}>;\n"));
        }
    }
    if !group_plan.groups.is_empty() {
        top.push_str(&format!("\t.reg .pred %__gs_gok<{}>;\n", group_plan.groups.len()));
    }
    if !loop_plan.is_empty() {
        top.push_str(loops::REGISTERS);
    }
    top.push_str(emit.registers());
    if facts.uses_heap {
        top.push_str(&heap::declarations(n));
    }
    for k in 0..n as usize {
        top.push_str(&found_nothing(k, layout));
    }
    if !block_roots.is_empty() {
        top.push_str(&block_lookup(&block_roots, &mut label));
    }
    top.push_str(&entry_code);
    // Pushed last, of the first kind: before whatever else goes at the top.
    insertions.push(Insertion { at: vec![0], order: 0, stmts: snippet(&top) });
    tail.retain(|t| !t.is_empty());
    if !tail.is_empty() {
        // Unreachable but by the branches to it: a body that ends without `ret` must not
        // fall into it. Insertions of one order at one point go in the reverse of theirs.
        let end = vec![body.len() as u32];
        for stmts in tail.into_iter().rev() {
            insertions.push(Insertion { at: end.clone(), order: order::TAIL, stmts });
        }
        insertions.push(Insertion { at: end, order: order::TAIL, stmts: snippet("\tret;\n") });
    }
    report.inserted += insert::insert_all(body, insertions);
    Ok(report)
}

/// An instruction with checked accesses: global and generic ones against their roots, and
/// shared and local ones against their windows.
struct Site {
    inst: InstId,
    /// (operand, width, space, kind, root number)
    accesses: Vec<(usize, u32, Space, AccessKind, usize)>,
    windows: Vec<onchip::WindowCheck>,
}

/// What one site gets: `before` goes before the instruction, `after` right after it (the
/// label a faulting access skips to), `slow` (reporting, then the skip) where it runs only
/// when branched to.
struct SiteCode {
    before: Vec<Statement>,
    after: Vec<Statement>,
    slow: Vec<Statement>,
}

/// What the code of every site of a function shares.
struct SiteGen<'a> {
    layout: Layout,
    reaction: Reaction,
    emit: counting::Emit,
    function: u32,
    block_roots: &'a BTreeMap<usize, (Name, i64)>,
    reg_bits: RegBits,
}

/// The width in bits of each non-predicate register name, by its declaration (`.f32` 32,
/// `.f16x2` 32, `.b64` 64), for the `mov.bN` that clears it; names declared with different
/// types in different scopes have none.
#[derive(Default)]
struct RegBits {
    plain: HashMap<Name, Option<u32>>,
    ranges: HashMap<Name, Option<u32>>,
}

impl RegBits {
    fn collect(f: &Function) -> RegBits {
        fn bits(ty: &str) -> Option<u32> {
            let (base, lanes) = match ty.split_once('x') {
                Some((b, n)) => (b, n.parse::<u32>().ok()?),
                None => (ty, 1),
            };
            let digits: String = base.chars().filter(char::is_ascii_digit).collect();
            let b = digits.parse::<u32>().ok()? * lanes;
            matches!(b, 16 | 32 | 64).then_some(b)
        }
        fn walk(stmts: &[Statement], out: &mut RegBits) {
            for s in stmts {
                match s {
                    Statement::Decl(d) if d.space == StateSpace::Reg && d.vector.is_none() && d.array.is_empty() => {
                        let map = if d.count.is_some() { &mut out.ranges } else { &mut out.plain };
                        let b = bits(&d.ty);
                        let e = map.entry(d.name).or_insert(b);
                        if *e != b {
                            *e = None;
                        }
                    }
                    Statement::Block(b) => walk(b, out),
                    _ => {}
                }
            }
        }
        let mut out = RegBits::default();
        walk(f.body.as_deref().unwrap_or_default(), &mut out);
        out
    }

    fn get(&self, name: Name) -> Option<u32> {
        if let Some(&b) = self.plain.get(&name) {
            return b;
        }
        let digits = name.bytes().rev().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        Name::from_existing(&name[..name.len() - digits]).and_then(|p| self.ranges.get(&p)).copied().flatten()
    }
}

impl SiteGen<'_> {
    /// A skipped instruction's destination registers set to 0. Left as they were, they would
    /// carry their value from before (the previous iteration of a loop) into the code after,
    /// and ptxas would have to keep every loaded value alive across the loop's back edge:
    /// an unrolled SGEMM body then needs over 100 registers instead of 32.
    fn zero_destinations(&self, site: &Site, inst: &gpusan_ptx::ast::Instruction) -> String {
        let addresses: Vec<usize> =
            site.accesses.iter().map(|a| a.0).chain(site.windows.iter().map(|c| c.operand)).collect();
        if addresses.contains(&0) {
            return String::new();
        }
        let regs: Vec<Name> = match inst.operands.first() {
            Some(Operand::Name(n)) if n.starts_with('%') => vec![*n],
            Some(Operand::Vector(v)) => {
                v.iter().filter_map(|o| if let Operand::Name(n) = o { Some(*n) } else { None }).collect()
            }
            _ => Vec::new(),
        };
        let mut t = String::new();
        for r in regs {
            if let Some(bits) = self.reg_bits.get(r) {
                let _ = writeln!(t, "\tmov.b{bits} {r}, 0;");
            }
        }
        t
    }

    /// The checks of `site`: `groups` are the groups covering every access (the fast path
    /// when all passed; empty for none). With `inline`, the slow path is in `before`,
    /// jumped over when no access is bad, and `slow` is empty.
    fn code(
        &self,
        site: &Site,
        inst: &gpusan_ptx::ast::Instruction,
        groups: &[usize],
        line: u32,
        inline: bool,
        label: &mut dyn FnMut() -> String,
    ) -> SiteCode {
        let guard = &inst.guard;
        let mut text = String::with_capacity(512);
        // The guard as a positive predicate: an access that does not run is not judged.
        if let Some(g) = guard {
            let op = if g.negated { "not" } else { "mov" };
            let _ = writeln!(text, "\t{op}.pred %__gs_g, {};", g.reg);
        }
        // The fast path: the groups' range checks passed, so the access's own are jumped over.
        let fast = label();
        if !groups.is_empty() {
            text.push_str(&spans::enter_text(groups, &fast));
        }
        // Past the fast path: the access's own checks run.
        text.push_str(
            &self.emit.bump(&[(counting::Counter::Check, (site.accesses.len() + site.windows.len()) as u32)]),
        );
        // The check: `%__gs_any` when some access of the instruction is bad.
        let mut first = true;
        let mut any = |text: &mut String| {
            text.push_str(if first {
                "\tmov.pred %__gs_any, %__gs_bad;\n"
            } else {
                "\tor.pred %__gs_any, %__gs_any, %__gs_bad;\n"
            });
            first = false;
        };
        let address = |operand: usize| inst.operands[operand].as_address().expect("a checked access has an address");
        for &(operand, w, space, _, k) in &site.accesses {
            access_check(self.layout, k, address(operand), w, space, &mut text);
            any(&mut text);
        }
        for c in &site.windows {
            text.push_str(&onchip::check_text(c));
            any(&mut text);
        }
        if guard.is_some() {
            text.push_str("\tand.pred %__gs_any, %__gs_any, %__gs_g;\n");
        }
        let mut before = snippet(&text);
        // The slow path: each access judged again and reported, then the instruction skipped.
        let (slow_label, skip) = (label(), label());
        // An access's record and checks are some 50 statements: room for them at once,
        // rather than the list moved each time it doubles.
        let mut slow = Vec::with_capacity(8 + 56 * (site.accesses.len() + site.windows.len()));
        slow.push(Statement::Label(label_name(&slow_label), Span::NONE));
        let guarded = if guard.is_some() { "\tand.pred %__gs_bad, %__gs_bad, %__gs_g;\n" } else { "" };
        // One buffer for every access's check, rather than a string each.
        let mut check = String::with_capacity(512);
        for &(operand, w, space, kind, k) in &site.accesses {
            check.clear();
            access_check(self.layout, k, address(operand), w, space, &mut check);
            check.push_str(guarded);
            snippet::parse_into(&check, &mut slow);
            let block_slot = self.block_roots.keys().position(|&b| b == k);
            let record = Record {
                blame: Blame::Root { k, layout: self.layout, block_slot },
                width: w,
                line,
                function: self.function,
                space: if space == Space::Generic { 3 } else { 0 },
                access: access_code(kind),
            };
            let (done, stop) = (label(), stop_label(self.reaction, label));
            report_record_into(&record, self.reaction, &stop, &done, &mut slow);
        }
        for c in &site.windows {
            check.clear();
            check.push_str(&onchip::check_text(c));
            check.push_str(guarded);
            snippet::parse_into(&check, &mut slow);
            let record = Record {
                blame: Blame::Window(c.code()),
                width: c.width,
                line,
                function: self.function,
                space: c.record_space(),
                access: access_code(c.kind),
            };
            let (done, stop) = (label(), stop_label(self.reaction, label));
            report_record_into(&record, self.reaction, &stop, &done, &mut slow);
        }
        check.clear();
        check.push_str(&self.zero_destinations(site, inst));
        let _ = writeln!(check, "\tbra.uni {skip};");
        snippet::parse_into(&check, &mut slow);
        let slow = if inline {
            snippet::parse_into(&format!("\t@!%__gs_any bra {fast};\n"), &mut before);
            before.append(&mut slow);
            Vec::new()
        } else {
            snippet::parse_into(&format!("\t@%__gs_any bra {slow_label};\n"), &mut before);
            slow
        };
        before.push(Statement::Label(label_name(&fast), Span::NONE));
        SiteCode { before, after: vec![Statement::Label(label_name(&skip), Span::NONE)], slow }
    }
}

/// How a function keeps its roots' metadata in registers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Layout {
    /// `low`, `lim`, `id` per root, with "found" and "live" folded into the bounds by
    /// [`loadmeta`]: a check is two comparisons.
    Folded,
    /// Modules calling the device heap: `base`, `low`, `lim`, `id`, `st`, `ok`, because a
    /// heap block's state is read again before every check (`check/heap.rs`).
    Heap,
}

/// Root `k` found nowhere: nothing of it is judged.
fn found_nothing(k: usize, layout: Layout) -> String {
    match layout {
        Layout::Folded => format!("\tmov.b64 %__gs_low{k}, 0;\n\tmov.b64 %__gs_lim{k}, -1;\n"),
        Layout::Heap => format!("\tmov.pred %__gs_ok{k}, 0;\n"),
    }
}

/// MEMCHECK of one access through `address` (register and constant offset) against root
/// `k`: `%__gs_a` is its first byte, `%__gs_bad` whether it is bad. A generic access is
/// judged only inside the global window. Appended to `t`.
fn access_check(layout: Layout, k: usize, address: (Option<Name>, i64), w: u32, space: Space, t: &mut String) {
    let (base, offset) = address;
    let base = base.expect("a checked access has a base register");
    if layout == Layout::Heap {
        t.push_str(&heap::reload_state(k));
    }
    if offset == 0 {
        let _ = writeln!(t, "\tmov.b64 %__gs_a, {base};");
    } else {
        let _ = writeln!(t, "\tadd.s64 %__gs_a, {base}, {offset};");
    }
    let _ = write!(
        t,
        "\tadd.s64 %__gs_e, %__gs_a, {w};\n\
         \tsetp.lt.u64 %__gs_bad, %__gs_a, %__gs_low{k};\n\
         \tsetp.gt.or.u64 %__gs_bad, %__gs_e, %__gs_lim{k}, %__gs_bad;\n"
    );
    if layout == Layout::Heap {
        let _ = write!(
            t,
            "\tsetp.ge.u64 %__gs_q, %__gs_a, %__gs_base{k};\n\
             \tsetp.ne.and.u32 %__gs_q, %__gs_st{k}, {STATE_LIVE}, %__gs_q;\n\
             \tor.pred %__gs_bad, %__gs_bad, %__gs_q;\n\
             \tand.pred %__gs_bad, %__gs_bad, %__gs_ok{k};\n"
        );
    }
    if space == Space::Generic {
        t.push_str("\tisspacep.global %__gs_q, %__gs_a;\n\tand.pred %__gs_bad, %__gs_bad, %__gs_q;\n");
    }
}

/// The LOADMETA of root `k`. Roots of a heap module may be heap blocks: a `malloc` result
/// has its metadata from the call, any other root falls back on the heap table when the
/// runtime's table has no entry for it.
fn root_meta_k(
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
/// The table is a 32-byte header (`len` at offset 8) followed by 32-byte entries
/// (`base`, `size`, `id`, `flags`), so entry `i` is at `table + 32 + 32 * i` and entry
/// `lo - 1` at `table + 32 * lo`. After a hit, `low` is the entry's base, or the base of
/// entry `lo - 2` when the value is the entry's base and entry `lo - 2` ends there (a
/// pointer one past the end of that neighbour).
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
fn loadmeta(k: usize, value: &str, layout: Layout, label: &mut dyn FnMut() -> String) -> String {
    let (search, head, end, found, done) = (label(), label(), label(), label(), label());
    // Entry `lo - 1` at `%__gs_x`: its bounds, its id and flags, and (when there is one) the
    // entry below, all in one round of loads.
    let entry = |x: &str| match layout {
        Layout::Folded => format!(
            "\tshl.b64 %__gs_x, %__gs_lo, 5;\n\
             \tadd.s64 %__gs_x, %__gs_t, %__gs_x;\n\
             \tld.global.v2.u64 {{%__gs_mid, %__gs_sz}}, [%__gs_x];\n\
             \tld.global.v2.u64 {{%__gs_id{k}, %__gs_r}}, [%__gs_x+16];\n\
             \tsetp.ge.u64 %__gs_nb, %__gs_lo, 2;\n\
             \t@%__gs_nb ld.global.v2.u64 {{%__gs_a, %__gs_e}}, [%__gs_x+-32];\n\
             \tsub.s64 %__gs_y, {value}, %__gs_mid;\n\
             {x}"
        ),
        Layout::Heap => format!(
            "\tshl.b64 %__gs_x, %__gs_lo, 5;\n\
             \tadd.s64 %__gs_x, %__gs_t, %__gs_x;\n\
             \tld.global.v2.u64 {{%__gs_mid, %__gs_sz}}, [%__gs_x];\n\
             \tsub.s64 %__gs_y, {value}, %__gs_mid;\n\
             {x}"
        ),
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
            "\tcvt.u32.u64 %__gs_c, %__gs_r;\n\
             \tand.b32 %__gs_c, %__gs_c, 255;\n\
             \tsetp.ne.u32 %__gs_q, %__gs_c, {STATE_LIVE};\n\
             \tadd.s64 %__gs_lim{k}, %__gs_mid, %__gs_sz;\n\
             \t@%__gs_q mov.b64 %__gs_lim{k}, %__gs_mid;\n\
             \t@%__gs_q or.b64 %__gs_id{k}, %__gs_id{k}, {DEAD_BIT:#x};\n\
             \tmov.b64 %__gs_low{k}, %__gs_mid;\n\
             \tsetp.eq.and.u64 %__gs_nb, {value}, %__gs_mid, %__gs_nb;\n\
             \t@!%__gs_nb bra {done};\n\
             \tadd.s64 %__gs_e, %__gs_a, %__gs_e;\n\
             \tsetp.eq.u64 %__gs_q, %__gs_e, %__gs_mid;\n\
             \t@%__gs_q mov.b64 %__gs_low{k}, %__gs_a;\n"
        ),
        Layout::Heap => format!(
            "\tmov.b64 %__gs_base{k}, %__gs_mid;\n\
             \tld.global.u64 %__gs_id{k}, [%__gs_x+16];\n\
             \tld.global.u32 %__gs_st{k}, [%__gs_x+24];\n\
             \tand.b32 %__gs_st{k}, %__gs_st{k}, 255;\n\
             \tadd.s64 %__gs_lim{k}, %__gs_base{k}, %__gs_sz;\n\
             \tsub.s64 %__gs_y, {value}, %__gs_base{k};\n\
             \tsetp.lt.u64 %__gs_ok{k}, %__gs_y, %__gs_sz;\n\
             \tmov.b64 %__gs_low{k}, %__gs_base{k};\n\
             \tsetp.ne.u64 %__gs_q, {value}, %__gs_mid;\n\
             \t@%__gs_q bra {done};\n\
             \tsetp.lt.u64 %__gs_q, %__gs_lo, 2;\n\
             \t@%__gs_q bra {done};\n\
             \tld.global.v2.u64 {{%__gs_y, %__gs_sz}}, [%__gs_x+-32];\n\
             \tadd.s64 %__gs_sz, %__gs_y, %__gs_sz;\n\
             \tsetp.eq.u64 %__gs_q, %__gs_sz, %__gs_mid;\n\
             \t@%__gs_q mov.b64 %__gs_low{k}, %__gs_y;\n"
        ),
    };
    format!(
        "{reset}\
         \tld.const.u64 %__gs_t, [{TABLE_SYMBOL}];\n\
         \tsetp.eq.u64 %__gs_q, %__gs_t, 0;\n\
         \t@%__gs_q bra {done};\n\
         \tmul.lo.u64 %__gs_h, {value}, {LOOKUP_CACHE_HASH:#x};\n\
         \tshr.u64 %__gs_h, %__gs_h, {shift};\n\
         \tshl.b64 %__gs_h, %__gs_h, 2;\n\
         \tadd.s64 %__gs_h, %__gs_t, %__gs_h;\n\
         \tld.global.u32 %__gs_c, [%__gs_h+-{LOOKUP_CACHE_BYTES}];\n\
         \tld.global.u64 %__gs_hi, [%__gs_t+8];\n\
         \tld.global.u64 %__gs_f, [%__gs_t+32];\n\
         \tcvt.u64.u32 %__gs_lo, %__gs_c;\n\
         \tadd.s64 %__gs_lo, %__gs_lo, 1;\n\
         \tsetp.gt.u64 %__gs_q, %__gs_lo, %__gs_hi;\n\
         \t@%__gs_q bra {search};\n\
         {probe}\
         {search}:\n\
         \tsetp.lt.u64 %__gs_q, {value}, %__gs_f;\n\
         \t@%__gs_q bra {done};\n\
         \tmov.u64 %__gs_lo, 0;\n\
         {head}:\n\
         \tsetp.ge.u64 %__gs_q, %__gs_lo, %__gs_hi;\n\
         \t@%__gs_q bra {end};\n\
         \tsub.s64 %__gs_mid, %__gs_hi, %__gs_lo;\n\
         \tshr.u64 %__gs_mid, %__gs_mid, 1;\n\
         \tadd.s64 %__gs_mid, %__gs_lo, %__gs_mid;\n\
         \tshl.b64 %__gs_x, %__gs_mid, 5;\n\
         \tadd.s64 %__gs_x, %__gs_t, %__gs_x;\n\
         \tld.global.u64 %__gs_x, [%__gs_x+32];\n\
         \tsetp.le.u64 %__gs_q, %__gs_x, {value};\n\
         \t@%__gs_q add.s64 %__gs_lo, %__gs_mid, 1;\n\
         \t@!%__gs_q mov.u64 %__gs_hi, %__gs_mid;\n\
         \tbra {head};\n\
         {end}:\n\
         \tsetp.eq.u64 %__gs_q, %__gs_lo, 0;\n\
         \t@%__gs_q bra {done};\n\
         \tadd.s64 %__gs_y, %__gs_lo, -1;\n\
         \tcvt.u32.u64 %__gs_c, %__gs_y;\n\
         \tst.global.u32 [%__gs_h+-{LOOKUP_CACHE_BYTES}], %__gs_c;\n\
         {searched}\
         {found}:\n\
         {hit}\
         {done}:\n",
        reset = found_nothing(k, layout),
        shift = 64 - LOOKUP_CACHE_BITS,
    )
}

/// `device_abi::LOOKUP_CACHE_BYTES`: the lookup cache below the table header.
pub const LOOKUP_CACHE_BYTES: u64 = 4 << LOOKUP_CACHE_BITS;
/// `device_abi::LOOKUP_CACHE_HASH`: a slot is `(value * LOOKUP_CACHE_HASH) >> (64 - 18)`
/// (Fibonacci hashing: the top bits of the product depend on every bit of the value).
pub const LOOKUP_CACHE_HASH: u64 = 0x9e37_79b9_7f4a_7c15;
/// 2^18 slots (1 MiB): of 20,000 allocations a kernel touches (`bench/workloads/
/// many_allocs.cu`), about 96 % own their slot where 2^14 slots leave 58 % (a uniform hash's
/// expectation, `m (1 - e^(-n/m)) / n`, not a measurement), and each miss is a binary
/// search of the table; measured, many_allocs went from 1.48x to 1.23x native
/// (`bench/results/h200-run5/check-overhead-call2.json`).
const LOOKUP_CACHE_BITS: u32 = 18;

/// The top bit of a folded root's `id`: the allocation is not live.
const DEAD_BIT: u64 = 1 << 63;

/// The block-wide lookup of kernel-parameter roots, at the top of a kernel: the first
/// `L = min(32, threads in the block)` threads, all in warp 0, share the roots out (thread
/// `r` takes roots `r`, `r + L`, …), each loads its parameter and runs LOADMETA for it, and
/// stores the metadata in shared memory (32 bytes a root); the block waits for it at a
/// barrier. At the root's definition every thread then reads the metadata back
/// ([`fetch_block_meta`]) instead of searching the table: a kernel parameter has one value
/// for the whole grid, so one lookup per block is exact, and it spares every other warp the
/// search (the cost `bench/lookup` measures).
///
/// Why lanes and not thread 0 alone: the lookups are chains of dependent loads, and a
/// kernel with many small blocks (a stencil launches 262,144 of 256 threads) waits for the
/// chain in every block. Lanes of one warp run one instruction stream, so the lookups of
/// all roots overlap and the block waits for one chain, not one per root. The parameter is
/// picked by predicated loads, not by a branch per root, which would serialize the lanes
/// again.
///
/// The barrier is the kernel's first instruction, which every thread of the block runs.
///
/// Why not per warp (each warp's lanes look the roots up and `shfl.sync` them to all lanes,
/// no barrier, no shared memory): every warp then waits for its own chain of loads, and the
/// stencil ran 0.84 ms against 0.43 ms with this lookup and 0.24 ms natively
/// (`bench/results/prologue-ab-warp.json`); ptxas also gave it 52 registers against 32.
///
/// Why not a search by all lanes together when the table is short (lane `i` loads entry `i`
/// with the length, a vote per root, the winner's entry shuffled to all): one round of
/// loads less, but the votes and shuffles per root made the chain longer, and the stencil
/// ran 0.50 ms against 0.44 (`bench/results/prologue-ab-small.json`).
fn block_lookup(roots: &BTreeMap<usize, (Name, i64)>, label: &mut dyn FnMut() -> String) -> String {
    let (done, next) = (label(), label());
    let n = roots.len();
    // The linear thread index r = (tid.z * ntid.y + tid.y) * ntid.x + tid.x, and L.
    let mut t = format!(
        "\t.reg .b64 %__gs_pv;\n\
         \t.shared .align 16 .b8 __gs_meta[{}];\n\
         \tmov.u32 %__gs_k, %ntid.x;\n\
         \tmov.u32 %__gs_c, %ntid.y;\n\
         \tmul.lo.u32 %__gs_i, %__gs_k, %__gs_c;\n\
         \tmov.u32 %__gs_c, %ntid.z;\n\
         \tmul.lo.u32 %__gs_i, %__gs_i, %__gs_c;\n\
         \tmin.u32 %__gs_i, %__gs_i, 32;\n\
         \tmov.u32 %__gs_k, %tid.z;\n\
         \tmov.u32 %__gs_c, %ntid.y;\n\
         \tmul.lo.u32 %__gs_k, %__gs_k, %__gs_c;\n\
         \tmov.u32 %__gs_c, %tid.y;\n\
         \tadd.s32 %__gs_k, %__gs_k, %__gs_c;\n\
         \tmov.u32 %__gs_c, %ntid.x;\n\
         \tmul.lo.u32 %__gs_k, %__gs_k, %__gs_c;\n\
         \tmov.u32 %__gs_c, %tid.x;\n\
         \tadd.s32 %__gs_k, %__gs_k, %__gs_c;\n\
         \tsetp.ge.u32 %__gs_q, %__gs_k, %__gs_i;\n\
         \t@%__gs_q bra {done};\n\
         \tsetp.ge.u32 %__gs_q, %__gs_k, {n};\n\
         \t@%__gs_q bra {done};\n\
         {next}:\n",
        BLOCK_META_BYTES * n as u64
    );
    for (slot, &(param, offset)) in roots.values().enumerate() {
        if slot == 0 {
            t.push_str(&format!("\tld.param.u64 %__gs_pv, [{param}+{offset}];\n"));
        } else {
            t.push_str(&format!(
                "\tsetp.eq.u32 %__gs_q, %__gs_k, {slot};\n\t@%__gs_q ld.param.u64 %__gs_pv, [{param}+{offset}];\n"
            ));
        }
    }
    // One set of per-root registers does for all: the metadata goes to shared memory, and
    // every root's registers are reset after the barrier.
    let k = *roots.keys().next().expect("a block lookup has roots");
    t.push_str(&loadmeta(k, "%__gs_pv", Layout::Folded, label));
    t.push_str(&format!(
        "\tmov.u32 %__gs_c, __gs_meta;\n\
         \tmad.lo.u32 %__gs_c, %__gs_k, {BLOCK_META_BYTES}, %__gs_c;\n\
         \tst.shared.v2.u64 [%__gs_c], {{%__gs_low{k}, %__gs_lim{k}}};\n\
         \tst.shared.u64 [%__gs_c+16], %__gs_id{k};\n\
         \tadd.s32 %__gs_k, %__gs_k, %__gs_i;\n\
         \tsetp.lt.u32 %__gs_q, %__gs_k, {n};\n\
         \t@%__gs_q bra {next};\n\
         {done}:\n\tbar.sync 0;\n"
    ));
    for &k in roots.keys() {
        t.push_str(&found_nothing(k, Layout::Folded));
    }
    t
}

/// Shadow `to` := root `k`'s metadata (the id from its block-lookup slot when it has one),
/// under `guard` when given.
fn shadow_copy(to: usize, k: usize, block_slot: Option<usize>, guard: Option<&str>) -> String {
    let g = guard.unwrap_or("");
    let id = match block_slot {
        Some(slot) => {
            format!("{g}ld.shared.u64 %__gs_id{to}, [__gs_meta+{}];\n", BLOCK_META_BYTES as usize * slot + 16)
        }
        None => format!("{g}mov.b64 %__gs_id{to}, %__gs_id{k};\n"),
    };
    format!("\t{g}mov.b64 %__gs_low{to}, %__gs_low{k};\n\t{g}mov.b64 %__gs_lim{to}, %__gs_lim{k};\n\t{id}")
}

/// The code of one shadow move into shadow `to`; `root` gives a root's number and block
/// slot, `shadow` a register's shadow number. A guarded `selp` or two-pointer `add` would
/// need two predicates (never seen from nvcc): where its guard holds, the shadow becomes
/// "found nowhere", so the value's accesses go unchecked rather than judged against the
/// shadow of the value it replaced.
fn shadow_move(
    to: usize,
    shadow: &Shadow,
    guard: Option<&gpusan_ptx::ast::Guard>,
    root: &dyn Fn(&Root) -> (usize, Option<usize>),
    shadow_of: &dyn Fn(RegId) -> usize,
) -> String {
    let g = guard.map(|g| format!("@{}{} ", if g.negated { "!" } else { "" }, g.reg));
    let g = g.as_deref();
    let nothing = |g: &str| format!("\t{g}mov.b64 %__gs_low{to}, 0;\n\t{g}mov.b64 %__gs_lim{to}, -1;\n");
    match shadow {
        Shadow::Root(r) => {
            let (k, slot) = root(r);
            shadow_copy(to, k, slot, g)
        }
        Shadow::Copy(x) => shadow_copy(to, shadow_of(*x), None, g),
        Shadow::Nothing => nothing(g.unwrap_or("")),
        Shadow::Either(..) | Shadow::Select(..) if g.is_some() => nothing(g.unwrap_or("")),
        Shadow::Either(a, b) => {
            let (a, b) = (shadow_of(*a), shadow_of(*b));
            // Found: the limit of "found nowhere" is the top of the address space.
            let mut t = format!("\tsetp.ne.u64 %__gs_q, %__gs_lim{a}, -1;\n");
            t.push_str(&shadow_copy(to, b, None, Some("@!%__gs_q ")));
            t.push_str(&shadow_copy(to, a, None, Some("@%__gs_q ")));
            t
        }
        Shadow::Select(a, b, p) => {
            let side = |x: &Option<RegId>, pred: String| match x {
                Some(x) => shadow_copy(to, shadow_of(*x), None, Some(&pred)),
                None => nothing(&pred),
            };
            // `a`'s shadow when `p`, else `b`'s: one of the two runs, so `selp r, r, b, p`
            // (its own register on one side) reads that shadow before anything changes it.
            let mut t = side(b, format!("@!{p} "));
            t.push_str(&side(a, format!("@{p} ")));
            t
        }
    }
}

/// Root `k`'s bounds from slot `slot` of the block-wide lookup; its id stays there for
/// the record writer ([`Blame::Root`]).
fn fetch_block_meta(k: usize, slot: usize) -> String {
    let at = BLOCK_META_BYTES as usize * slot;
    format!("\tld.shared.v2.u64 {{%__gs_low{k}, %__gs_lim{k}}}, [__gs_meta+{at}];\n")
}

/// `ErrorRecord::access` of an access kind.
fn access_code(kind: AccessKind) -> u32 {
    match kind {
        AccessKind::Read => 0,
        AccessKind::Write => 1,
        _ => 2,
    }
}

/// Whom an error record blames, and so its code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Blame {
    /// The allocation of root number `k`: its id, and out of bounds or use after free as
    /// the entry's state says. A root of the block-wide lookup has its id in that slot of
    /// `__gs_meta`, not in a register.
    Root { k: usize, layout: Layout, block_slot: Option<usize> },
    /// A shared or local variable: no allocation, this code.
    Window(u32),
}

/// The fields of an error record known when instrumenting.
struct Record {
    blame: Blame,
    width: u32,
    line: u32,
    function: u32,
    space: u32,
    access: u32,
}

/// The label the record's writer ends at before `trap` under [`Reaction::Abort`]; none
/// (the skip label) under [`Reaction::Report`].
fn stop_label(reaction: Reaction, label: &mut dyn FnMut() -> String) -> Option<String> {
    (reaction == Reaction::Abort).then(label)
}

/// Stores of an error record's block and thread (offsets 48–68 from `%__gs_r`, the
/// record's address minus 16), shared by every record writer.
pub(super) fn record_where() -> &'static str {
    "\tmov.u32 %__gs_k, %ctaid.x;\n\
     \tst.global.u32 [%__gs_r+48], %__gs_k;\n\
     \tmov.u32 %__gs_k, %ctaid.y;\n\
     \tst.global.u32 [%__gs_r+52], %__gs_k;\n\
     \tmov.u32 %__gs_k, %ctaid.z;\n\
     \tst.global.u32 [%__gs_r+56], %__gs_k;\n\
     \tmov.u32 %__gs_k, %tid.x;\n\
     \tst.global.u32 [%__gs_r+60], %__gs_k;\n\
     \tmov.u32 %__gs_k, %tid.y;\n\
     \tst.global.u32 [%__gs_r+64], %__gs_k;\n\
     \tmov.u32 %__gs_k, %tid.z;\n\
     \tst.global.u32 [%__gs_r+68], %__gs_k;\n"
}

/// Writes one `ErrorRecord` when `%__gs_bad` holds: `i = atom.add(count, 1)`, and if
/// `i < capacity`, record `i` at `errors + 16 + 64 * i` (bench/injection/abi_test.cpp).
/// Offsets in the record: address 0, allocation 8, kernel 16, code 20, size 24,
/// ptx_line 28, block 32/36/40, thread 44/48/52, space 56, access 60. Under
/// [`Reaction::Abort`] every bad access then reaches `stop` and traps, stored or not (no
/// runtime, or a full buffer).
///
/// Every checked access gets one, some 40 lines, and they differ only in their labels and
/// numbers: each kind of record ([`record_text`]) is a [`snippet::Template`], parsed once
/// per thread and then filled, rather than written and parsed line by line.
fn report_record_into(r: &Record, reaction: Reaction, stop: &Option<String>, skip: &str, out: &mut Vec<Statement>) {
    debug_assert_eq!(stop.is_some(), reaction == Reaction::Abort);
    let skip = label_name(skip);
    let end = stop.as_deref().map_or(skip, label_name);
    let int = |v: u32| Operand::Int(gpusan_ptx::ast::IntLit::dec(v.into()));
    let Record { blame, width, line, function, space, access } = *r;
    let values =
        [Operand::Name(skip), Operand::Name(end), int(function), int(width), int(line), int(space), int(access)];
    RECORDS.with(|records| {
        let mut records = records.borrow_mut();
        // Kinds are few (a function's roots, block slots, window codes), but bounded all
        // the same for a process that instruments module after module.
        if records.len() >= MAX_RECORD_KINDS {
            records.clear();
        }
        let kind = (blame, stop.is_some());
        records
            .entry(kind)
            .or_insert_with(|| snippet::Template::new(&record_text(blame, stop.is_some())))
            .fill_into(&values, out)
    });
}

/// Record kinds kept by [`report_record_into`].
const MAX_RECORD_KINDS: usize = 1024;

thread_local! {
    static RECORDS: std::cell::RefCell<HashMap<(Blame, bool), snippet::Template>> = std::cell::RefCell::new(HashMap::new());
}

/// The text of an error record's writer for `blame`, with holes ([`snippet::Template`]):
/// 0 the skip label, 1 the label it ends at when stored (the stop label with `abort`, else
/// the skip label), 2 the function's index, 3 the access's width, 4 its line, 5 its space,
/// 6 its kind.
fn record_text(blame: Blame, abort: bool) -> String {
    let (alloc, code) = match blame {
        Blame::Root { k, layout: Layout::Folded, block_slot } => {
            let id = match block_slot {
                Some(slot) => {
                    format!("\tld.shared.u64 %__gs_x, [__gs_meta+{}];\n", BLOCK_META_BYTES as usize * slot + 16)
                }
                None => format!("\tmov.b64 %__gs_x, %__gs_id{k};\n"),
            };
            (
                format!("{id}\tand.b64 %__gs_y, %__gs_x, {:#x};\n\tst.global.u64 [%__gs_r+24], %__gs_y;\n", !DEAD_BIT),
                format!(
                    "\tsetp.lt.s64 %__gs_q, %__gs_x, 0;\n\
                     \tselp.u32 %__gs_k, {CODE_USE_AFTER_FREE}, {CODE_OUT_OF_BOUNDS}, %__gs_q;\n\
                     \tst.global.u32 [%__gs_r+36], %__gs_k;\n"
                ),
            )
        }
        Blame::Root { k, layout: Layout::Heap, .. } => (
            format!("\tst.global.u64 [%__gs_r+24], %__gs_id{k};\n"),
            format!(
                "\tsetp.ne.u32 %__gs_q, %__gs_st{k}, {STATE_LIVE};\n\
                 \tselp.u32 %__gs_k, {CODE_USE_AFTER_FREE}, {CODE_OUT_OF_BOUNDS}, %__gs_q;\n\
                 \tst.global.u32 [%__gs_r+36], %__gs_k;\n"
            ),
        ),
        Blame::Window(code) => {
            ("\tst.global.u64 [%__gs_r+24], 0;\n".to_string(), format!("\tst.global.u32 [%__gs_r+36], {code};\n"))
        }
    };
    let mut t = format!(
        "\t@!%__gs_bad bra __gs_hole0;\n\
         \tld.global.u64 %__gs_eb, [{ERRORS_SYMBOL}];\n\
         \tsetp.eq.u64 %__gs_q, %__gs_eb, 0;\n\
         \t@%__gs_q bra __gs_hole1;\n\
         \tatom.global.add.u32 %__gs_i, [%__gs_eb], 1;\n\
         \tld.global.u32 %__gs_c, [%__gs_eb+4];\n\
         \tsetp.ge.u32 %__gs_q, %__gs_i, %__gs_c;\n\
         \t@%__gs_q bra __gs_hole1;\n\
         \tmul.wide.u32 %__gs_r, %__gs_i, 64;\n\
         \tadd.s64 %__gs_r, %__gs_eb, %__gs_r;\n\
         \tst.global.u64 [%__gs_r+16], %__gs_a;\n\
         {alloc}\
         \tld.global.u32 %__gs_k, [{MODULE_SYMBOL}];\n\
         \tshl.b32 %__gs_k, %__gs_k, 16;\n\
         \tor.b32 %__gs_k, %__gs_k, __gs_hole2;\n\
         \tst.global.u32 [%__gs_r+32], %__gs_k;\n\
         {code}\
         \tst.global.u32 [%__gs_r+40], __gs_hole3;\n\
         \tst.global.u32 [%__gs_r+44], __gs_hole4;\n\
         {where}\
         \tst.global.u32 [%__gs_r+72], __gs_hole5;\n\
         \tst.global.u32 [%__gs_r+76], __gs_hole6;\n",
        where = record_where()
    );
    if abort {
        t.push_str("__gs_hole1:\n\tmembar.sys;\n\ttrap;\n");
    }
    t.push_str("__gs_hole0:\n");
    t
}

/// The name of a label the pass wrote (`$__gs_L{n}`). Interning a string takes the
/// interner's global lock, and every function numbers its labels from 0 again, so each
/// thread interns label `n` once and keeps its name.
fn label_name(label: &str) -> Name {
    thread_local! {
        static LABELS: std::cell::RefCell<Vec<Name>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    // Only the digits `label()` writes: no sign, no leading zero.
    let canonical = |d: &&str| d.bytes().all(|b| b.is_ascii_digit()) && (d == &"0" || !d.starts_with('0'));
    let Some(n) = label.strip_prefix("$__gs_L").filter(canonical).and_then(|d| d.parse::<usize>().ok()) else {
        return Name::from(label);
    };
    LABELS.with(|names| {
        let mut names = names.borrow_mut();
        while names.len() <= n {
            let next = Name::from(format!("$__gs_L{}", names.len()).as_str());
            names.push(next);
        }
        names[n]
    })
}

/// Statements from PTX text, with the spans of nodes a pass creates.
fn snippet(text: &str) -> Vec<Statement> {
    snippet::parse(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each kind of error record, filled from its template, is its text with the labels
    /// and numbers written in, parsed.
    #[test]
    fn records_from_templates_are_their_text() {
        let blames = [
            Blame::Root { k: 2, layout: Layout::Folded, block_slot: None },
            Blame::Root { k: 0, layout: Layout::Folded, block_slot: Some(3) },
            Blame::Root { k: 5, layout: Layout::Heap, block_slot: None },
            Blame::Window(7),
        ];
        for blame in blames {
            for reaction in [Reaction::Report, Reaction::Abort] {
                let r = Record { blame, width: 8, line: 1234, function: 3, space: 0, access: 1 };
                let stop = (reaction == Reaction::Abort).then(|| "$__gs_L9".to_string());
                // Twice: built, then from the kept template.
                for _ in 0..2 {
                    let mut got = Vec::new();
                    report_record_into(&r, reaction, &stop, "$__gs_L8", &mut got);
                    let text = record_text(blame, stop.is_some())
                        .replace("__gs_hole0", "$__gs_L8")
                        .replace("__gs_hole1", stop.as_deref().unwrap_or("$__gs_L8"))
                        .replace("__gs_hole2", "3")
                        .replace("__gs_hole3", "8")
                        .replace("__gs_hole4", "1234")
                        .replace("__gs_hole5", "0")
                        .replace("__gs_hole6", "1");
                    assert_eq!(got, snippet(&text), "{blame:?} {reaction:?}");
                }
            }
        }
    }

    #[test]
    fn label_names_are_the_labels() {
        for l in ["$__gs_L7", "$__gs_L0", "$__gs_L12", "$__gs_L7", "$__gs_Lx", "$__gs_L007", "$__gs_L+3", "$__gs_L"] {
            assert_eq!(label_name(l).as_str(), l);
        }
    }

    #[test]
    fn snippets_parse_without_spans() {
        let s = snippet("\tmov.pred %__gs_q, 0;\n$__gs_L0:\n");
        assert_eq!(s.len(), 2);
        assert!(matches!(&s[0], Statement::Inst(i) if i.span.is_none()));
    }

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
    fn block_lookup_spreads_roots_over_lanes_without_branching_per_root() {
        let roots: BTreeMap<usize, (Name, i64)> =
            [(0, ("k_param_0".into(), 0)), (1, ("k_param_1".into(), 0)), (2, ("k_param_2".into(), 8))].into();
        let text = block_lookup(&roots, &mut {
            let mut n = 0;
            move || {
                n += 1;
                format!("$__gs_L{n}")
            }
        });
        // One LOADMETA for all roots, each parameter picked by a predicated load.
        assert_eq!(text.matches("ld.const.u64 %__gs_t, [__gpusan_table];").count(), 1);
        assert!(text.contains("ld.param.u64 %__gs_pv, [k_param_0+0];"));
        assert!(text.contains("setp.eq.u32 %__gs_q, %__gs_k, 2;\n\t@%__gs_q ld.param.u64 %__gs_pv, [k_param_2+8];"));
        // At most 32 lanes, looping when the block has fewer threads than roots.
        assert!(text.contains("min.u32 %__gs_i, %__gs_i, 32;"));
        assert!(text.contains("add.s32 %__gs_k, %__gs_k, %__gs_i;\n\tsetp.lt.u32 %__gs_q, %__gs_k, 3;"));
        assert!(text.contains(&format!("mad.lo.u32 %__gs_c, %__gs_k, {BLOCK_META_BYTES}, %__gs_c;")));
        assert!(text.ends_with("\tbar.sync 0;\n\tmov.b64 %__gs_low0, 0;\n\tmov.b64 %__gs_lim0, -1;\n\tmov.b64 %__gs_low1, 0;\n\tmov.b64 %__gs_lim1, -1;\n\tmov.b64 %__gs_low2, 0;\n\tmov.b64 %__gs_lim2, -1;\n"), "{text}");
    }

    #[test]
    fn shadow_moves_follow_the_value() {
        let no_root = |_: &Root| -> (usize, Option<usize>) { unreachable!("no root in these moves") };
        // Shadows 5 and 6 belong to registers 1 and 2.
        let shadow_of = |r: RegId| 4 + r.0 as usize;
        let (a, b) = (RegId(1), RegId(2));
        // selp: each side's shadow under its predicate.
        let t = shadow_move(9, &Shadow::Select(Some(a), Some(b), "%p1".into()), None, &no_root, &shadow_of);
        assert!(
            t.contains("@%p1 mov.b64 %__gs_lim9, %__gs_lim5;") && t.contains("@!%p1 mov.b64 %__gs_lim9, %__gs_lim6;"),
            "{t}"
        );
        // A pointer plus a loaded offset: the shadow the table found something for.
        let t = shadow_move(9, &Shadow::Either(a, b), None, &no_root, &shadow_of);
        assert!(t.starts_with("\tsetp.ne.u64 %__gs_q, %__gs_lim5, -1;\n"), "{t}");
        assert!(
            t.contains("@%__gs_q mov.b64 %__gs_low9, %__gs_low5;")
                && t.contains("@!%__gs_q mov.b64 %__gs_low9, %__gs_low6;"),
            "{t}"
        );
        // Guarded, they would need two predicates: found nowhere where the guard holds (the
        // register's old shadow would judge the new value against the wrong allocation).
        let guard = gpusan_ptx::ast::Guard { negated: true, reg: "%p2".into() };
        for shadow in [Shadow::Select(Some(a), Some(b), "%p1".into()), Shadow::Either(a, b)] {
            let t = shadow_move(9, &shadow, Some(&guard), &no_root, &shadow_of);
            assert_eq!(t, "\t@!%p2 mov.b64 %__gs_low9, 0;\n\t@!%p2 mov.b64 %__gs_lim9, -1;\n");
        }
        // Pointer arithmetic under a guard copies under it.
        let t = shadow_move(9, &Shadow::Copy(a), Some(&guard), &no_root, &shadow_of);
        assert_eq!(t.matches("@!%p2 mov.b64").count(), 3, "{t}");
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

    #[test]
    fn register_widths_for_clearing() {
        let m = gpusan_ptx::parse(
            ".version 9.0\n.target sm_90\n.address_size 64\n.visible .entry k()\n{\n\
             .reg .f32 %f<4>;\n.reg .b64 %rd<2>;\n.reg .f16x2 %h<2>;\n.reg .pred %p<2>;\n.reg .b16 %x;\nret;\n}\n",
        )
        .unwrap();
        let Some(Item::Function(f)) = m.items.iter().find(|i| matches!(i, Item::Function(_))) else { panic!() };
        let b = RegBits::collect(f);
        assert_eq!(b.get("%f3".into()), Some(32));
        assert_eq!(b.get("%rd1".into()), Some(64));
        assert_eq!(b.get("%h0".into()), Some(32));
        assert_eq!(b.get("%x".into()), Some(16));
        assert_eq!(b.get("%p1".into()), None);
    }
}
