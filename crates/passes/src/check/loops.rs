//! Loop versioning (cuCatch §4.6): an innermost loop whose global accesses walk their
//! pointers by a constant stride, or stay put, gets its accesses checked once, in the
//! preheader, by the whole range each covers over every iteration; when all ranges are in
//! bounds the loop runs as an unchecked clone, otherwise as the checked loop it is today.
//!
//! ```text
//! preheader:  T = trip count (from the exit test); ok = T trusted
//!             ok &= [lo_i, hi_i) inside root k_i's bounds, for every range i
//!             @ok bra CLONE
//! header:     <the loop, every access checked>
//! AFTER:      ...
//!             ret
//! CLONE:      <the loop's statements as they were, labels renamed>
//!             bra.uni AFTER
//! ```
//!
//! What is versioned: an innermost natural loop with one latch and a preheader, all its
//! statements one contiguous run of the body's top-level list (header first, the latch's
//! back branch last), no barrier, call or warp-synchronous instruction (threads of a warp
//! may pick different versions), no cycle but through the header, and every checked access
//! in it covered by a range (the clone is then wholly unchecked; a loop with any other
//! check, or a root looked up inside it, is left as it is).
//!
//! An access is covered when its address register is
//! * loop-invariant (no definition in the loop): range `[a + off, a + off + w)`;
//! * a basic induction variable `v` (its only definition in the loop is an unguarded
//!   `add v, v, d` of a constant, in a block that dominates the latch, so it runs at most
//!   once an iteration and on every iteration that goes round);
//! * defined in the loop by `add a, v, r` (the only definition reaching the access) with
//!   `v` such a variable and `r` invariant or a constant;
//!
//! against a root whose bounds are set before the preheader (its LOADMETA dominates it).
//! Over at most `T` iterations `v` holds `v0 + m * d` with `m` the steps run so far: `0 <=
//! m <= T - 1` where the access (or the `add` reading `v`) comes before the step on every
//! path from the header, `1 <= m <= T` where it comes after, `0 <= m <= T` otherwise. The
//! range is those addresses plus the access's offset and width; exact for nvcc's loops,
//! where an access ending a buffer has its range end at the buffer's end.
//!
//! The trip count `T` comes from the exit test at the latch, `@p bra header` with `p =
//! setp.cmp c, n`, `c` an induction variable of step `s` and `n` invariant: for `ne` (nvcc's
//! count-down `add c, c, -S; setp.ne c, 0`) any `q` with `c0 + q*s == n` exactly bounds the
//! iterations; for `lt`/`le` counting up and `gt`/`ge` counting down (32-bit counters) it is
//! `ceil(distance / |s|)`, trusted only when the counter cannot wrap on the way. Computed
//! in 64 bits at run time; a count that cannot be trusted takes the checked loop.
//!
//! Soundness needs only "every range passes => every access of the clone is in bounds",
//! and each range over-approximates (more iterations, early exits, guarded accesses), so a
//! range check that fails too often costs speed, never a verdict: the checked loop judges
//! each access exactly. A range is also refused when its ends wrap around (`lo <= hi`).

use std::collections::{BTreeMap, HashMap};

use gpusan_ptx::ast::{Name, Operand, Statement};
use gpusan_ptx::cfg::{BlockId, Cfg, DomTree, InstId, Loop, LoopForest};
use gpusan_ptx::dataflow::{DefSite, RegId};
use gpusan_ptx::semantics::Space;

use super::groups;
use super::plan::{Align, Root};
use super::roots::RootAnalysis;
use super::sites::{Access, Site};

/// Registers of the preheader code.
pub(super) const REGISTERS: &str =
    "\t.reg .b64 %__gs_vt;\n\t.reg .b64 %__gs_vx0;\n\t.reg .b64 %__gs_vx1;\n\t.reg .pred %__gs_vok;\n";

/// Largest stride (bytes an iteration) and constant offset taken: with `T < 2^34` every
/// range stays far from wrapping 64 bits before the `lo <= hi` test sees it.
const MAX_STRIDE: i64 = 1 << 20;
const MAX_OFFSET: i64 = 1 << 40;

/// One loop to version.
#[derive(Debug, Clone)]
pub(super) struct Version {
    /// The loop's statements in the body's top-level list: the header's first label to
    /// the latch's back branch.
    pub first: usize,
    pub last: usize,
    /// Top-level index the range checks go before: the preheader's branch to the header,
    /// or the header's first label when the preheader falls through.
    pub check_at: usize,
    /// Accesses covered by ranges.
    pub accesses: u32,
    trip: Option<Trip>,
    ranges: Vec<Range>,
}

