//! One range check per pointer value (cuCatch §4.6.1–4.6.2): accesses through the same
//! definition of the same address register, against the same root, are covered by one
//! check of the whole range they span, placed right after that definition.
//!
//! The grouped check is a fast path, not a replacement: each access keeps its own check
//! behind a branch taken when the group's range is in bounds, so when the range check fails
//! the accesses are judged one by one, exactly as without the optimization, and the `report`
//! reaction still skips only the faulting accesses and reports each. What the optimization
//! saves is the common case: every access in an unrolled body (`[%rd5]`, `[%rd5+4]`, …) or a
//! loop-invariant address inside a loop costs a branch instead of a check.
//!
//! Shared and local accesses group the same way, against their window instead of a root:
//! SGEMM's unrolled inner loop reads `[%r7]`, `[%r7+132]`, … of one shared array through a
//! register defined before the loop, and one range check there covers all 32 reads.
//!
//! Why the placement is sound: the definition `d` is the only definition of the register
//! reaching each member, so every path to a member runs `d` last among the register's
//! definitions, and the register holds at the member the value the group check saw.

use std::collections::{BTreeMap, BTreeSet};

use gpusan_ptx::ast::Name;
use gpusan_ptx::cfg::{Cfg, DomTree, InstId, LoopForest};
use gpusan_ptx::dataflow::{DefSite, RegId};
use gpusan_ptx::semantics::Space;

use super::plan::Align;
use super::roots::RootAnalysis;
use super::sites::Site;

/// One checked access the planner may group.
#[derive(Debug, Clone)]
pub(super) struct Candidate {
    /// Index of the site (instruction).
    pub site: usize,
    pub inst: InstId,
    /// The address register, its printed name, and the constant offset of the access.
    pub reg: RegId,
    pub base: Name,
    pub offset: i64,
    pub width: u32,
    /// Bytes the address must be a multiple of (1: any).
    pub align: u32,
    /// What the range is judged against.
    pub key: Key,
    /// The only definition of `reg` reaching the access, if there is exactly one and it is
    /// an instruction.
    pub def: Option<InstId>,
}

/// What a group's range is judged against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Key {
    /// The allocation of root number `k` (global memory).
    Root(usize),
    /// A shared or local variable (`onchip`), by symbol.
    Window(Name),
}

/// A group: its check goes right after `def`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Group {
    pub def: InstId,
    pub base: Name,
    pub key: Key,
    /// Index (in the planner's input) of the first member: window groups take their
    /// address form from it.
    pub first: usize,
    /// `[base + min, base + end)` covers every member's bytes.
    pub min: i64,
    pub end: i64,
    /// What `base + min` must be modulo the members' largest alignment for every member to
    /// be aligned (see [`alignment`]).
    pub align: Align,
    pub members: u32,
}

#[derive(Debug, Default)]
pub(super) struct Plan {
    pub groups: Vec<Group>,
    /// For each candidate (by index in the input), its group.
    pub group_of: Vec<Option<usize>>,
}

/// The accesses the planner may group: global accesses against a root (not a shadow, which
/// changes along the way: no range check stands for it, so numbers from `first_shadow` on
/// are left out) and window checks with a base register, each with the only definition of
/// its address register reaching it.
pub(super) fn candidates(analysis: &mut RootAnalysis, sites: &[Site], first_shadow: usize) -> Vec<Candidate> {
    let mut out = Vec::new();
    for (index, site) in sites.iter().enumerate() {
        let inst = analysis.insts[site.inst.index()];
        let only_def = |analysis: &mut RootAnalysis, reg| match analysis.reaching(site.inst, reg).as_slice() {
            [DefSite::Inst(d)] => Some(*d),
            _ => None,
        };
        for access in &site.accesses {
            if access.space != Space::Global || access.root >= first_shadow {
                continue;
            }
            let Some((Some(base), offset)) = inst.operands[access.operand].as_address() else { continue };
            let Some(reg) = analysis.resolve(site.inst, base) else { continue };
            let def = only_def(analysis, reg);
            let (width, align, key) = (access.width, access.align, Key::Root(access.root));
            out.push(Candidate { site: index, inst: site.inst, reg, base, offset, width, align, key, def });
        }
        for check in &site.windows {
            let (Some((base, offset)), Some(symbol)) = (check.base_reg(), check.symbol()) else { continue };
            let Some(reg) = analysis.resolve(site.inst, base) else { continue };
            let def = only_def(analysis, reg);
            let (width, align, key) = (check.width, check.align.bytes(), Key::Window(symbol));
            out.push(Candidate { site: index, inst: site.inst, reg, base, offset, width, align, key, def });
        }
    }
    out
}

/// Which sites take the fast path behind their groups: those with every access grouped.
#[derive(Debug, Default)]
pub(super) struct FastPaths {
    /// For each site, the groups covering all its accesses (empty: no fast path).
    pub site_groups: Vec<Vec<usize>>,
    /// The groups some fast path needs: the ones whose check is emitted.
    pub used: BTreeSet<usize>,
}

