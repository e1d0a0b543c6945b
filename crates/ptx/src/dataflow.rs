//! A generic dataflow solver over [`Cfg`], and the two analyses instrumentation needs:
//! reaching definitions (which write produced the value an instruction reads) and
//! liveness (which registers are free to reuse at a point).
//!
//! An analysis names its direction, lattice and per-instruction transfer ([`Analysis`]);
//! [`solve`] sweeps the blocks whose input changed until none does, and keeps one fact at
//! the top and one at the bottom of every block ([`Results`]). Facts inside a block are not stored: bodies run to
//! tens of thousands of instructions, so a query replays the block from its stored end,
//! and [`Results::for_each_inst`] replays a whole block once for callers that want every
//! point.
//!
//! Registers are the ones the function declares: `.reg` declarations in the body and its
//! `{ }` scopes (with `%r<N>` meaning `%r0 … %r{N-1}`) and `.reg` parameters. A name is
//! resolved from the scope of the instruction outwards, so the same inline assembly
//! inlined twice, each copy declaring its own `p`, gives two registers. Special
//! registers, symbols and labels are not registers. A kernel's parameters live in the
//! `.param` space and are read with `ld.param`, so a kernel's entry defines no register.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;
use std::fmt::Write as _;
use std::hash::BuildHasherDefault;

use crate::ast::{Function, Name, NameMap, StateSpace, Statement};
use crate::cfg::{walk, BlockId, Cfg, InstId, ScopeId};
use crate::runs::{self, Runs};
use crate::semantics;

/// A fixed-size set of small integers: the fact type of bit-vector problems.
///
/// Over a domain up to [`DENSE_MAX`] it is a plain bit vector; over a larger one, sorted
/// runs ([`crate::runs`]), so that per-block facts of a huge function cost what they hold
/// rather than blocks × domain bits. The choice follows the domain alone, so two sets of
/// one domain always compare and hash alike.
#[derive(PartialEq, Eq, Hash, Default)]
pub struct BitSet {
    words: Vec<u64>,
    runs: Runs,
    domain: usize,
}

/// The largest domain held as a bit vector: 16,384 members, 2 KiB a set. Every function
/// of the corpus fits (so their speed is the bit vector's); past this, facts per block
/// times domain grows quadratically with function size.
pub const DENSE_MAX: usize = 1 << 14;

impl Clone for BitSet {
    fn clone(&self) -> BitSet {
        BitSet { words: self.words.clone(), runs: self.runs.clone(), domain: self.domain }
    }

    // The solver and the replays copy facts per instruction; reusing the allocation matters.
    fn clone_from(&mut self, source: &BitSet) {
        self.words.clone_from(&source.words);
        self.runs.clone_from(&source.runs);
        self.domain = source.domain;
    }
}

impl BitSet {
    /// The empty set over `0..domain`.
    pub fn new(domain: usize) -> BitSet {
        assert!(domain <= u32::MAX as usize, "a set's domain is at most u32::MAX");
        let words = if domain > DENSE_MAX { Vec::new() } else { vec![0; domain.div_ceil(64)] };
        BitSet { words, runs: Runs::new(), domain }
    }

    #[inline]
    fn sparse(&self) -> bool {
        self.domain > DENSE_MAX
    }

    pub fn domain_size(&self) -> usize {
        self.domain
    }

    /// Adds `i`; whether it was absent.
    pub fn insert(&mut self, i: usize) -> bool {
        assert!(i < self.domain, "{i} is outside the set's domain 0..{}", self.domain);
        if self.sparse() {
            return runs::insert(&mut self.runs, i as u32);
        }
        let (w, m) = (i / 64, 1u64 << (i % 64));
        let absent = self.words[w] & m == 0;
        self.words[w] |= m;
        absent
    }