/// The exit test `setp.cmp counter, bound` as the loop's condition to go on.
#[derive(Debug, Clone)]
struct Trip {
    counter: Name,
    bound: Bound,
    step: i64,
    /// 32 or 64.
    bits: u32,
    signed: bool,
    rel: Rel,
    /// The test reads the counter after this iteration's step.
    post: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rel {
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bound {
    Reg(Name),
    Imm(i64),
}

/// The bytes `[b + min + stride*m, b + end + stride*m)` for every step count `m` the
/// accesses can see (`steps`), `b = start (+ addend)` in the preheader, checked against
/// root `k`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Range {
    k: usize,
    start: Name,
    addend: Option<Name>,
    stride: Stride,
    steps: Steps,
    min: i64,
    end: i64,
    /// What `b` must be modulo the accesses' largest alignment for every access to be
    /// aligned on the first step; the stride keeps them so (a constant one is a multiple of
    /// it, a register one is tested).
    align: Align,
}

/// Which values of an induction variable an access reads over iterations `0..T`: how many
/// of its steps have run by then.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Steps {
    /// Before this iteration's step: `0..=T-1`.
    Before,
    /// After it: `1..=T`.
    After,
    /// Either (or no induction variable): `0..=T`.
    Any,
}

impl Steps {
    /// The step counts as `(lowest, highest - T)`.
    fn bounds(self) -> (i64, i64) {
        match self {
            Steps::Before => (0, -1),
            Steps::After => (1, 0),
            Steps::Any => (0, 0),
        }
    }
}

/// An address as `start + addend + imm + stride * m` after `m` steps.
struct Form {
    start: Name,
    addend: Option<Name>,
    imm: i64,
    stride: Stride,
    steps: Steps,
}

/// What an induction variable steps by: a constant, or a loop-invariant register (its
/// sign known only at run time, where it must also be small: `|s| <= 2^28`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Stride {
    Const(i64),
    Reg(Name),
}

impl Stride {
    fn fits(self) -> bool {
        match self {
            Stride::Const(c) => c.abs() <= MAX_STRIDE,
            Stride::Reg(_) => true,
        }
    }
}

/// Bound on a register stride's magnitude, checked at run time: with `T < 2^34`, `s * T`
/// stays far inside 64 bits.
const MAX_REG_STRIDE: i64 = 1 << 28;

/// What the planner needs of the pass's analysis.
pub(super) struct Input<'x, 'a> {
    pub analysis: &'x mut RootAnalysis<'a>,
    pub cfg: &'a Cfg,
    pub body: &'a [Statement],
    pub sites: &'x [Site],
    pub roots: &'x BTreeMap<Root, usize>,
    pub candidates: &'x [groups::Candidate],
    pub groups: &'x groups::Plan,
}

/// The loops of a function to version, in body order.
pub(super) fn plan(input: Input) -> Vec<Version> {
    let Input { analysis, cfg, body, sites, roots, candidates, groups } = input;
    let dom = DomTree::dominators(cfg);
    let forest = LoopForest::compute(cfg, &dom);
    let mut has_child = vec![false; forest.len()];
    for l in forest.loops() {
        if let Some(p) = l.parent {
            has_child[p.index()] = true;
        }
    }
    let mut root_def: HashMap<usize, Option<InstId>> = HashMap::new();
    for (root, &k) in roots {
        root_def.insert(
            k,
            match *root {
                Root::Entry(_) => None,
                Root::Inst(d, _) => Some(d),
            },
        );
    }
    let mut out = Vec::new();
    for (id, lp) in forest.loops().iter().enumerate() {
        if has_child[id] {
            continue;
        }
        let mut l = LoopPlanner { analysis: &mut *analysis, cfg, dom: &dom, lp };
        if let Some(v) = l.version(body, sites, &root_def, candidates, groups) {
            out.push(v);
        }
    }
    out.sort_by_key(|v| v.first);
    out
}

struct LoopPlanner<'x, 'a> {
    analysis: &'x mut RootAnalysis<'a>,
    cfg: &'a Cfg,
    dom: &'x DomTree,
    lp: &'x Loop,
}

/// Instructions a clone may not hold: both versions would have to meet at the same
/// barrier or warp-wide instruction, and calls and indirect branches are not followed.
fn blocks_cloning(inst: &gpusan_ptx::ast::Instruction) -> bool {
    matches!(
        inst.opcode.as_str(),
        "bar"
            | "barrier"
            | "call"
            | "brx"
            | "wmma"
            | "mma"
            | "wgmma"
            | "setmaxnreg"
            | "elect"
            | "shfl"
            | "vote"
            | "match"
            | "redux"
            | "ldmatrix"
            | "stmatrix"
            | "tcgen05"
            | "activemask"
    ) || inst.modifiers().any(|m| m == "sync" || m == "aligned")
}

