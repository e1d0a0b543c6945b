//! `check`: spatial and temporal safety of global memory, checked against the
//! runtime's allocation table through the pointer each address was derived from (its
//! *root*), as cuCatch's base pointer analysis and GPUArmor's root pointer analysis do.
//!
//! # What the pass adds
//!
//! Once per module, the three variables of the device ABI ([`gpusan_abi::RUNTIME_VARS`];
//! every name, code and layout the added code uses is [`gpusan_abi`]'s), which the runtime
//! sets after loading the module and which stay 0 when it does not:
//!
//! ```ptx
//! .visible .const .align 8 .u64 __gpusan_table;    // device address of the allocation table
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
//!    generic access is judged only when `isspacep.global` holds for `a`. A bad access
//!    writes an error record ([`gpusan_abi::record`]; the sequence of
//!    `bench/injection/abi_test.cpp`) and is skipped: its guard becomes "not bad" (and its
//!    old guard, composed with `and.pred`). The same predicate also tests the address's
//!    alignment (`plan::Align`): an access of a typed instruction must sit on a multiple of
//!    its whole width (a `ld.v4.f32` on 16 bytes), or it is reported as
//!    `CODE_MISALIGNED` (before the hardware faults on it), in every state space.
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
//! right after each of its definitions a move sets them (`plan::Shadow`: the root's own after a
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
//!
//! # How the code is laid out
//!
//! One file per stage, each a function from the last stage's plan to its own (ZLUDA's
//! `ptx/src/pass` is the model); this file only orchestrates ([`run_with`], and
//! `instrument_function` for the per-function pipeline):
//!
//! - module: `module` (the facts every function reads, the ABI variables declared first, the
//!   names refused), `declare`; names, codes and layouts of the device ABI come from
//!   [`gpusan_abi`], the pass keeps no copy;
//! - analysis, per function: `roots` (the root pointer analysis on reaching definitions),
//!   `sites` (every access classified: against a root, a shadow, a window, or unchecked →
//!   `SitePlan`), `shadows` (multi-root values → `ShadowPlan`), `onchip` (windows), `groups`
//!   (range checks per address definition, the fast paths), `block` (roots looked up once per
//!   block), `loops` (loops checked once by their range), `heap` (the device heap's calls);
//! - rewrite: `emit` turns the plans into insertions (with `loadmeta`, `sitecode`, `records`,
//!   `shadows`, `spans`, `counting`, the code of each kind), `insert` applies them;
//! - shared leaves: `plan` (roots, shadows, insertions, layout constants), `regs`, `snippet`;
//! - [`run_explained`] prints every stage's plan (`explain`): the stage tests compare those.
//!
//! In debug builds the verifier runs after each stage that rewrites the module.

use std::collections::BTreeMap;

use gpusan_ptx::ast::{Function, Item, Name, Span};
use gpusan_ptx::cfg::Cfg;
use gpusan_ptx::dataflow::RegId;
use gpusan_ptx::Module;

use crate::{Pass, PassError, PassReport};

mod block;
mod config;
mod counting;
mod declare;
mod emit;
mod explain;
mod groups;
mod heap;
mod insert;
mod loadmeta;
mod loops;
mod module;
mod onchip;
mod plan;
mod records;
pub(crate) mod regs;
mod report;
mod roots;
mod shadows;
mod sitecode;
mod sites;
mod snippet;
mod spans;

pub use config::{CheckConfig, LocalBounds, Reaction};
pub use counting::Counting;
pub use report::{CheckFunction, CheckReport};

use module::{check_unused, declare_abi_variables, keep_launchable, ModuleFacts};
use plan::Root;
use regs::RegWidths;
use roots::RootAnalysis;

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

/// Instruments `module` with the default [`CheckConfig`]. `src`, the text it was parsed
/// from, gives each access's PTX line for the error records (0 without it).
pub fn run(module: &mut Module, src: Option<&str>) -> Result<CheckReport, PassError> {
    run_with(module, src, &CheckConfig::default())
}

