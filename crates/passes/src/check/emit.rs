//! The rewrite of one function: every stage's plan ([`FunctionPlan`]) turned into
//! insertions, which `insert` applies in one pass over the body. LOADMETA after each
//! root's definition, shadow moves, group checks, the device heap's calls, versioned loops,
//! two-version runs, each site's checks and slow path, counters, and the declarations and
//! entry code at the top.
//!
//! Labels are numbered in the order the code asks for them, and insertions at one point go
//! in by order and then in reverse of their pushing (`insert`), so the order of the steps
//! of [`run`] is part of the output.

use std::collections::{BTreeMap, HashMap};

use gpusan_ptx::ast::{Function, Name, Span, Statement};
use gpusan_ptx::cfg::{Cfg, InstId};
use gpusan_ptx::dataflow::RegId;

use super::block::{block_lookup, fetch_block_meta, BlockRoots};
use super::config::Reaction;
use super::counting::{self, Counter};
use super::groups;
use super::heap;
use super::loadmeta::{found_nothing, root_meta_k};
use super::loops;
use super::onchip;
use super::plan::{order, Insertion, Layout, Root};
use super::regs::RegBits;
use super::report::CheckFunction;
use super::shadows::{shadow_copy, shadow_move, ShadowPlan};
use super::sitecode::{SiteGen, SlowPath};
use super::sites::{Site, SitePlan};
use super::snippet::{self, parse as snippet};
use super::spans;

/// What the analysis stages decided for one function.
pub(super) struct FunctionPlan {
    pub(super) sites: SitePlan,
    pub(super) shadows: ShadowPlan,
    /// The accesses the group planner saw, and its groups.
    pub(super) candidates: Vec<groups::Candidate>,
    pub(super) groups: groups::Plan,
    pub(super) fast_paths: groups::FastPaths,
    pub(super) block_roots: BlockRoots,
    pub(super) loops: Vec<loops::Version>,
    pub(super) heap_calls: heap::Calls,
    /// The register of each root, by name.
    pub(super) root_names: HashMap<RegId, Name>,
}

/// What the code of a function needs besides its plan.
pub(super) struct Context<'x> {
    /// The function's number ([`gpusan_abi::function_numbers`]).
    pub(super) function: u32,
    pub(super) line_of: &'x dyn Fn(Span) -> u32,
    pub(super) reaction: Reaction,
    pub(super) counters: counting::Emit,
    pub(super) uses_heap: bool,
}

/// The labels of a function, `$__gs_L0`, `$__gs_L1`, … in the order asked for.
#[derive(Default)]
struct Labels {
    used: u32,
}

impl Labels {
    fn next(&mut self) -> String {
        self.used += 1;
        // Four or more a site: spelled out rather than through `format!`.
        let mut l = String::with_capacity(16);
        l.push_str("$__gs_L");
        l.push_str(itoa::Buffer::new().format(self.used - 1));
        l
    }
}