impl LoopPlanner<'_, '_> {
    fn contains_inst(&self, i: InstId) -> bool {
        self.lp.contains(self.cfg.block_of(i))
    }

    /// Definitions of `reg` inside the loop (`None` when one is a `.reg` parameter's entry).
    fn loop_defs(&self, reg: RegId) -> Vec<InstId> {
        let a = self.analysis.reaching_defs.analysis();
        let mut out = Vec::new();
        for &d in a.defs_of(reg) {
            if let DefSite::Inst(i) = a.defs()[d as usize].site {
                if self.contains_inst(i) {
                    out.push(i);
                }
            }
        }
        out
    }

    fn invariant(&self, reg: RegId) -> bool {
        self.loop_defs(reg).is_empty()
    }

    /// The step of `reg` when it is a basic induction variable of the loop, and the
    /// instruction stepping it and its width in bits.
    fn induction(&self, reg: RegId) -> Option<(i64, InstId, u32)> {
        match self.induction_by(reg)? {
            (Stride::Const(step), d, bits) => Some((step, d, bits)),
            _ => None,
        }
    }

    /// [`Self::induction`], also taking a loop-invariant register as the step.
    fn induction_by(&self, reg: RegId) -> Option<(Stride, InstId, u32)> {
        let defs = self.loop_defs(reg);
        let [d] = defs[..] else { return None };
        let inst = self.analysis.insts[d.index()];
        if inst.guard.is_some() || self.analysis.reaching_defs.analysis().operands().defs(d) != [reg] {
            return None;
        }
        let mut m = inst.modifiers();
        let bits = match (m.next(), m.next()) {
            (Some("s64" | "u64"), None) => 64,
            (Some("s32" | "u32"), None) => 32,
            _ => return None,
        };
        let is_reg = |k: usize| match inst.operands.get(k) {
            Some(Operand::Name(n)) => self.analysis.resolve(d, *n) == Some(reg),
            _ => false,
        };
        let by = |k: usize| match inst.operands.get(k) {
            Some(Operand::Int(v)) if v.as_i64() != 0 => Some(Stride::Const(v.as_i64())),
            Some(Operand::Name(n)) if n.starts_with('%') && bits == 64 => {
                self.analysis.resolve(d, *n).filter(|&r| r != reg && self.invariant(r)).map(|_| Stride::Reg(*n))
            }
            _ => None,
        };
        let step = match inst.opcode.as_str() {
            "add" if is_reg(1) => by(2)?,
            "add" if is_reg(2) => by(1)?,
            "sub" if is_reg(1) => match by(2)? {
                Stride::Const(c) => Stride::Const(c.checked_neg()?),
                Stride::Reg(_) => return None,
            },
            _ => return None,
        };
        // Every iteration that goes round runs it, and (no inner cycle) at most once.
        let latch = self.lp.latches[0];
        if !self.dom.dominates(self.cfg.block_of(d), latch) {
            return None;
        }
        Some((step, d, bits))
    }

    /// No cycle in the loop but through its header: a block runs at most once an iteration.
    fn acyclic(&self) -> bool {
        let n = self.cfg.num_blocks();
        let mut state = vec![0u8; n];
        fn visit(p: &LoopPlanner, b: BlockId, state: &mut [u8]) -> bool {
            state[b.index()] = 1;
            for &s in p.cfg.succs(b) {
                if s == p.lp.header || !p.lp.contains(s) {
                    continue;
                }
                let seen = state[s.index()];
                if seen == 1 || (seen == 0 && !visit(p, s, state)) {
                    return false;
                }
            }
            state[b.index()] = 2;
            true
        }
        visit(self, self.lp.header, &mut state)
    }