    /// Removes `i`; whether it was present.
    pub fn remove(&mut self, i: usize) -> bool {
        if self.sparse() {
            return i < self.domain && runs::remove(&mut self.runs, i as u32);
        }
        let (w, m) = (i / 64, 1u64 << (i % 64));
        let present = self.words[w] & m != 0;
        self.words[w] &= !m;
        present
    }

    pub fn contains(&self, i: usize) -> bool {
        if self.sparse() {
            return i < self.domain && runs::contains(&self.runs, i as u32);
        }
        i < self.domain && self.words[i / 64] & (1u64 << (i % 64)) != 0
    }

    /// Replaces the runs of a sparse set with `new`; whether they changed.
    fn replace_runs(&mut self, new: Runs) -> bool {
        let changed = new != self.runs;
        self.runs = new;
        changed
    }

    /// `self ∪= other`; whether `self` grew.
    pub fn union_with(&mut self, other: &BitSet) -> bool {
        debug_assert_eq!(self.domain, other.domain);
        if self.sparse() {
            return self.replace_runs(runs::union(&self.runs, &other.runs));
        }
        let mut changed = 0;
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            let new = *a | b;
            changed |= new ^ *a;
            *a = new;
        }
        changed != 0
    }

    /// `self ∩= other`; whether `self` shrank.
    pub fn intersect_with(&mut self, other: &BitSet) -> bool {
        debug_assert_eq!(self.domain, other.domain);
        if self.sparse() {
            return self.replace_runs(runs::intersection(&self.runs, &other.runs));
        }
        let mut changed = 0;
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            let new = *a & b;
            changed |= new ^ *a;
            *a = new;
        }
        changed != 0
    }

    /// `self -= other`; whether `self` shrank.
    pub fn subtract(&mut self, other: &BitSet) -> bool {
        debug_assert_eq!(self.domain, other.domain);
        if self.sparse() {
            return self.replace_runs(runs::difference(&self.runs, &other.runs));
        }
        let mut changed = 0;
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            let new = *a & !b;
            changed |= new ^ *a;
            *a = new;
        }
        changed != 0
    }

    pub fn clear(&mut self) {
        self.words.iter_mut().for_each(|w| *w = 0);
        self.runs.clear();
    }

    pub fn count(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum::<usize>() + runs::count(&self.runs)
    }

    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|&w| w == 0) && self.runs.is_empty()
    }

    /// The members in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        let dense = self.words.iter().enumerate().flat_map(|(i, &w)| {
            let mut w = w;
            std::iter::from_fn(move || {
                (w != 0).then(|| {
                    let b = w.trailing_zeros() as usize;
                    w &= w - 1;
                    i * 64 + b
                })
            })
        });
        // One of the two is empty: the domain picked the representation.
        dense.chain(self.runs.iter().flat_map(|&(s, e)| s as usize..e as usize))
    }
}

impl fmt::Debug for BitSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Facts flow from the entry along edges: what has happened.
    Forward,
    /// Facts flow from the exit against edges: what will happen.
    Backward,
}

/// A dataflow problem over a join semilattice of `Fact`s.
pub trait Analysis {
    type Fact: Clone + PartialEq;
    const DIRECTION: Direction;

    /// The least fact, the identity of `join`: what a block no path has reached yet holds.
    fn bottom(&self) -> Self::Fact;

    /// The fact at the top of the entry block (forward) or at the virtual exit (backward).
    fn boundary(&self) -> Self::Fact;

    /// `into ⊔= from`; whether `into` changed.
    fn join(&self, into: &mut Self::Fact, from: &Self::Fact) -> bool;

    /// Moves `fact` across one instruction in the analysis direction: from before it to
    /// after it when forward, from after it to before it when backward. Must be monotone.
    fn transfer(&self, inst: InstId, fact: &mut Self::Fact);
}

/// The fixpoint of an analysis: the facts at the top and bottom of every block.
pub struct Results<'c, A: Analysis> {
    cfg: &'c Cfg,
    analysis: A,
    ins: Vec<A::Fact>,
    outs: Vec<A::Fact>,
    visits: usize,
}