/// The rewrite of `f` by `plan`, to be applied by [`Rewrite::apply`] once the plan and the
/// control-flow graph are dropped; the counts of what is added go to `report`. The runs
/// given two versions are decided here, with the code around them (`spans`), and returned.
pub(super) fn run(
    f: &mut Function,
    cfg: &Cfg,
    plan: &FunctionPlan,
    context: &Context,
    report: &mut CheckFunction,
) -> (Vec<spans::Span>, Rewrite) {
    let mut static_counts = plan.sites.static_in_bounds.clone();
    if !context.counters.counting.is_on() {
        static_counts.clear();
    }
    if plan.sites.sites.is_empty() && plan.heap_calls.is_empty() && static_counts.is_empty() {
        return (Vec::new(), Rewrite::default());
    }
    let function: &Function = f;
    let mut emitter = Emitter {
        cfg,
        plan,
        context,
        layout: if context.uses_heap { Layout::Heap } else { Layout::Folded },
        labels: Labels::default(),
        insertions: Vec::new(),
        entry_code: String::new(),
        tail: Vec::new(),
        static_counts,
        report,
    };
    emitter.loadmeta();
    emitter.shadow_moves(function);
    emitter.group_checks();
    emitter.insertions.extend(plan.heap_calls.insertions(
        cfg,
        function,
        context.function,
        context.line_of,
        &mut || emitter.labels.next(),
    ));
    let body = function.body.as_deref().unwrap_or_default();
    let site_code = SiteGen {
        layout: emitter.layout,
        reaction: context.reaction,
        emit: context.counters,
        function: context.function,
        block_roots: &plan.block_roots,
        reg_bits: RegBits::collect(function),
    };
    emitter.versioned_loops(body);
    let (in_span, spans) = emitter.spans(body, &site_code);
    emitter.site_checks(body, &site_code, &in_span);
    emitter.static_counts();
    let top = emitter.declarations();
    let Emitter { mut insertions, mut tail, .. } = emitter;
    let body_len = f.body.as_ref().map_or(0, Vec::len);
    // Pushed last, of the first kind: before whatever else goes at the top.
    insertions.push(Insertion { at: vec![0], order: 0, stmts: snippet(&top) });
    tail.retain(|t| !t.is_empty());
    if !tail.is_empty() {
        // Unreachable but by the branches to it: a body that ends without `ret` must not
        // fall into it.
        let end = vec![body_len as u32];
        insertions.push(Insertion { at: end, order: order::TAIL, stmts: snippet("\tret;\n") });
    }
    (spans, Rewrite { insertions, tail })
}

/// What [`run`] puts into a function's body: the insertions, and the slow paths that go
/// after its last statement.
#[derive(Default)]
pub(super) struct Rewrite {
    insertions: Vec<Insertion>,
    tail: Vec<SlowPath>,
}

impl Rewrite {
    /// Puts the code into `f`'s body, the body it was planned for; the number of
    /// instructions added goes to `report`.
    pub(super) fn apply(self, f: &mut Function, report: &mut CheckFunction) {
        if self.insertions.is_empty() {
            return;
        }
        let body = f.body.as_mut().expect("code is planned only for a body");
        report.inserted += super::insert::insert_all(body, self.insertions, self.tail);
    }
}

struct Emitter<'x> {
    cfg: &'x Cfg,
    plan: &'x FunctionPlan,
    context: &'x Context<'x>,
    layout: Layout,
    labels: Labels,
    insertions: Vec<Insertion>,
    /// Code at the top of the body, after the declarations: LOADMETA of `.reg` parameters.
    entry_code: String,
    /// Slow paths of sites at the body's top level, in order: after its last statement, out
    /// of the way of the code that runs (a site inside a `{ }` block keeps its own inline,
    /// since a label inside the block is not visible outside it).
    tail: Vec<SlowPath>,
    /// Statically in-bounds accesses by instruction not counted yet (counting builds).
    static_counts: BTreeMap<InstId, u32>,
    report: &'x mut CheckFunction,
}