    fn version(
        &mut self,
        body: &[Statement],
        sites: &[Site],
        root_def: &HashMap<usize, Option<InstId>>,
        candidates: &[groups::Candidate],
        groups: &groups::Plan,
    ) -> Option<Version> {
        let lp = self.lp;
        let cfg = self.cfg;
        let (&[latch], Some(pre)) = (&lp.latches[..], lp.preheader) else { return None };
        // Where the loop's statements are, all at the top level and in one run.
        let top = |i: InstId| match cfg.inst_path(i) {
            [j] => Some(*j as usize),
            _ => None,
        };
        let header = cfg.block(lp.header);
        let j0 = top(header.insts().next()?)?;
        let mut first = j0;
        while first > 0 && matches!(body[first - 1], Statement::Label(..) | Statement::Loc(_) | Statement::Pragma(_)) {
            first -= 1;
        }
        while first < j0 && !matches!(body[first], Statement::Label(..)) {
            first += 1;
        }
        let Statement::Label(..) = body[first] else { return None };
        let back = cfg.block(latch).insts().next_back()?;
        let last = top(back)?;
        let mut count = 0usize;
        for &b in &lp.blocks {
            for i in cfg.block(b).insts() {
                let j = top(i)?;
                if j < first || j > last || blocks_cloning(self.analysis.insts[i.index()]) {
                    return None;
                }
                count += 1;
            }
        }
        let mut in_range = 0usize;
        for s in &body[first..=last] {
            match s {
                Statement::Inst(_) => in_range += 1,
                Statement::Label(..) | Statement::Loc(_) | Statement::Pragma(_) => {}
                _ => return None,
            }
        }
        if in_range != count || !self.acyclic() {
            return None;
        }
        // The back branch: to the header, and nowhere else.
        let back_inst = self.analysis.insts[back.index()];
        let to_header = |o: &Operand| matches!(o, Operand::Name(n) if header.labels.contains(n));
        if back_inst.opcode.as_str() != "bra" || back_inst.operands.len() != 1 || !to_header(&back_inst.operands[0]) {
            return None;
        }
        // Where the checks go: the preheader's last instruction when it branches (to the
        // header), else the header's label it falls into.
        let pre_block = cfg.block(pre);
        let pre_last = pre_block.insts().next_back()?;
        let check_at = if self.analysis.insts[pre_last.index()].opcode.as_str() == "bra" {
            top(pre_last)?
        } else {
            if top(pre_last)? + 1 > first {
                return None;
            }
            if !body[top(pre_last)? + 1..first].iter().all(|s| matches!(s, Statement::Loc(_) | Statement::Pragma(_))) {
                return None;
            }
            first
        };

        // A root looked up inside the loop, or a group check there for an access outside:
        // the clone would skip code that later code needs.
        if root_def.values().flatten().any(|&d| self.contains_inst(d)) {
            return None;
        }
        for (c, g) in candidates.iter().zip(&groups.group_of) {
            if let Some(g) = *g {
                if self.contains_inst(groups.groups[g].def) && !self.contains_inst(c.inst) {
                    return None;
                }
            }
        }

        // Every checked access in the loop needs a range.
        type RangeKey = (usize, Name, Option<Name>, Stride, Steps);
        // The range's ends, and each access's first byte and alignment.
        type Covered = (i64, i64, Vec<(i64, u32)>);
        let mut ranges: BTreeMap<RangeKey, Covered> = BTreeMap::new();
        let mut covered = 0usize;
        let mut accesses = 0u32;
        let mut trip: Option<Option<Trip>> = None;
        for site in sites {
            if !self.contains_inst(site.inst) {
                continue;
            }
            if !site.windows.is_empty() {
                return None;
            }
            let inst = self.analysis.insts[site.inst.index()];
            for &Access { operand, width: w, space, root: k, align, .. } in &site.accesses {
                if !matches!(space, Space::Global | Space::Generic) {
                    return None;
                }
                // The root's bounds are set before the preheader ends.
                if let Some(d) = root_def.get(&k)? {
                    if !self.dom.dominates(cfg.block_of(*d), pre) {
                        return None;
                    }
                }
                let (Some(base), offset) = inst.operands[operand].as_address()? else { return None };
                let reg = self.analysis.resolve(site.inst, base)?;
                let Form { start, addend, imm, stride, steps } = self.form(site.inst, base, reg)?;
                if stride != Stride::Const(0) && trip.get_or_insert_with(|| self.trip(latch, back)).is_none() {
                    return None;
                }
                let min = offset.checked_add(imm)?;
                let end = min.checked_add(i64::from(w))?;
                if min.abs() > MAX_OFFSET || end.abs() > MAX_OFFSET {
                    return None;
                }
                let e = ranges.entry((k, start, addend, stride, steps)).or_insert((min, end, Vec::new()));
                e.0 = e.0.min(min);
                e.1 = e.1.max(end);
                e.2.push((min, align));
                accesses += 1;
            }
            covered += 1;
        }
        if covered == 0 {
            return None;
        }
        let mut versioned = Vec::with_capacity(ranges.len());
        for ((k, start, addend, stride, steps), (min, end, aligns)) in ranges {
            // Accesses that cannot all be aligned, or a constant stride that leaves the
            // alignment, are misaligned on some iteration: the checked loop reports them.
            let align = groups::alignment(aligns.iter().copied(), 0)?;
            if matches!(stride, Stride::Const(c) if c.rem_euclid(i64::from(align.bytes())) != 0) {
                return None;
            }
            versioned.push(Range { k, start, addend, stride, steps, min, end, align });
        }
        let ranges = versioned;
        Some(Version { first, last, check_at, accesses, trip: trip.flatten(), ranges })
    }

