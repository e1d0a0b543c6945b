//! The plans of a function's stages as text, a few lines each: what `sites` found and
//! against which roots, the shadows, the groups, the block-wide lookup, the loops, the
//! runs given two versions, the heap calls. The stage tests (`tests/check_stages.rs`)
//! compare these rather than whole instrumented modules; each section is headed by its
//! stage's name, so a test can keep the ones it is about.

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};

use gpusan_ptx::ast::{Function, Instruction, Name};
use gpusan_ptx::cfg::{Cfg, InstId};
use gpusan_ptx::dataflow::RegId;

use super::emit::FunctionPlan;
use super::groups::Key;
use super::plan::{Root, Shadow};
use super::spans::Span;

/// One function's plans, printable.
pub(super) struct Explained<'x> {
    /// The function as it was before the rewrite.
    pub(super) function: &'x Function,
    pub(super) cfg: &'x Cfg,
    pub(super) plan: &'x FunctionPlan,
    /// The runs the rewrite gave two versions.
    pub(super) spans: &'x [Span],
    /// Names of the registers that have shadows.
    pub(super) shadow_names: &'x BTreeMap<RegId, Name>,
}

/// `inst N `text``: an instruction by its number, as printed, on one line.
fn inst(cfg: &Cfg, function: &Function, i: InstId) -> String {
    let mut text = String::new();
    let _ = gpusan_ptx::printer::write_instruction(&mut text, cfg.inst(function, i));
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    format!("inst {} `{}`", i.0, text.trim_end_matches(';'))
}