/// Solves `analysis` over `cfg`, visiting blocks in reverse postorder (postorder when
/// backward) so an acyclic region settles in one pass and a loop nest in a few.
///
/// Blocks unreachable from the entry are solved too, so every instruction has a fact,
/// but forward facts do not flow out of them into reachable code: a definition no
/// execution performs reaches nothing.
pub fn solve<A: Analysis>(cfg: &Cfg, analysis: A) -> Results<'_, A> {
    let n = cfg.num_blocks();
    let mut order: Vec<BlockId> = cfg.rpo().to_vec();
    order.extend(cfg.block_ids().filter(|&b| !cfg.is_reachable(b)));
    if A::DIRECTION == Direction::Backward {
        order.reverse();
    }
    let mut position = vec![0u32; n];
    for (i, b) in order.iter().enumerate() {
        position[b.index()] = i as u32;
    }
    let mut ins = vec![analysis.bottom(); n];
    let mut outs = vec![analysis.bottom(); n];
    match A::DIRECTION {
        Direction::Forward => ins[cfg.entry().index()] = analysis.boundary(),
        Direction::Backward => outs[cfg.exit().index()] = analysis.boundary(),
    }
    // Sweeps in `order`: a block whose input changed is visited later in the same sweep
    // when it lies ahead, in the next sweep otherwise. Jumping back at once (a priority
    // queue) re-walks everything after a loop header for each change a back edge brings;
    // sweeps batch those, and need about as many passes as retreating edges can be
    // chained along one path.
    let mut dirty = vec![true; n];
    let mut again = true;
    let mut visits = 0;
    while again {
        again = false;
        for p in 0..n {
            if !std::mem::take(&mut dirty[p]) {
                continue;
            }
            visits += 1;
            let b = order[p];
            let block = cfg.block(b);
            let mut mark = |s: BlockId| {
                let q = position[s.index()] as usize;
                dirty[q] = true;
                again |= q <= p;
            };
            match A::DIRECTION {
                Direction::Forward => {
                    let mut fact = ins[b.index()].clone();
                    for i in block.insts() {
                        analysis.transfer(i, &mut fact);
                    }
                    outs[b.index()] = fact;
                    for &s in &block.succs {
                        if (block.reachable || !cfg.is_reachable(s))
                            && analysis.join(&mut ins[s.index()], &outs[b.index()])
                        {
                            mark(s);
                        }
                    }
                }
                Direction::Backward => {
                    let mut fact = outs[b.index()].clone();
                    for i in block.insts().rev() {
                        analysis.transfer(i, &mut fact);
                    }
                    ins[b.index()] = fact;
                    for &pred in &block.preds {
                        if analysis.join(&mut outs[pred.index()], &ins[b.index()]) {
                            mark(pred);
                        }
                    }
                }
            }
        }
    }
    Results { cfg, analysis, ins, outs, visits }
}