/// [`run`] with a configuration.
pub fn run_with(module: &mut Module, src: Option<&str>, config: &CheckConfig) -> Result<CheckReport, PassError> {
    let report = instrument_module(module, src, config, None);
    snippet::end_module();
    report
}

/// [`run_with`], and what each stage planned for each function, as text: a section per
/// stage (`sites`, `roots`, `shadows`, `groups`, `block`, `loops`, `spans`, `heap`) under a
/// line naming the function. The stage tests compare these sections.
pub fn run_explained(
    module: &mut Module,
    src: Option<&str>,
    config: &CheckConfig,
) -> Result<(CheckReport, String), PassError> {
    let mut plans = String::new();
    let report = instrument_module(module, src, config, Some(&mut plans));
    snippet::end_module();
    Ok((report?, plans))
}

fn instrument_module(
    module: &mut Module,
    src: Option<&str>,
    config: &CheckConfig,
    mut explain: Option<&mut String>,
) -> Result<CheckReport, PassError> {
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
    let counters = counting::Emit::new(config.counting, &targets);
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

    // Records name their function by number, numbered as the runtime numbers them.
    let defined: Vec<&str> = module
        .items
        .iter()
        .filter_map(|i| match i {
            Item::Function(f) if f.body.is_some() => Some(f.name.as_str()),
            _ => None,
        })
        .collect();
    let mut numbers = gpusan_abi::function_numbers(&defined).into_iter();

    let facts = ModuleFacts::of(module);
    let windows = onchip::Windows::of_module(module, config.local_bounds);
    // First, so that the module stays whole (every symbol the checks use declared) after
    // each stage that rewrites it.
    declare_abi_variables(module, config.counting, facts.uses_heap);
    verify_stage(module, "declaring the device ABI's variables")?;
    let mut report = CheckReport::default();
    for item in &mut module.items {
        let Item::Function(f) = item else { continue };
        if f.body.is_none() {
            continue;
        }
        let index = numbers.next().expect("a number for every defined function");
        let stage = Stage { index, line_of: &line_of, config, counters, windows: &windows, facts: &facts };
        let function_report = instrument_function(f, &stage, explain.as_deref_mut())?;
        if function_report.inserted > 0 {
            keep_launchable(f);
        }
        report.functions.push(function_report);
    }

    verify_stage(module, "rewriting each function")?;
    Ok(report)
}

/// In tests and debug builds, the verifier after a stage that rewrites the module, so that
/// a broken rewrite is blamed on its stage rather than found at the end (or by ptxas).
fn verify_stage(module: &Module, stage: &str) -> Result<(), PassError> {
    if cfg!(debug_assertions) {
        crate::verify::verify(module)
            .map_err(|e| PassError::new(format!("check: the module is broken after {stage}:\n{e}")))?;
    }
    Ok(())
}

/// What every function's pipeline shares.
struct Stage<'x> {
    /// The function's number ([`gpusan_abi::function_numbers`]), the low bits of a
    /// record's [`gpusan_abi::record::KERNEL`].
    index: u32,
    line_of: &'x dyn Fn(Span) -> u32,
    config: &'x CheckConfig,
    counters: counting::Emit,
    windows: &'x onchip::Windows,
    facts: &'x ModuleFacts,
}

