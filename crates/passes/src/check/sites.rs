//! The first stage of a function: every memory access classified. Global and generic
//! accesses with one root are checked against that root; those with several roots are
//! checked through shadows when the moves can follow the value (`roots::carriers`); shared
//! and local ones against their window (`onchip`); the rest is counted as unchecked. The
//! result, a [`SitePlan`], is what every later stage works from.

use std::collections::BTreeMap;

use gpusan_ptx::cfg::InstId;
use gpusan_ptx::dataflow::RegId;
use gpusan_ptx::semantics::{memory_accesses, AccessKind, MemAccess, Space};

use super::onchip;
use super::plan::{required_alignment, Root};
use super::regs::RegWidths;
use super::report::CheckFunction;
use super::roots::{Carriers, RootAnalysis};

/// An instruction with checked accesses: global and generic ones against their roots, and
/// shared and local ones against their windows.
pub(super) struct Site {
    pub(super) inst: InstId,
    pub(super) accesses: Vec<Access>,
    pub(super) windows: Vec<onchip::WindowCheck>,
}

/// A global or generic access checked against the allocation of a root (or a shadow).
#[derive(Debug, Clone, Copy)]
pub(super) struct Access {
    /// Index of the address operand in the instruction.
    pub(super) operand: usize,
    /// Bytes accessed.
    pub(super) width: u32,
    pub(super) space: Space,
    pub(super) kind: AccessKind,
    /// Root number, or shadow number (from `ShadowPlan::first` on) for an access with
    /// several roots.
    pub(super) root: usize,
    /// Bytes the address must be a multiple of ([`required_alignment`]; 1: any).
    pub(super) align: u32,
}

/// An access with several roots, checked through shadows: where it is in the plan, its
/// address register, and the moves that carry metadata to it.
pub(super) struct CarriedAccess {
    pub(super) site: usize,
    pub(super) access: usize,
    pub(super) address: RegId,
    pub(super) carriers: Carriers,
}

/// The accesses of a function to check, and the roots they are checked against.
#[derive(Default)]
pub(super) struct SitePlan {
    /// Instructions with checked accesses, in order.
    pub(super) sites: Vec<Site>,
    /// Every root looked up, with its number (numbered in the order found; the roots of
    /// carried accesses come after the others).
    pub(super) roots: BTreeMap<Root, usize>,
    /// On-chip accesses in bounds by their constant address, by instruction: no check,
    /// but counted as accesses by counting builds.
    pub(super) static_in_bounds: BTreeMap<InstId, u32>,
    /// Accesses with several roots, whose access's root number the shadow stage sets.
    pub(super) carried: Vec<CarriedAccess>,
}

/// Classifies every access of the function, counting each in `report`. `uses_heap`: the
/// module calls the device heap, whose per-access state reloads shadows cannot carry.
pub(super) fn run(
    analysis: &mut RootAnalysis,
    widths: &RegWidths,
    windows: &onchip::Windows,
    uses_heap: bool,
    report: &mut CheckFunction,
) -> SitePlan {
    let mut finder = Finder { analysis, widths, windows, uses_heap, report, plan: SitePlan::default() };
    for i in (0..finder.analysis.cfg.num_insts() as u32).map(InstId) {
        finder.instruction(i);
    }
    let plan = &mut finder.plan;
    // Multi-root accesses: their roots are looked up like any, numbered after the others.
    for carried in &plan.carried {
        for root in &carried.carriers.roots {
            let n = plan.roots.len();
            plan.roots.entry(*root).or_insert(n);
        }
    }
    finder.plan
}

struct Finder<'x, 'a> {
    analysis: &'x mut RootAnalysis<'a>,
    widths: &'x RegWidths,
    windows: &'x onchip::Windows,
    uses_heap: bool,
    report: &'x mut CheckFunction,
    plan: SitePlan,
}