/// The fast paths of `sites` under `plan` (made from `candidates`).
pub(super) fn fast_paths(candidates: &[Candidate], plan: &Plan, sites: &[Site]) -> FastPaths {
    let mut site_groups: Vec<Vec<usize>> = vec![Vec::new(); sites.len()];
    let mut grouped_accesses = vec![0usize; sites.len()];
    for (c, g) in candidates.iter().zip(&plan.group_of) {
        if let Some(g) = *g {
            grouped_accesses[c.site] += 1;
            if !site_groups[c.site].contains(&g) {
                site_groups[c.site].push(g);
            }
        }
    }
    for (index, site) in sites.iter().enumerate() {
        if grouped_accesses[index] != site.accesses.len() + site.windows.len() {
            site_groups[index].clear();
        }
    }
    let used = site_groups.iter().flatten().copied().collect();
    FastPaths { site_groups, used }
}

/// Groups `candidates`. A group is kept when it saves work: two or more members, or one member
/// inside a loop that does not contain the definition (the check leaves the loop).
pub(super) fn plan(candidates: &[Candidate], cfg: &Cfg) -> Plan {
    let dom = DomTree::dominators(cfg);
    let loops = LoopForest::compute(cfg, &dom);
    let mut by_key: BTreeMap<(InstId, RegId, Key), Vec<usize>> = BTreeMap::new();
    for (i, c) in candidates.iter().enumerate() {
        if let Some(d) = c.def {
            by_key.entry((d, c.reg, c.key)).or_default().push(i);
        }
    }
    let mut plan = Plan { groups: Vec::new(), group_of: vec![None; candidates.len()] };
    for ((def, _, key), members) in by_key {
        let def_block = cfg.block_of(def);
        let leaves_loop = |c: &Candidate| {
            let b = cfg.block_of(c.inst);
            let mut l = loops.innermost(b);
            while let Some(id) = l {
                let lp = loops.get(id);
                if !lp.contains(def_block) {
                    return true;
                }
                l = lp.parent;
            }
            false
        };
        if members.len() < 2 && !members.iter().any(|&m| leaves_loop(&candidates[m])) {
            continue;
        }
        // Offsets are small constants in practice; refuse anything whose span could wrap.
        let min = members.iter().map(|&m| candidates[m].offset).min().unwrap_or(0);
        let end =
            members.iter().map(|&m| candidates[m].offset.saturating_add(candidates[m].width as i64)).max().unwrap_or(0);
        if min.unsigned_abs() > 1 << 40 || end.unsigned_abs() > 1 << 40 {
            continue;
        }
        // Members that cannot all be aligned at once keep their own checks.
        let Some(align) = alignment(members.iter().map(|&m| (candidates[m].offset, candidates[m].align)), min) else {
            continue;
        };
        let g = plan.groups.len();
        let first = members[0];
        plan.groups.push(Group {
            def,
            base: candidates[first].base,
            key,
            first,
            min,
            end,
            align,
            members: members.len() as u32,
        });
        for m in members {
            plan.group_of[m] = Some(g);
        }
    }
    plan
}

/// The one alignment test of `base + min` that holds exactly when every access
/// `(offset, align)` through `base` is aligned: the largest alignment `W` at its access's
/// offset `r`, when every other access lies a multiple of its own alignment away from `r`
/// (alignments are powers of two, so each divides `W`). `None` when they cannot all hold
/// at once: some access is misaligned whatever `base` is.
pub(super) fn alignment(accesses: impl Iterator<Item = (i64, u32)> + Clone, min: i64) -> Option<Align> {
    let (reference, widest) = accesses.clone().max_by_key(|&(offset, align)| (align, std::cmp::Reverse(offset)))?;
    let consistent = accesses.into_iter().all(|(offset, align)| (offset - reference).rem_euclid(i64::from(align)) == 0);
    consistent.then(|| Align::of(widest).moved(min, reference))
}

/// The range check of a group against its root: `%__gs_gok{g}` holds when `[base + min,
/// base + end)` lies inside the root's folded bounds `[low, lim)` (see `loadmeta`: a root
/// found nowhere has the whole address space, a freed one ends at its base). It may only
/// err on the side of failing: then the members' own checks decide.
pub(super) fn check_text(g: usize, group: &Group) -> String {
    let Key::Root(k) = group.key else { unreachable!("window groups are checked by `onchip`") };
    let (base, min, end) = (group.base, group.min, group.end);
    format!(
        "\tadd.s64 %__gs_a, {base}, {min};\n\
         \tadd.s64 %__gs_e, {base}, {end};\n\
         \tsetp.ge.u64 %__gs_gok{g}, %__gs_a, %__gs_low{k};\n\
         \tsetp.le.and.u64 %__gs_gok{g}, %__gs_e, %__gs_lim{k}, %__gs_gok{g};\n{align}",
        align = group.align.text("%__gs_a", &format!("%__gs_gok{g}"), false),
    )
}