impl<'c, A: Analysis> Results<'c, A> {
    pub fn cfg(&self) -> &'c Cfg {
        self.cfg
    }

    pub fn analysis(&self) -> &A {
        &self.analysis
    }

    /// The fact at the top of `b`, before its first instruction (the live-in set of a
    /// backward analysis).
    pub fn block_in(&self, b: BlockId) -> &A::Fact {
        &self.ins[b.index()]
    }

    /// The fact at the bottom of `b`, after its last instruction.
    pub fn block_out(&self, b: BlockId) -> &A::Fact {
        &self.outs[b.index()]
    }

    /// How many block visits the solver made to reach the fixpoint.
    pub fn visits(&self) -> usize {
        self.visits
    }

    /// The fact just before `i` in program order.
    pub fn before(&self, i: InstId) -> A::Fact {
        let b = self.cfg.block_of(i);
        let r = self.cfg.block(b).insts.clone();
        match A::DIRECTION {
            Direction::Forward => self.replay(b, r.start..i.0),
            Direction::Backward => self.replay(b, i.0..r.end),
        }
    }

    /// The fact just before `to`, from `fact`, the one just before `from`: an instruction
    /// of the same block, not after `to` (forward analyses). Asking for the facts before
    /// several instructions of a long block this way carries each on from the last instead
    /// of replaying the block from its start every time.
    pub fn advance(&self, fact: &mut A::Fact, from: InstId, to: InstId) {
        assert!(A::DIRECTION == Direction::Forward, "advance is for forward analyses");
        assert!(
            from <= to && self.cfg.block_of(from) == self.cfg.block_of(to),
            "advance goes forward within one block"
        );
        (from.0..to.0).for_each(|i| self.analysis.transfer(InstId(i), fact));
    }

    /// The fact just after `i` in program order.
    pub fn after(&self, i: InstId) -> A::Fact {
        let b = self.cfg.block_of(i);
        let r = self.cfg.block(b).insts.clone();
        match A::DIRECTION {
            Direction::Forward => self.replay(b, r.start..i.0 + 1),
            Direction::Backward => self.replay(b, i.0 + 1..r.end),
        }
    }

    /// Carries the stored fact of `b` across `insts`, which start (forward) or end
    /// (backward) the block.
    fn replay(&self, b: BlockId, insts: std::ops::Range<u32>) -> A::Fact {
        match A::DIRECTION {
            Direction::Forward => {
                let mut fact = self.ins[b.index()].clone();
                insts.for_each(|i| self.analysis.transfer(InstId(i), &mut fact));
                fact
            }
            Direction::Backward => {
                let mut fact = self.outs[b.index()].clone();
                insts.rev().for_each(|i| self.analysis.transfer(InstId(i), &mut fact));
                fact
            }
        }
    }

    /// Calls `f(inst, before, after)` for each instruction of `b`, in the analysis
    /// direction (last instruction first when backward); one replay of the block.
    pub fn for_each_inst(&self, b: BlockId, mut f: impl FnMut(InstId, &A::Fact, &A::Fact)) {
        let block = self.cfg.block(b);
        match A::DIRECTION {
            Direction::Forward => {
                let mut fact = self.ins[b.index()].clone();
                let mut prev = fact.clone();
                for i in block.insts() {
                    prev.clone_from(&fact);
                    self.analysis.transfer(i, &mut fact);
                    f(i, &prev, &fact);
                }
            }
            Direction::Backward => {
                let mut fact = self.outs[b.index()].clone();
                let mut next = fact.clone();
                for i in block.insts().rev() {
                    next.clone_from(&fact);
                    self.analysis.transfer(i, &mut fact);
                    f(i, &fact, &next);
                }
            }
        }
    }
}

/// A register the function declares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RegId(pub u32);

impl RegId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// The registers of one function, numbered in declaration order: `.reg` parameters,
/// then `.reg` declarations of the body in program order.
#[derive(Debug, Clone, Default)]
pub struct Registers {
    names: Vec<Name>,
    scopes: Vec<ScopeId>,
    map: HashMap<(ScopeId, Name), RegId, BuildHasherDefault<ahash::AHasher>>,
    params: Vec<RegId>,
    returns: Vec<RegId>,
}

impl Registers {
    /// `cfg` must have been built from `f`: scopes are numbered alike.
    pub fn collect(cfg: &Cfg, f: &Function) -> Registers {
        let mut regs = Registers::default();
        for p in f.params.iter().flatten().filter(|p| p.space == StateSpace::Reg) {
            let r = regs.declare(0, p.name);
            regs.params.push(r);
        }
        for p in f.returns.iter().flatten().filter(|p| p.space == StateSpace::Reg) {
            let r = regs.declare(0, p.name);
            regs.returns.push(r);
        }
        let body = f.body.as_deref().unwrap_or_default();
        let mut members = None;
        let scopes = walk(body, |s, scope, _| {
            let Statement::Decl(d) = s else { return };
            if d.space != StateSpace::Reg {
                return;
            }
            match d.count {
                None => {
                    regs.declare(scope, d.name);
                }
                Some(n) if n <= NUMBERED_KEPT => {
                    for_each_numbered(d.name, n, |name| {
                        regs.declare(scope, name);
                    });
                }
                Some(n) => members.get_or_insert_with(|| RangeMembers::of(body)).for_each(d.name, n, |name| {
                    regs.declare(scope, name);
                }),
            }
        });
        assert_eq!(scopes.len(), cfg.num_scopes(), "the graph was built from another body");
        regs
    }

