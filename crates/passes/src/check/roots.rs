//! Root pointer analysis on reaching definitions: the roots of each address, and the
//! shadow moves that carry metadata to addresses with several roots.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use gpusan_ptx::ast::{Function, Name, Operand};
use gpusan_ptx::cfg::{Cfg, InstId};
use gpusan_ptx::dataflow::{reaching_defs, BitSet, DefSite, ReachingDefs, RegId};

use super::plan::{FastMap, Root, Shadow};

/// How a definition passes a pointer on.
pub(super) enum Def {
    /// Pointer arithmetic: the pointer is one of these operand indices.
    Arith(&'static [usize]),
    /// An integer: no pointer flows through it.
    Offset,
    /// Anything else: the value is a root.
    Root,
}

pub(super) fn classify(inst: &gpusan_ptx::ast::Instruction) -> Def {
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
pub(super) struct RootAnalysis<'a> {
    pub(super) cfg: &'a Cfg,
    pub(super) reaching_defs: ReachingDefs<'a>,
    pub(super) insts: Vec<&'a gpusan_ptx::ast::Instruction>,
    /// The reaching definitions before each instruction asked about.
    before: FastMap<InstId, BitSet>,
    /// The last instruction `before` got a fact for: the next one in its block carries
    /// that fact on rather than replaying the block (kernels have blocks of thousands of
    /// instructions with an access every few).
    last: Option<InstId>,
}

impl<'a> RootAnalysis<'a> {
    /// The analysis of `function`, whose control-flow graph is `cfg`.
    pub(super) fn new(cfg: &'a Cfg, function: &'a Function) -> RootAnalysis<'a> {
        RootAnalysis {
            cfg,
            reaching_defs: reaching_defs(cfg, function),
            insts: cfg.instructions(function),
            before: FastMap::default(),
            last: None,
        }
    }

    pub(super) fn reaching(&mut self, i: InstId, reg: RegId) -> Vec<DefSite> {
        if !self.before.contains_key(&i) {
            let fact = match self.last {
                Some(j) if j <= i && self.cfg.block_of(j) == self.cfg.block_of(i) => {
                    let mut fact = self.before[&j].clone();
                    self.reaching_defs.advance(&mut fact, j, i);
                    fact
                }
                _ => self.reaching_defs.before(i),
            };
            self.before.insert(i, fact);
            self.last = Some(i);
        }
        let before = &self.before[&i];
        let analysis = self.reaching_defs.analysis();
        analysis
            .defs_of(reg)
            .iter()
            .filter(|&&d| before.contains(d as usize))
            .map(|&d| analysis.defs()[d as usize].site)
            .collect()
    }

    pub(super) fn resolve(&self, i: InstId, name: Name) -> Option<RegId> {
        self.reaching_defs.analysis().registers().resolve(self.cfg, self.cfg.inst_scope(i), name)
    }

    /// The roots of the value of `reg` as instruction `i` reads it.
    pub(super) fn roots(&mut self, i: InstId, reg: RegId) -> BTreeSet<Root> {
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

/// The shadow moves of one multi-root address: after each listed definition, what the
/// defined register's shadow becomes; and the roots involved (defined in the function or
/// on entry).
pub(super) struct Carriers {
    pub(super) moves: Vec<(InstId, RegId, Shadow)>,
    pub(super) roots: BTreeSet<Root>,
}

/// An operand a definition may read a pointer from: its index, register, and the
/// definitions of that register reaching it.
pub(super) type PointerOperand = (usize, RegId, Vec<DefSite>);

impl RootAnalysis<'_> {
    /// The moves that carry metadata to the value of `reg` at instruction `i` through every
    /// definition it may come from; `None` where the moves cannot follow (a guarded `selp`
    /// or two-pointer `add`, or arithmetic mixing pointers some other way). The walk is
    /// [`RootAnalysis::roots`]'s, kept as a graph: multi-root accesses are rare, so the walk every
    /// access takes stays the cheap one.
    pub(super) fn carriers(&mut self, i: InstId, reg: RegId) -> Option<Carriers> {
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