impl Finder<'_, '_> {
    fn instruction(&mut self, i: InstId) {
        let inst = self.analysis.insts[i.index()];
        let mut site = Site { inst: i, accesses: Vec::new(), windows: Vec::new() };
        for access in memory_accesses(inst) {
            if self.on_chip(i, &access, &mut site) {
                continue;
            }
            self.global(i, &access, &mut site);
        }
        if !site.accesses.is_empty() || !site.windows.is_empty() {
            self.plan.sites.push(site);
        }
    }

    /// Shared and local memory, and generic accesses into their windows; `true` when the
    /// access is settled here, `false` when it is (also) the global check's.
    fn on_chip(&mut self, i: InstId, access: &MemAccess, site: &mut Site) -> bool {
        let inst = self.analysis.insts[i.index()];
        if let Some(check) = onchip::returned(self.analysis, self.widths, self.windows, i, inst) {
            self.report.scope += 1;
            site.windows.push(check);
            return true;
        }
        match onchip::classify(self.analysis, self.widths, self.windows, i, inst, access) {
            onchip::Verdict::Check(check) => {
                match check.counted() {
                    onchip::Counted::Shared => self.report.shared += 1,
                    onchip::Counted::Local => self.report.local += 1,
                    onchip::Counted::Scope => self.report.scope += 1,
                }
                if check.statically_in_bounds() {
                    self.report.static_in_bounds += 1;
                    *self.plan.static_in_bounds.entry(i).or_default() += 1;
                } else {
                    site.windows.push(check);
                }
                true
            }
            onchip::Verdict::Unchecked => {
                self.report.other += 1;
                true
            }
            // A generic access may also reach local memory: both checks apply.
            onchip::Verdict::Elsewhere(scope) => {
                if let Some(check) = scope {
                    self.report.scope += 1;
                    site.windows.push(check);
                }
                false
            }
        }
    }

    /// A global or generic access: checked against its root, or its shadow, or counted as
    /// unchecked.
    fn global(&mut self, i: InstId, access: &MemAccess, site: &mut Site) {
        let inst = self.analysis.insts[i.index()];
        if !matches!(access.space, Space::Global | Space::Generic) || access.kind == AccessKind::Prefetch {
            self.report.other += 1;
            return;
        }
        let Some(width) = access.width.bytes() else {
            self.report.unknown_width += 1;
            return;
        };
        let base = access.address(inst).as_address().and_then(|(b, _)| b);
        let Some(reg) = base.and_then(|b| self.analysis.resolve(i, b)) else {
            self.report.no_root += 1;
            return;
        };
        let roots = self.analysis.roots(i, reg);
        // Both the address and the root are compared as 64-bit values.
        let root_reg = |r: &Root| match *r {
            Root::Entry(r) | Root::Inst(_, r) => r,
        };
        if !self.is_64(reg) || roots.iter().any(|r| !self.is_64(root_reg(r))) {
            self.report.no_root += 1;
            return;
        }
        let align = required_alignment(inst, width);
        let checked =
            |root| Access { operand: access.operand, width, space: access.space, kind: access.kind, root, align };
        match roots.len() {
            0 => self.report.no_root += 1,
            1 => {
                let root = *roots.iter().next().unwrap();
                let n = self.plan.roots.len();
                let k = *self.plan.roots.entry(root).or_insert(n);
                site.accesses.push(checked(k));
                self.report.checked += 1;
            }
            _ => {
                let carried = if self.uses_heap { None } else { self.analysis.carriers(i, reg) };
                // Shadows are 64-bit registers like the roots'.
                match carried.filter(|c| c.moves.iter().all(|(_, r, _)| self.is_64(*r))) {
                    Some(carriers) => {
                        site.accesses.push(checked(usize::MAX));
                        self.plan.carried.push(CarriedAccess {
                            site: self.plan.sites.len(),
                            access: site.accesses.len() - 1,
                            address: reg,
                            carriers,
                        });
                        self.report.checked += 1;
                        self.report.carried += 1;
                    }
                    None => self.report.multi_root += 1,
                }
            }
        }
    }

    fn is_64(&self, reg: RegId) -> bool {
        self.widths.is_64(self.analysis.reaching_defs.analysis().registers().name(reg))
    }
}