/// The per-function pipeline: the analysis stages, each from the plan of the last, then
/// the rewrite of their plans.
fn instrument_function(
    f: &mut Function,
    stage: &Stage,
    explain: Option<&mut String>,
) -> Result<CheckFunction, PassError> {
    let (index, facts) = (stage.index, stage.facts);
    let cfg = Cfg::build(f).map_err(|e| PassError::new(e.to_string()).in_function(f.name))?;
    let mut report = CheckFunction::new(f.name, f.kind, index);
    let heap_calls = if facts.uses_heap { heap::Calls::find(&cfg, f) } else { heap::Calls::default() };
    report.heap_calls = heap_calls.count();
    let (plan, shadow_names) = {
        let function: &Function = f;
        let widths = RegWidths::collect(function);
        let mut analysis = RootAnalysis::new(&cfg, function);
        let windows = stage.windows.with_function(function);
        let mut sites = sites::run(&mut analysis, &widths, &windows, facts.uses_heap, &mut report);
        let shadows = shadows::run(&mut sites);
        // Optimizations: group checks, block-wide lookups of roots that are kernel
        // parameters, and loops checked once by their range; none with the heap's
        // per-access state reloads.
        let candidates = groups::candidates(&mut analysis, &sites.sites, shadows.first);
        let groups = if facts.uses_heap { groups::Plan::default() } else { groups::plan(&candidates, &cfg) };
        let fast_paths = groups::fast_paths(&candidates, &groups, &sites.sites);
        let block_roots = block::select(function, &analysis, &sites.roots, facts);
        let loops = if facts.uses_heap {
            Vec::new()
        } else {
            loops::plan(loops::Input {
                analysis: &mut analysis,
                cfg: &cfg,
                body: function.body.as_deref().unwrap_or_default(),
                sites: &sites.sites,
                roots: &sites.roots,
                candidates: &candidates,
                groups: &groups,
            })
        };
        let registers = analysis.reaching_defs.analysis().registers();
        let root_names = sites
            .roots
            .keys()
            .map(|root| {
                let (Root::Entry(r) | Root::Inst(_, r)) = *root;
                (r, registers.name(r))
            })
            .collect();
        // Only to print the plan: the names of the registers with shadows.
        let shadow_names: BTreeMap<RegId, Name> = match explain {
            Some(_) => shadows.number.keys().map(|&r| (r, registers.name(r))).collect(),
            None => BTreeMap::new(),
        };
        let plan = emit::FunctionPlan {
            sites,
            shadows,
            candidates,
            groups,
            fast_paths,
            block_roots,
            loops,
            heap_calls,
            root_names,
        };
        (plan, shadow_names)
    };
    report.roots = plan.sites.roots.len() as u32;
    report.block_roots = plan.block_roots.len() as u32;
    let context = emit::Context {
        function: index,
        line_of: stage.line_of,
        reaction: stage.config.reaction,
        counters: stage.counters,
        uses_heap: facts.uses_heap,
    };
    let original = explain.is_some().then(|| f.clone());
    let (spans, rewrite) = emit::run(f, &cfg, &plan, &context, &mut report);
    if let (Some(out), Some(function)) = (explain, &original) {
        let explained =
            explain::Explained { function, cfg: &cfg, plan: &plan, spans: &spans, shadow_names: &shadow_names };
        explain::write_function(out, f.name, &explained);
    }
    // Freed before the body is rebuilt, its largest step: in a large kernel the plan and
    // the graph are a tenth of the rebuilt body (50,000 blocks: 820 -> 750 MB at its end).
    drop((cfg, plan, spans, original));
    rewrite.apply(f, &mut report);
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stage that leaves the module broken is named in the error (debug builds, where
    /// tests run).
    #[test]
    fn a_broken_stage_is_blamed() {
        let mut m = gpusan_ptx::parse(
            ".version 9.0\n.target sm_90\n.address_size 64\n.visible .entry k()\n{\n\t.reg .b64 %rd<2>;\n\tret;\n}\n",
        )
        .unwrap();
        assert!(verify_stage(&m, "nothing").is_ok());
        let Some(Item::Function(f)) = m.items.iter_mut().find(|i| matches!(i, Item::Function(_))) else { panic!() };
        f.body.as_mut().unwrap().insert(0, snippet::parse("\tmov.b64 %__gs_nowhere, 0;\n").remove(0));
        let e = verify_stage(&m, "rewriting each function").unwrap_err().to_string();
        assert!(e.contains("after rewriting each function") && e.contains("%__gs_nowhere"), "{e}");
    }
}