    /// The address in `base` (register `reg`) at `at` as `start + addend + imm + m*stride`,
    /// `start` and `addend` registers as they are in the preheader.
    fn form(&mut self, at: InstId, base: Name, reg: RegId) -> Option<Form> {
        let plain = |start, addend, imm, stride, steps| Form { start, addend, imm, stride, steps };
        if self.invariant(reg) {
            return Some(plain(base, None, 0, Stride::Const(0), Steps::Any));
        }
        if let Some((step, u, 64)) = self.induction_by(reg) {
            return step.fits().then(|| plain(base, None, 0, step, self.steps_before(u, at)));
        }
        let [DefSite::Inst(d)] = self.analysis.reaching(at, reg)[..] else { return None };
        let inst = self.analysis.insts[d.index()];
        if !self.contains_inst(d) || inst.guard.is_some() || inst.opcode.as_str() != "add" {
            return None;
        }
        if !matches!(inst.modifiers().collect::<Vec<_>>()[..], ["s64"] | ["u64"]) {
            return None;
        }
        let name = |k: usize| match inst.operands.get(k) {
            Some(Operand::Name(n)) if n.starts_with('%') => Some(*n),
            _ => None,
        };
        for (iv, other) in [(1, 2), (2, 1)] {
            let Some(v) = name(iv) else { continue };
            let Some(vr) = self.analysis.resolve(d, v) else { continue };
            let Some((step, u, 64)) = self.induction_by(vr) else { continue };
            if !step.fits() {
                return None;
            }
            let steps = self.steps_before(u, d);
            match inst.operands.get(other) {
                Some(Operand::Int(c)) => return Some(plain(v, None, c.as_i64(), step, steps)),
                Some(Operand::Name(n)) if n.starts_with('%') => {
                    let r = self.analysis.resolve(d, *n)?;
                    return self.invariant(r).then(|| plain(v, Some(*n), 0, step, steps));
                }
                _ => return None,
            }
        }
        None
    }

    /// How many steps `u` of an induction variable have run when `r` reads it, in
    /// iteration `j` (from 0): `j + 1` when `u` comes first on every path from the header,
    /// `j` when `r` does, either otherwise (the body has no cycle but through the header).
    fn steps_before(&self, u: InstId, r: InstId) -> Steps {
        let first = |a: InstId, b: InstId| {
            let (ba, bb) = (self.cfg.block_of(a), self.cfg.block_of(b));
            if ba == bb {
                a < b
            } else {
                self.dom.dominates(ba, bb)
            }
        };
        if first(u, r) {
            Steps::After
        } else if first(r, u) {
            Steps::Before
        } else {
            Steps::Any
        }
    }

    /// The exit test at the latch's back branch `back`, when it bounds the iterations.
    fn trip(&mut self, latch: BlockId, back: InstId) -> Option<Trip> {
        let bra = self.analysis.insts[back.index()];
        let guard = bra.guard.as_ref()?;
        let p = self.analysis.resolve(back, guard.reg)?;
        let [DefSite::Inst(s)] = self.analysis.reaching(back, p)[..] else { return None };
        let setp = self.analysis.insts[s.index()];
        if self.cfg.block_of(s) != latch || setp.guard.is_some() || setp.opcode.as_str() != "setp" {
            return None;
        }
        if setp.operands.len() != 3 || !matches!(setp.operands[0], Operand::Name(_)) {
            return None;
        }
        let mods: Vec<&str> = setp.modifiers().collect();
        let [cmp, ty] = mods[..] else { return None };
        let (bits, signed) = match ty {
            "s32" => (32, true),
            "u32" => (32, false),
            "b32" => (32, true),
            "s64" => (64, true),
            "u64" => (64, false),
            "b64" => (64, true),
            _ => return None,
        };
        let unsigned_cmp = matches!(cmp, "lo" | "ls" | "hi" | "hs");
        let signed = signed && !unsigned_cmp;
        // The test as "a rel b"; `eq` only as the negation of `ne`.
        let (rel, negated) = match (cmp, guard.negated) {
            ("eq", true) => (Rel::Ne, false),
            ("eq", false) | ("ne", true) => return None,
            ("ne", false) => (Rel::Ne, false),
            ("lt" | "lo", n) => (Rel::Lt, n),
            ("le" | "ls", n) => (Rel::Le, n),
            ("gt" | "hi", n) => (Rel::Gt, n),
            ("ge" | "hs", n) => (Rel::Ge, n),
            _ => return None,
        };
        // Which operand is the counter; the test as "counter rel bound".
        let operand = |k: usize| -> Option<(Option<RegId>, &Operand)> {
            match &setp.operands[k] {
                o @ Operand::Name(n) if n.starts_with('%') => Some((self.analysis.resolve(s, *n), o)),
                o @ Operand::Int(_) => Some((None, o)),
                _ => None,
            }
        };
        let (a, b) = (operand(1)?, operand(2)?);
        let (counter, bound, swapped) = match (a.0.and_then(|r| self.induction(r)), b.0.and_then(|r| self.induction(r)))
        {
            (Some(iv), None) => ((a.1, iv), b, false),
            (None, Some(iv)) => ((b.1, iv), a, true),
            _ => return None,
        };
        let bound = match bound {
            (Some(r), Operand::Name(n)) if self.invariant(r) => Bound::Reg(*n),
            (None, Operand::Int(v)) => Bound::Imm(v.as_i64()),
            _ => return None,
        };
        // Counter first, then the condition to go round (`@!p` negates the test).
        let rel = match (rel, swapped) {
            (Rel::Lt, true) => Rel::Gt,
            (Rel::Le, true) => Rel::Ge,
            (Rel::Gt, true) => Rel::Lt,
            (Rel::Ge, true) => Rel::Le,
            (r, _) => r,
        };
        let rel = match (rel, negated) {
            (Rel::Lt, true) => Rel::Ge,
            (Rel::Le, true) => Rel::Gt,
            (Rel::Gt, true) => Rel::Le,
            (Rel::Ge, true) => Rel::Lt,
            (r, _) => r,
        };
        let (Operand::Name(counter_name), (step, step_inst, step_bits)) = counter else { return None };
        if step_bits != bits {
            return None;
        }
        let ok = match rel {
            Rel::Ne => true,
            Rel::Lt | Rel::Le => step > 0 && bits == 32,
            Rel::Gt | Rel::Ge => step < 0 && bits == 32,
        };
        if !ok || step.abs() > MAX_STRIDE {
            return None;
        }
        // The test sees this iteration's step when the step comes first.
        let post = self.cfg.block_of(step_inst) != latch || step_inst < s;
        Some(Trip { counter: *counter_name, bound, step, bits, signed, rel, post })
    }
}