    fn declare(&mut self, scope: ScopeId, name: Name) -> RegId {
        *self.map.entry((scope, name)).or_insert_with(|| {
            self.names.push(name);
            self.scopes.push(scope);
            RegId(self.names.len() as u32 - 1)
        })
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    pub fn name(&self, r: RegId) -> Name {
        self.names[r.index()]
    }

    /// The scope declaring `r`.
    pub fn scope(&self, r: RegId) -> ScopeId {
        self.scopes[r.index()]
    }

    /// The register `name` means in `scope`, looking outwards.
    pub fn resolve(&self, cfg: &Cfg, scope: ScopeId, name: Name) -> Option<RegId> {
        let mut s = Some(scope);
        while let Some(sc) = s {
            if let Some(&r) = self.map.get(&(sc, name)) {
                return Some(r);
            }
            s = cfg.scope_parent(sc);
        }
        None
    }

    /// `.reg` parameters: defined on entry.
    pub fn params(&self) -> &[RegId] {
        &self.params
    }

    /// `.reg` return parameters: read by the caller, so live at the exit.
    pub fn returns(&self) -> &[RegId] {
        &self.returns
    }
}

/// Ranges of names numbered from one prefix that [`for_each_numbered`] remembers, and the
/// longest range whose every name is a register here. A longer range (rare, or hostile:
/// `%rd<100000000>` is a 27-byte line) gets a register only for the names the body uses
/// ([`RangeMembers`]), so time and memory follow the body, not the declared count.
const NUMBERED_KEPT: u32 = 1 << 16;

/// The names of long register ranges ([`NUMBERED_KEPT`]) that the body's instructions
/// name, by range prefix and ascending index: declaring only these keeps register
/// numbers in declaration order (a subset of the full numbering, so every analysis sees
/// the registers in the same order) without a name per declared register.
#[derive(Default)]
struct RangeMembers {
    by_prefix: NameMap<Vec<(u32, Name)>>,
}

impl RangeMembers {
    fn of(body: &[Statement]) -> RangeMembers {
        let mut prefixes = crate::ast::NameSet::default();
        walk(body, |s, _, _| {
            if let Statement::Decl(d) = s {
                if d.space == StateSpace::Reg && d.count.is_some_and(|n| n > NUMBERED_KEPT) {
                    prefixes.insert(d.name);
                }
            }
        });
        let mut out = RangeMembers::default();
        if prefixes.is_empty() {
            return out;
        }
        let mut named = crate::ast::NameSet::default();
        walk(body, |s, _, _| {
            if let Statement::Inst(i) = s {
                semantics::for_each_def(i, |n| {
                    named.insert(n);
                });
                semantics::for_each_use(i, |n| {
                    named.insert(n);
                });
            }
        });
        for name in named {
            let text = name.as_str();
            let digits = text.bytes().rev().take_while(u8::is_ascii_digit).count();
            // `%x12` may be `%x1` index 2 or `%x` index 12: every split is a candidate.
            for split in text.len() - digits..text.len() {
                let index = &text[split..];
                if index.len() > 1 && index.starts_with('0') {
                    continue;
                }
                let (Some(prefix), Ok(i)) =
                    (Name::from_existing(&text[..split]).filter(|p| prefixes.contains(p)), index.parse::<u32>())
                else {
                    continue;
                };
                out.by_prefix.entry(prefix).or_default().push((i, name));
            }
        }
        out.by_prefix.values_mut().for_each(|v| v.sort_unstable());
        out
    }