impl Explained<'_> {
    fn inst(&self, i: InstId) -> String {
        inst(self.cfg, self.function, i)
    }

    fn instruction(&self, i: InstId) -> &Instruction {
        self.cfg.inst(self.function, i)
    }

    fn reg(&self, r: RegId) -> String {
        match (self.plan.root_names.get(&r), self.shadow_names.get(&r)) {
            (Some(n), _) | (None, Some(n)) => n.to_string(),
            (None, None) => format!("register {}", r.0),
        }
    }

    fn sites(&self, f: &mut fmt::Formatter) -> fmt::Result {
        writeln!(f, "  sites:")?;
        let sites = &self.plan.sites;
        let first_shadow = self.plan.shadows.first;
        for site in &sites.sites {
            let inst = self.instruction(site.inst);
            for access in &site.accesses {
                let address = inst.operands[access.operand].as_address();
                let at = match address {
                    Some((Some(base), offset)) => format!("[{base}{offset:+}]"),
                    _ => "[?]".to_string(),
                };
                let against = if access.root >= first_shadow {
                    format!("shadow {}", access.root)
                } else {
                    format!("root {}", access.root)
                };
                let (space, kind, width) = (access.space, access.kind, access.width);
                let aligned = if access.align > 1 { format!(" aligned {}", access.align) } else { String::new() };
                writeln!(
                    f,
                    "    {}: {kind:?} {space:?} {at} {width} bytes{aligned} against {against}",
                    self.inst(site.inst)
                )?;
            }
            for check in &site.windows {
                writeln!(f, "    {}: {:?} {:?} {check}", self.inst(site.inst), check.kind, check.counted())?;
            }
        }
        for (&i, &n) in &sites.static_in_bounds {
            writeln!(f, "    {}: {n} in bounds by its constant address", self.inst(i))?;
        }
        if sites.sites.is_empty() && sites.static_in_bounds.is_empty() {
            writeln!(f, "    (none)")?;
        }
        Ok(())
    }

    fn roots(&self, f: &mut fmt::Formatter) -> fmt::Result {
        writeln!(f, "  roots:")?;
        let mut by_number: Vec<(&Root, &usize)> = self.plan.sites.roots.iter().collect();
        by_number.sort_by_key(|(_, &k)| k);
        for (root, k) in by_number {
            match *root {
                Root::Entry(r) => writeln!(f, "    root {k}: {} on entry", self.reg(r))?,
                Root::Inst(d, r) => {
                    let malloc = if self.plan.heap_calls.is_result(d) { " (a malloc result)" } else { "" };
                    writeln!(f, "    root {k}: {} from {}{malloc}", self.reg(r), self.inst(d))?;
                }
            }
        }
        if self.plan.sites.roots.is_empty() {
            writeln!(f, "    (none)")?;
        }
        Ok(())
    }

    fn shadows(&self, f: &mut fmt::Formatter) -> fmt::Result {
        writeln!(f, "  shadows:")?;
        let shadows = &self.plan.shadows;
        let mut numbered: Vec<(&RegId, &usize)> = shadows.number.iter().collect();
        numbered.sort_by_key(|(_, &n)| n);
        for (&r, n) in numbered {
            let entry = if shadows.on_entry.contains(&r) { ", its root's on entry" } else { "" };
            writeln!(f, "    shadow {n}: {}{entry}", self.reg(r))?;
        }
        for (&(d, r), shadow) in &shadows.moves {
            let shadow_of = |x: RegId| format!("shadow {}", shadows.number[&x]);
            let side = |x: &Option<RegId>| x.map_or("nothing".to_string(), shadow_of);
            let becomes = match shadow {
                Shadow::Root(root) => format!("root {}", self.plan.sites.roots[root]),
                Shadow::Copy(x) => shadow_of(*x),
                Shadow::Select(a, b, p) => format!("{} if {p}, else {}", side(a), side(b)),
                Shadow::Either(a, b) => format!("{} if found, else {}", shadow_of(*a), shadow_of(*b)),
                Shadow::Nothing => "nothing".to_string(),
            };
            writeln!(f, "    after {}: shadow {} := {becomes}", self.inst(d), shadows.number[&r])?;
        }
        if shadows.number.is_empty() {
            writeln!(f, "    (none)")?;
        }
        Ok(())
    }

    fn groups(&self, f: &mut fmt::Formatter) -> fmt::Result {
        writeln!(f, "  groups:")?;
        let plan = self.plan;
        for (g, group) in plan.groups.groups.iter().enumerate() {
            let against = match group.key {
                Key::Root(k) => format!("root {k}"),
                Key::Window(symbol) => format!("window {symbol}"),
            };
            let used = if plan.fast_paths.used.contains(&g) { "checked" } else { "unused (no fast path needs it)" };
            let aligned = match group.align {
                a if a.is_none() => String::new(),
                a => format!(" (first byte at {} mod {})", a.want, a.bytes()),
            };
            writeln!(
                f,
                "    group {g}: after {}, {} members against {against}, [{}{:+}, {}{:+}){aligned}, {used}",
                self.inst(group.def),
                group.members,
                group.base,
                group.min,
                group.base,
                group.end
            )?;
        }
        for (site, groups) in plan.sites.sites.iter().zip(&plan.fast_paths.site_groups) {
            if !groups.is_empty() {
                writeln!(f, "    fast path of {}: groups {groups:?}", self.inst(site.inst))?;
            }
        }
        if plan.groups.groups.is_empty() {
            writeln!(f, "    (none)")?;
        }
        Ok(())
    }

    fn block(&self, f: &mut fmt::Formatter) -> fmt::Result {
        writeln!(f, "  block:")?;
        for (slot, (k, (param, offset))) in self.plan.block_roots.iter().enumerate() {
            writeln!(f, "    root {k}: slot {slot}, from [{param}+{offset}]")?;
        }
        if self.plan.block_roots.is_empty() {
            writeln!(f, "    (none)")?;
        }
        Ok(())
    }

    fn loops(&self, f: &mut fmt::Formatter) -> fmt::Result {
        writeln!(f, "  loops:")?;
        for version in &self.plan.loops {
            for line in version.to_string().lines() {
                writeln!(f, "    {line}")?;
            }
        }
        if self.plan.loops.is_empty() {
            writeln!(f, "    (none)")?;
        }
        Ok(())
    }

    fn spans(&self, f: &mut fmt::Formatter) -> fmt::Result {
        writeln!(f, "  spans:")?;
        for span in self.spans {
            let at: Vec<usize> = span.sites.iter().map(|&(j, _)| j).collect();
            writeln!(
                f,
                "    statements {}..={}: accesses at statements {at:?}, groups {:?}",
                span.first, span.last, span.groups
            )?;
        }
        if self.spans.is_empty() {
            writeln!(f, "    (none)")?;
        }
        Ok(())
    }

    fn heap(&self, f: &mut fmt::Formatter) -> fmt::Result {
        writeln!(f, "  heap:")?;
        let text = self.plan.heap_calls.to_string();
        for line in text.lines() {
            writeln!(f, "    {line}")?;
        }
        if text.is_empty() {
            writeln!(f, "    (none)")?;
        }
        Ok(())
    }
}

impl fmt::Display for Explained<'_> {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        self.sites(f)?;
        self.roots(f)?;
        self.shadows(f)?;
        self.groups(f)?;
        self.block(f)?;
        self.loops(f)?;
        self.spans(f)?;
        self.heap(f)
    }
}

/// Appends `explained` under a line naming the function.
pub(super) fn write_function(out: &mut String, name: Name, explained: &Explained) {
    let _ = writeln!(out, "function {name}:");
    let _ = write!(out, "{explained}");
}