impl Trip {
    /// Sets `%__gs_vt` to a bound on the iterations and `%__gs_vok` to whether it holds.
    fn text(&self) -> String {
        let Trip { counter, bound, step, bits, signed, rel, post } = self;
        let post = i64::from(*post);
        let mut t = String::new();
        // The counter and the bound in 64 bits: `%__gs_vx0`, `%__gs_vx1`.
        if *bits == 64 {
            t.push_str(&format!("\tmov.b64 %__gs_vx0, {counter};\n"));
        } else {
            let ext = if *signed { "s64.s32" } else { "u64.u32" };
            t.push_str(&format!("\tcvt.{ext} %__gs_vx0, {counter};\n"));
        }
        match bound {
            Bound::Reg(n) if *bits == 64 => t.push_str(&format!("\tmov.b64 %__gs_vx1, {n};\n")),
            Bound::Reg(n) => {
                let ext = if *signed { "s64.s32" } else { "u64.u32" };
                t.push_str(&format!("\tcvt.{ext} %__gs_vx1, {n};\n"));
            }
            Bound::Imm(v) => {
                // As the comparison reads the immediate: in the counter's width.
                let v = match (bits, signed) {
                    (32, true) => i64::from(*v as i32),
                    (32, false) => i64::from(*v as u32),
                    _ => *v,
                };
                t.push_str(&format!("\tmov.b64 %__gs_vx1, {v};\n"));
            }
        }
        match rel {
            // Any q >= post with c0 + q*s == n (exactly) ends the loop by iteration q.
            Rel::Ne => {
                t.push_str("\tsub.s64 %__gs_vx1, %__gs_vx1, %__gs_vx0;\n");
                t.push_str(&exact_quotient(*step));
                t.push_str(&format!(
                    "\tsetp.ge.and.s64 %__gs_vok, %__gs_vt, {post}, %__gs_vok;\n\
                     \tsetp.le.and.s64 %__gs_vok, %__gs_vt, 4294967295, %__gs_vok;\n"
                ));
                if post == 0 {
                    t.push_str("\tadd.s64 %__gs_vt, %__gs_vt, 1;\n");
                }
            }
            // The distance left; T = max(1, ceil(distance / |s|) - post + 1), trusted when
            // the counter does not wrap before the last test (c0 + T*s in range).
            Rel::Lt | Rel::Le | Rel::Gt | Rel::Ge => {
                let s = step.abs();
                let (diff, extra) = match rel {
                    Rel::Lt => ("sub.s64 %__gs_vt, %__gs_vx1, %__gs_vx0", 0),
                    Rel::Le => ("sub.s64 %__gs_vt, %__gs_vx1, %__gs_vx0", 1),
                    Rel::Gt => ("sub.s64 %__gs_vt, %__gs_vx0, %__gs_vx1", 0),
                    _ => ("sub.s64 %__gs_vt, %__gs_vx0, %__gs_vx1", 1),
                };
                let add = extra + (s - 1) + s * (1 - post);
                let (cmp, limit) = match (step > &0, signed) {
                    (true, true) => ("le", i64::from(i32::MAX)),
                    (true, false) => ("le", i64::from(u32::MAX)),
                    (false, true) => ("ge", i64::from(i32::MIN)),
                    (false, false) => ("ge", 0),
                };
                // Floor or truncation alike: a quotient below 1 becomes 1 either way.
                let divide = match s.count_ones() {
                    1 => format!("shr.s64 %__gs_vt, %__gs_vt, {}", s.trailing_zeros()),
                    _ => format!("div.s64 %__gs_vt, %__gs_vt, {s}"),
                };
                t.push_str(&format!(
                    "\t{diff};\n\
                     \tadd.s64 %__gs_vt, %__gs_vt, {add};\n\
                     \t{divide};\n\
                     \tmax.s64 %__gs_vt, %__gs_vt, 1;\n\
                     \tmul.lo.s64 %__gs_vx1, %__gs_vt, {step};\n\
                     \tadd.s64 %__gs_vx1, %__gs_vx0, %__gs_vx1;\n\
                     \tsetp.{cmp}.s64 %__gs_vok, %__gs_vx1, {limit};\n"
                ));
            }
        }
        t
    }
}