    /// Calls `f` with the names of `prefix<n>` the body uses, in index order.
    fn for_each(&self, prefix: Name, n: u32, mut f: impl FnMut(Name)) {
        let Some(members) = self.by_prefix.get(&prefix) else { return };
        members.iter().take_while(|(i, _)| *i < n).for_each(|(_, name)| f(*name));
    }
}

thread_local! {
    /// `%r0`, `%r1`, … by prefix: a function declares `%r<N>`, and every function of a
    /// module declares the same prefixes, so its names are interned once per thread rather
    /// than once per function and analysis (interning takes the interner's lock). Interned
    /// names live as long as the program anyway; this keeps only their handles.
    static NUMBERED: RefCell<NameMap<Vec<Name>>> = RefCell::new(NameMap::default());
}

/// Calls `f` with `prefix0` … `prefix{n-1}`, the names `.reg prefix<n>` declares.
fn for_each_numbered(prefix: Name, n: u32, mut f: impl FnMut(Name)) {
    let kept = n.min(NUMBERED_KEPT);
    NUMBERED.with(|cache| {
        let mut cache = cache.borrow_mut();
        let names = cache.entry(prefix).or_default();
        let mut text = String::with_capacity(prefix.len() + 10);
        while names.len() < kept as usize {
            text.clear();
            write!(text, "{prefix}{}", names.len()).expect("writing to a String");
            names.push(Name::from(text.as_str()));
        }
        names[..kept as usize].iter().copied().for_each(&mut f);
    });
    let mut text = String::with_capacity(prefix.len() + 10);
    for i in kept..n {
        text.clear();
        write!(text, "{prefix}{i}").expect("writing to a String");
        f(Name::from(text.as_str()));
    }
}

/// The registers each instruction writes and reads, resolved once for all queries.
#[derive(Debug, Clone)]
pub struct RegOperands {
    defs: Vec<RegId>,
    def_start: Vec<u32>,
    uses: Vec<RegId>,
    use_start: Vec<u32>,
    guarded: Vec<bool>,
}

impl RegOperands {
    pub fn compute(cfg: &Cfg, f: &Function, regs: &Registers) -> RegOperands {
        let n = cfg.num_insts();
        let mut ops = RegOperands {
            defs: Vec::with_capacity(n),
            def_start: Vec::with_capacity(n + 1),
            uses: Vec::with_capacity(2 * n),
            use_start: Vec::with_capacity(n + 1),
            guarded: Vec::with_capacity(n),
        };
        ops.def_start.push(0);
        ops.use_start.push(0);
        for (i, inst) in cfg.instructions(f).into_iter().enumerate() {
            let scope = cfg.inst_scope(InstId(i as u32));
            let from = ops.defs.len();
            semantics::for_each_def(inst, |name| {
                if let Some(r) = regs.resolve(cfg, scope, name) {
                    if !ops.defs[from..].contains(&r) {
                        ops.defs.push(r);
                    }
                }
            });
            let from = ops.uses.len();
            semantics::for_each_use(inst, |name| {
                if let Some(r) = regs.resolve(cfg, scope, name) {
                    if !ops.uses[from..].contains(&r) {
                        ops.uses.push(r);
                    }
                }
            });
            ops.def_start.push(ops.defs.len() as u32);
            ops.use_start.push(ops.uses.len() as u32);
            ops.guarded.push(inst.guard.is_some());
        }
        ops
    }

    /// The registers `i` writes, without duplicates.
    pub fn defs(&self, i: InstId) -> &[RegId] {
        &self.defs[self.def_start[i.index()] as usize..self.def_start[i.index() + 1] as usize]
    }