impl Emitter<'_> {
    /// The slot of root `k` in the block-wide lookup, if it has one.
    fn block_slot(&self, k: usize) -> Option<usize> {
        self.plan.block_roots.keys().position(|&b| b == k)
    }

    /// The path just after instruction `i`.
    fn after(&self, i: InstId) -> Vec<u32> {
        let mut at = self.cfg.inst_path(i).to_vec();
        *at.last_mut().unwrap() += 1;
        at
    }

    /// LOADMETA after each root's definition (at the top for `.reg` parameters); a root of
    /// the block-wide lookup reads its slot instead.
    fn loadmeta(&mut self) {
        for (root, &k) in &self.plan.sites.roots {
            match *root {
                Root::Entry(reg) => {
                    let value = &self.plan.root_names[&reg];
                    let text = root_meta_k(k, value, false, self.layout, &mut || self.labels.next());
                    self.entry_code.push_str(&text);
                }
                Root::Inst(d, reg) => {
                    let text = match self.block_slot(k) {
                        Some(slot) => fetch_block_meta(k, slot),
                        None => {
                            let malloc_result = self.plan.heap_calls.is_result(d);
                            let value = &self.plan.root_names[&reg];
                            root_meta_k(k, value, malloc_result, self.layout, &mut || self.labels.next())
                        }
                    };
                    let at = self.after(d);
                    self.insertions.push(Insertion { at, order: order::LOADMETA, stmts: snippet(&text) });
                }
            }
        }
    }

    /// Shadow moves after the definitions on the way to multi-root addresses, and on entry
    /// for registers read before any definition.
    fn shadow_moves(&mut self, f: &Function) {
        let plan = self.plan;
        let shadows = &plan.shadows;
        for (&(d, r), shadow) in &shadows.moves {
            let guard = self.cfg.inst(f, d).guard.as_ref();
            let root = |root: &Root| {
                let k = plan.sites.roots[root];
                (k, self.block_slot(k))
            };
            let text = shadow_move(shadows.number[&r], shadow, guard, &root, &|x| shadows.number[&x]);
            let at = self.after(d);
            self.insertions.push(Insertion { at, order: order::SHADOW, stmts: snippet(&text) });
        }
        for &r in &shadows.on_entry {
            let k = plan.sites.roots[&Root::Entry(r)];
            self.entry_code.push_str(&shadow_copy(shadows.number[&r], k, self.block_slot(k), None));
        }
    }

    /// The range check of each group some fast path needs, right after its definition.
    fn group_checks(&mut self) {
        let plan = self.plan;
        let sites = &plan.sites.sites;
        for (index, groups) in plan.fast_paths.site_groups.iter().enumerate() {
            if !groups.is_empty() {
                self.report.grouped += (sites[index].accesses.len() + sites[index].windows.len()) as u32;
            }
        }
        self.report.group_checks = plan.fast_paths.used.len() as u32;
        for &g in &plan.fast_paths.used {
            let group = &plan.groups.groups[g];
            let text = match group.key {
                groups::Key::Root(_) => groups::check_text(g, group),
                groups::Key::Window(symbol) => {
                    let site = &sites[plan.candidates[group.first].site];
                    let check = site
                        .windows
                        .iter()
                        .find(|c| c.base_reg().is_some_and(|(b, _)| b == group.base) && c.symbol() == Some(symbol))
                        .expect("a window group's first member is a window check of its site");
                    let mut t = onchip::check_text(&check.spanning(group.min, group.end, group.align));
                    t.push_str(&format!("\tnot.pred %__gs_gok{g}, %__gs_bad;\n"));
                    t
                }
            };
            // Every check hoisted out of the accesses counts as a group check where it runs
            // (loop versioning's hoisted checks too: `counting::Counter::Group`).
            let text = self.context.counters.bump(&[(Counter::Group, 1)]) + &text;
            let at = self.after(group.def);
            self.insertions.push(Insertion { at, order: order::GROUP, stmts: snippet(&text) });
        }
    }

    /// Versioned loops: the range checks and branch in the preheader, the clone after them.
    fn versioned_loops(&mut self, body: &[Statement]) {
        let (plan, counters) = (self.plan, self.context.counters);
        for version in &plan.loops {
            let mut emitted = version.emit(body, &mut || self.labels.next());
            if counters.counting.is_on() {
                // The clone runs the loop's accesses without their checks: count them there
                // too, or the dynamic fraction removed would lose its denominator.
                let mut at: Vec<(usize, u32)> = plan
                    .sites
                    .sites
                    .iter()
                    .filter_map(|s| match self.cfg.inst_path(s.inst) {
                        &[j] if (version.first..=version.last).contains(&(j as usize)) => {
                            let n = (s.accesses.len() + s.windows.len()) as u32
                                + self.static_counts.get(&s.inst).copied().unwrap_or(0);
                            Some((j as usize - version.first, n))
                        }
                        _ => None,
                    })
                    .collect();
                at.sort_unstable();
                for (i, n) in at.into_iter().rev() {
                    emitted.clone.splice(i..i, snippet(&counters.bump(&[(Counter::Access, n)])));
                }
                emitted.checks.insert_str(0, &counters.bump(&[(Counter::Group, version.range_checks())]));
            }
            // The unchecked clone goes inline, where the preheader falls into it, and the
            // checked loop is the branch: ptxas unrolls a loop in that place as it unrolls the
            // program's own (out of line after `ret`, gemm's clone kept nvcc's 4-fold unroll
            // where the native build runs 16 iterations a trip, 1.7x slower with no check left).
            let mut stmts = snippet(&emitted.checks);
            stmts.extend(emitted.clone);
            self.insertions.push(Insertion { at: vec![version.check_at as u32], order: order::BEFORE, stmts });
            self.insertions.push(Insertion {
                at: vec![version.last as u32 + 1],
                order: order::AFTER_ACCESS,
                stmts: snippet(&emitted.after),
            });
            self.report.loops_versioned += 1;
            self.report.loop_hoisted += version.accesses;
        }
    }

    /// Two versions of each straight run of grouped accesses (`spans`); which sites went
    /// into one.
    fn spans(&mut self, body: &[Statement], code: &SiteGen) -> (Vec<bool>, Vec<spans::Span>) {
        let plan = self.plan;
        let sites = &plan.sites.sites;
        let site_paths: Vec<&[u32]> = sites.iter().map(|s| self.cfg.inst_path(s.inst)).collect();
        let spans = spans::find(body, &site_paths, &plan.fast_paths.site_groups, &self.insertions);
        let mut in_span = vec![false; sites.len()];
        // Naive checks by instruction at the body's top level: a run counts its accesses at
        // its entry, since each version runs all of them.
        let static_top: HashMap<u32, InstId> = self
            .static_counts
            .keys()
            .filter_map(|&i| match self.cfg.inst_path(i) {
                [j] => Some((*j, i)),
                _ => None,
            })
            .collect();
        let mut stmts = Vec::new();
        for span in &spans {
            // Both versions of the span: the checked one, then the original statements.
            let fast = self.labels.next();
            let end = self.labels.next();
            let mut naive = span.sites.iter().map(|&(_, s)| naive_checks(&sites[s])).sum::<u32>();
            for j in span.first..=span.last {
                naive += static_top.get(&(j as u32)).and_then(|i| self.static_counts.remove(i)).unwrap_or(0);
            }
            let enter = self.context.counters.bump(&[(Counter::Access, naive), (Counter::Span, 1)]);
            stmts.clear();
            snippet::parse_into(&(enter + &spans::enter_text(&span.groups, &fast)), &mut stmts);
            for (j, stmt) in body.iter().enumerate().take(span.last + 1).skip(span.first) {
                match span.sites.iter().find(|&&(at, _)| at == j) {
                    Some(&(_, s)) => {
                        in_span[s] = true;
                        let Statement::Inst(inst) = stmt else { unreachable!("a span's sites are instructions") };
                        // The version that runs when a group failed: no per-access fast path.
                        let line = (self.context.line_of)(inst.span);
                        let mut site = code.code(&sites[s], inst, &[], line, false, &mut || self.labels.next());
                        stmts.append(&mut site.before);
                        stmts.push(stmt.clone());
                        stmts.append(&mut site.after);
                        self.tail.push(std::mem::take(&mut site.slow));
                    }
                    None => stmts.push(stmt.clone()),
                }
            }
            snippet::parse_into(&format!("\tbra.uni {end};\n{fast}:\n"), &mut stmts);
            // Built in one vector for all and moved into one of its exact length: held until
            // the body is rebuilt, each span's own doubled vector's spare room (which
            // shrinking in place does not give back) was a tenth of a large kernel's spans.
            let mut exact = Vec::with_capacity(stmts.len());
            exact.append(&mut stmts);
            self.report.spans += 1;
            self.insertions.push(Insertion { at: vec![span.first as u32], order: order::BEFORE, stmts: exact });
            self.insertions.push(Insertion {
                at: vec![span.last as u32 + 1],
                order: order::AFTER_ACCESS,
                stmts: snippet(&format!("{end}:\n")),
            });
        }
        (in_span, spans)
    }

    /// The checks of every site outside the spans: the fast path behind its groups, its
    /// checks, the slow path in the tail (inline in a nested block).
    fn site_checks(&mut self, body: &[Statement], code: &SiteGen, in_span: &[bool]) {
        let plan = self.plan;
        for (index, site) in plan.sites.sites.iter().enumerate() {
            if in_span[index] {
                continue;
            }
            let path = self.cfg.inst_path(site.inst);
            let Some(Statement::Inst(inst)) = gpusan_ptx::cfg::statement_at(body, path) else { continue };
            let nested = path.len() > 1;
            let groups = &plan.fast_paths.site_groups[index];
            let line = (self.context.line_of)(inst.span);
            let mut site_code = code.code(site, inst, groups, line, nested, &mut || self.labels.next());
            self.tail.push(std::mem::take(&mut site_code.slow));
            let naive = naive_checks(site) + self.static_counts.remove(&site.inst).unwrap_or(0);
            let bump = self.context.counters.bump(&[(Counter::Access, naive)]);
            let before = if bump.is_empty() {
                site_code.before
            } else {
                let mut before = snippet(&bump);
                before.append(&mut site_code.before);
                before
            };
            self.insertions.push(Insertion { at: path.to_vec(), order: order::BEFORE, stmts: before });
            let mut after = path.to_vec();
            *after.last_mut().unwrap() += 1;
            self.insertions.push(Insertion { at: after, order: order::AFTER_ACCESS, stmts: site_code.after });
        }
    }

    /// Counters of the statically in-bounds accesses left (outside runs, at instructions
    /// with no check).
    fn static_counts(&mut self) {
        for (&i, &n) in &self.static_counts {
            let at = self.cfg.inst_path(i).to_vec();
            let stmts = snippet(&self.context.counters.bump(&[(Counter::Access, n)]));
            self.insertions.push(Insertion { at, order: order::BEFORE, stmts });
        }
    }

    /// The registers the code uses, every root found nowhere until its LOADMETA runs, the
    /// block-wide lookup, then the entry code.
    fn declarations(&mut self) -> String {
        let plan = self.plan;
        // Roots' registers, then the shadows'.
        let n = (plan.sites.roots.len() + plan.shadows.number.len()) as u32;
        let mut top = String::new();
        for (ty, names) in [
            ("b64", &["t", "lo", "hi", "mid", "x", "y", "sz", "a", "e", "eb", "r", "h", "f"][..]),
            ("b32", &["i", "c", "k", "al"][..]),
            ("pred", &["q", "g", "bad", "any", "nb"][..]),
        ] {
            for name in names {
                top.push_str(&format!("\t.reg .{ty} %__gs_{name};\n"));
            }
        }
        let window_group = |g: &usize| matches!(plan.groups.groups[*g].key, groups::Key::Window(_));
        if plan.sites.sites.iter().any(|s| !s.windows.is_empty()) || plan.fast_paths.used.iter().any(window_group) {
            top.push_str(onchip::REGISTERS);
        }
        // A function with only window checks has no roots (and `%r<0>` declares nothing).
        if n > 0 {
            let per_root: &[(&str, &str)] = match self.layout {
                Layout::Folded => &[("b64", "low"), ("b64", "lim"), ("b64", "id")],
                Layout::Heap => {
                    &[("b64", "base"), ("b64", "low"), ("b64", "lim"), ("b64", "id"), ("b32", "st"), ("pred", "ok")]
                }
            };
            for (ty, name) in per_root {
                top.push_str(&format!("\t.reg .{ty} %__gs_{name}<{n}>;\n"));
            }
        }
        if !plan.groups.groups.is_empty() {
            top.push_str(&format!("\t.reg .pred %__gs_gok<{}>;\n", plan.groups.groups.len()));
        }
        if !plan.loops.is_empty() {
            top.push_str(loops::REGISTERS);
        }
        top.push_str(self.context.counters.registers());
        if self.context.uses_heap {
            top.push_str(&heap::declarations(n));
        }
        for k in 0..n as usize {
            top.push_str(&found_nothing(k, self.layout));
        }
        if !plan.block_roots.is_empty() {
            top.push_str(&block_lookup(&plan.block_roots, &mut || self.labels.next()));
        }
        top.push_str(&self.entry_code);
        top
    }
}

/// The checks a naive checker makes at a site: one per access.
fn naive_checks(site: &Site) -> u32 {
    (site.accesses.len() + site.windows.len()) as u32
}