/// `%__gs_vt = %__gs_vx1 / step` and `%__gs_vok` whether the division is exact. A power of
/// two divides by a shift and a mask: ptxas lowers `div.s64` to a call of a division
/// routine, and a function with a call loses the loop unrolling ptxas gives the native
/// build (gemm's clone ran 4 iterations a trip against the native 16, 1.7x slower).
/// Other steps, rare in nvcc's output, keep the division.
fn exact_quotient(step: i64) -> String {
    let s = step.unsigned_abs();
    if s.count_ones() == 1 {
        let neg = if step < 0 { "\tneg.s64 %__gs_vt, %__gs_vt;\n" } else { "" };
        format!(
            "\tand.b64 %__gs_vx0, %__gs_vx1, {};\n\
             \tsetp.eq.s64 %__gs_vok, %__gs_vx0, 0;\n\
             \tshr.s64 %__gs_vt, %__gs_vx1, {};\n{neg}",
            s - 1,
            s.trailing_zeros()
        )
    } else {
        format!(
            "\tdiv.s64 %__gs_vt, %__gs_vx1, {step};\n\
             \tmul.lo.s64 %__gs_vx0, %__gs_vt, {step};\n\
             \tsetp.eq.s64 %__gs_vok, %__gs_vx0, %__gs_vx1;\n"
        )
    }
}

impl Range {
    /// `%__gs_vok` stays set when the range lies inside root `k`'s bounds.
    fn text(&self) -> String {
        let Range { k, start, addend, stride, steps, min, end, align } = self;
        // The constant parts of both ends; the end that moves with T gets `stride * T`.
        let (lowest, highest) = steps.bounds();
        let mut t = match addend {
            Some(r) => format!("\tadd.s64 %__gs_x, {start}, {r};\n"),
            None => format!("\tmov.b64 %__gs_x, {start};\n"),
        };
        t.push_str(&align.text("%__gs_x", "%__gs_vok", false));
        if let Stride::Reg(s) = stride {
            t.push_str(&Align::of(align.bytes()).text(s, "%__gs_vok", false));
        }
        match *stride {
            Stride::Const(s) => {
                let (lo, hi) = match s {
                    0 => (*min, *end),
                    s if s > 0 => (min + s * lowest, end + s * highest),
                    s => (min + s * highest, end + s * lowest),
                };
                t.push_str(&format!("\tadd.s64 %__gs_a, %__gs_x, {lo};\n\tadd.s64 %__gs_e, %__gs_x, {hi};\n"));
                if s != 0 {
                    t.push_str(&format!("\tmul.lo.s64 %__gs_vx0, %__gs_vt, {s};\n"));
                    let moved = if s > 0 { "%__gs_e" } else { "%__gs_a" };
                    t.push_str(&format!("\tadd.s64 {moved}, {moved}, %__gs_vx0;\n"));
                }
            }
            // From `x + s*lowest`, the walk `d = s * (T + highest - lowest)` goes down or up
            // by the sign of `s`.
            Stride::Reg(s) => {
                t.push_str(&format!(
                    "\tsetp.ge.and.s64 %__gs_vok, {s}, {}, %__gs_vok;\n\tsetp.le.and.s64 %__gs_vok, {s}, {MAX_REG_STRIDE}, %__gs_vok;\n",
                    -MAX_REG_STRIDE
                ));
                if lowest == 1 {
                    t.push_str(&format!("\tadd.s64 %__gs_x, %__gs_x, {s};\n"));
                }
                t.push_str(&format!("\tmul.lo.s64 %__gs_vx0, %__gs_vt, {s};\n"));
                if highest - lowest == -1 {
                    t.push_str(&format!("\tsub.s64 %__gs_vx0, %__gs_vx0, {s};\n"));
                }
                t.push_str(&format!(
                    "\tadd.s64 %__gs_a, %__gs_x, {min};\n\tadd.s64 %__gs_e, %__gs_x, {end};\n\
                     \tsetp.lt.s64 %__gs_q, %__gs_vx0, 0;\n\
                     \t@%__gs_q add.s64 %__gs_a, %__gs_a, %__gs_vx0;\n\
                     \t@!%__gs_q add.s64 %__gs_e, %__gs_e, %__gs_vx0;\n"
                ));
            }
        }
        t.push_str(&format!(
            "\tsetp.ge.and.u64 %__gs_vok, %__gs_a, %__gs_low{k}, %__gs_vok;\n\
             \tsetp.le.and.u64 %__gs_vok, %__gs_e, %__gs_lim{k}, %__gs_vok;\n\
             \tsetp.le.and.u64 %__gs_vok, %__gs_a, %__gs_e, %__gs_vok;\n"
        ));
        t
    }
}