    /// The registers `i` reads (its guard included), without duplicates.
    pub fn uses(&self, i: InstId) -> &[RegId] {
        &self.uses[self.use_start[i.index()] as usize..self.use_start[i.index() + 1] as usize]
    }

    /// Whether `i` is guarded by a predicate, so its writes may not happen.
    pub fn is_guarded(&self, i: InstId) -> bool {
        self.guarded[i.index()]
    }
}

/// Where a definition happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DefSite {
    /// A `.reg` parameter, holding the caller's value on entry.
    Entry,
    Inst(InstId),
}

/// One write of one register.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Def {
    pub site: DefSite,
    pub reg: RegId,
}

/// Reaching definitions: the fact at a point is the set of [`Def`]s (indices into
/// [`ReachingDefsAnalysis::defs`]) whose value some path may carry to that point
/// unoverwritten. A guarded write may not happen, so it kills nothing.
pub struct ReachingDefsAnalysis {
    registers: Registers,
    operands: RegOperands,
    defs: Vec<Def>,
    /// The definitions of instruction `i` are `inst_defs[i]..inst_defs[i + 1]`.
    inst_defs: Vec<u32>,
    /// The definitions of each register, to kill them all on an unguarded write: those of
    /// register `r` are `reg_defs[reg_def_start[r]..reg_def_start[r + 1]]`, in program
    /// order (one allocation, not one per register).
    reg_defs: Vec<u32>,
    reg_def_start: Vec<u32>,
    entry: BitSet,
}

pub type ReachingDefs<'c> = Results<'c, ReachingDefsAnalysis>;

impl ReachingDefsAnalysis {
    pub fn new(cfg: &Cfg, f: &Function) -> ReachingDefsAnalysis {
        let registers = Registers::collect(cfg, f);
        let operands = RegOperands::compute(cfg, f, &registers);
        let mut defs: Vec<Def> = registers.params().iter().map(|&reg| Def { site: DefSite::Entry, reg }).collect();
        let mut inst_defs = Vec::with_capacity(cfg.num_insts() + 1);
        for i in (0..cfg.num_insts() as u32).map(InstId) {
            inst_defs.push(defs.len() as u32);
            defs.extend(operands.defs(i).iter().map(|&reg| Def { site: DefSite::Inst(i), reg }));
        }
        inst_defs.push(defs.len() as u32);
        let mut reg_def_start = vec![0u32; registers.len() + 1];
        for def in &defs {
            reg_def_start[def.reg.index() + 1] += 1;
        }
        for r in 0..registers.len() {
            reg_def_start[r + 1] += reg_def_start[r];
        }
        let mut next = reg_def_start.clone();
        let mut reg_defs = vec![0u32; defs.len()];
        for (d, def) in defs.iter().enumerate() {
            let at = &mut next[def.reg.index()];
            reg_defs[*at as usize] = d as u32;
            *at += 1;
        }
        let mut entry = BitSet::new(defs.len());
        (0..registers.params().len()).for_each(|d| {
            entry.insert(d);
        });
        ReachingDefsAnalysis { registers, operands, defs, inst_defs, reg_defs, reg_def_start, entry }
    }

    pub fn registers(&self) -> &Registers {
        &self.registers
    }

    pub fn operands(&self) -> &RegOperands {
        &self.operands
    }

    /// Every definition; a fact's members index this.
    pub fn defs(&self) -> &[Def] {
        &self.defs
    }

    /// Indices of the definitions of `reg`, in program order (entry first).
    pub fn defs_of(&self, reg: RegId) -> &[u32] {
        &self.reg_defs[self.reg_def_start[reg.index()] as usize..self.reg_def_start[reg.index() + 1] as usize]
    }
}

impl Analysis for ReachingDefsAnalysis {
    type Fact = BitSet;
    const DIRECTION: Direction = Direction::Forward;

    fn bottom(&self) -> BitSet {
        BitSet::new(self.defs.len())
    }

    fn boundary(&self) -> BitSet {
        self.entry.clone()
    }