/// The plan of one loop (`explain`): its statements, where the checks go, and each range.
impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(
            f,
            "loop statements {}..={}: checked before statement {}, {} accesses by {} ranges",
            self.first,
            self.last,
            self.check_at,
            self.accesses,
            self.ranges.len()
        )?;
        match &self.trip {
            Some(t) => {
                let bound = match t.bound {
                    Bound::Reg(n) => n.to_string(),
                    Bound::Imm(v) => v.to_string(),
                };
                let (sign, when) = (if t.signed { "s" } else { "u" }, if t.post { "after" } else { "before" });
                write!(
                    f,
                    "; trip: {} {:?} {bound} ({sign}{}), step {} {when} the test",
                    t.counter, t.rel, t.bits, t.step
                )?;
            }
            None => write!(f, "; no trip count (every access stays put)")?,
        }
        for r in &self.ranges {
            let addend = r.addend.map(|a| format!(" + {a}")).unwrap_or_default();
            let stride = match r.stride {
                Stride::Const(c) => c.to_string(),
                Stride::Reg(n) => n.to_string(),
            };
            write!(
                f,
                "\n  root {}: [{}{addend} + {}, {}{addend} + {}) stride {stride}, steps {:?}",
                r.k, r.start, r.min, r.start, r.end, r.steps
            )?;
            if !r.align.is_none() {
                write!(f, ", start at {} mod {}", r.align.want, r.align.bytes())?;
            }
        }
        Ok(())
    }
}

/// What versioning one loop adds.
pub(super) struct Emitted {
    /// Before statement `check_at`: the ranges and the branch to the checked loop.
    pub checks: String,
    /// Before statement `last + 1`: where the clone's fall-through exit comes back.
    pub after: String,
    /// Right after `checks`: the clone, where the preheader falls into it.
    pub clone: Vec<Statement>,
}

impl Version {
    /// Range checks the preheader runs (counted as group checks by `counting`).
    pub(super) fn range_checks(&self) -> u32 {
        self.ranges.len() as u32
    }

    pub(super) fn emit(&self, body: &[Statement], label: &mut dyn FnMut() -> String) -> Emitted {
        let mut rename: HashMap<Name, Name> = HashMap::new();
        for s in &body[self.first..=self.last] {
            if let Statement::Label(l, _) = s {
                rename.insert(*l, Name::from(label().as_str()));
            }
        }
        let after = label();
        let Statement::Label(head, _) = &body[self.first] else { unreachable!("a versioned loop starts at a label") };
        let mut checks = match &self.trip {
            Some(trip) => trip.text(),
            None => "\tmov.pred %__gs_vok, 1;\n".to_string(),
        };
        for r in &self.ranges {
            checks.push_str(&r.text());
        }
        // Out of bounds somewhere (or no trip count): the checked loop, in the original's place.
        checks.push_str(&format!("\t@!%__gs_vok bra {head};\n"));
        let mut clone = Vec::with_capacity(self.last + 2 - self.first);
        for s in &body[self.first..=self.last] {
            let mut s = s.clone();
            match &mut s {
                Statement::Label(l, _) => *l = rename[l],
                Statement::Inst(i) => {
                    for o in i.operands.iter_mut() {
                        if let Operand::Name(n) = o {
                            if let Some(r) = rename.get(n) {
                                *n = *r;
                            }
                        }
                    }
                }
                _ => {}
            }
            clone.push(s);
        }
        clone.extend(super::snippet::parse(&format!("\tbra.uni {after};\n")));
        Emitted { checks, after: format!("{after}:\n"), clone }
    }
}