    fn join(&self, into: &mut BitSet, from: &BitSet) -> bool {
        into.union_with(from)
    }

    fn transfer(&self, i: InstId, fact: &mut BitSet) {
        let own = self.inst_defs[i.index()] as usize..self.inst_defs[i.index() + 1] as usize;
        if !self.operands.is_guarded(i) {
            for d in own.clone() {
                for &k in self.defs_of(self.defs[d].reg) {
                    fact.remove(k as usize);
                }
            }
        }
        for d in own {
            fact.insert(d);
        }
    }
}

/// Reaching definitions of the function `cfg` was built from.
pub fn reaching_defs<'c>(cfg: &'c Cfg, f: &Function) -> ReachingDefs<'c> {
    solve(cfg, ReachingDefsAnalysis::new(cfg, f))
}

impl ReachingDefs<'_> {
    /// Where the values of `reg` that `i` may read were written.
    pub fn reaching(&self, i: InstId, reg: RegId) -> Vec<DefSite> {
        let before = self.before(i);
        let a = self.analysis();
        a.defs_of(reg).iter().filter(|&&d| before.contains(d as usize)).map(|&d| a.defs()[d as usize].site).collect()
    }
}

/// Liveness: the fact at a point is the set of registers ([`RegId`] indices) some path
/// from there reads before writing. A guarded write may not happen, so it does not end
/// a register's life. `.reg` return parameters are live at the exit.
pub struct LivenessAnalysis {
    registers: Registers,
    operands: RegOperands,
}

pub type Liveness<'c> = Results<'c, LivenessAnalysis>;

impl LivenessAnalysis {
    pub fn new(cfg: &Cfg, f: &Function) -> LivenessAnalysis {
        let registers = Registers::collect(cfg, f);
        let operands = RegOperands::compute(cfg, f, &registers);
        LivenessAnalysis { registers, operands }
    }

    pub fn registers(&self) -> &Registers {
        &self.registers
    }

    pub fn operands(&self) -> &RegOperands {
        &self.operands
    }
}

impl Analysis for LivenessAnalysis {
    type Fact = BitSet;
    const DIRECTION: Direction = Direction::Backward;

    fn bottom(&self) -> BitSet {
        BitSet::new(self.registers.len())
    }

    fn boundary(&self) -> BitSet {
        let mut live = self.bottom();
        for r in self.registers.returns() {
            live.insert(r.index());
        }
        live
    }

    fn join(&self, into: &mut BitSet, from: &BitSet) -> bool {
        into.union_with(from)
    }

    fn transfer(&self, i: InstId, fact: &mut BitSet) {
        if !self.operands.is_guarded(i) {
            for r in self.operands.defs(i) {
                fact.remove(r.index());
            }
        }
        for r in self.operands.uses(i) {
            fact.insert(r.index());
        }
    }
}

/// Liveness of the registers of the function `cfg` was built from.
pub fn liveness<'c>(cfg: &'c Cfg, f: &Function) -> Liveness<'c> {
    solve(cfg, LivenessAnalysis::new(cfg, f))
}

impl Liveness<'_> {
    /// The registers live on entry to `b`.
    pub fn live_in(&self, b: BlockId) -> &BitSet {
        self.block_in(b)
    }

    /// The registers live on leaving `b`.
    pub fn live_out(&self, b: BlockId) -> &BitSet {
        self.block_out(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbered_names_are_the_range_names() {
        for (prefix, n) in [("%r", 5u32), ("%rd", 3), ("%r", 12), ("%__probe_long", NUMBERED_KEPT + 2)] {
            let mut names = Vec::new();
            for_each_numbered(Name::from(prefix), n, |name| names.push(name));
            let expected: Vec<Name> = (0..n).map(|i| Name::from(format!("{prefix}{i}").as_str())).collect();
            assert_eq!(names, expected, "{prefix}<{n}>");
        }
    }
}
