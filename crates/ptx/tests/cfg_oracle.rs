//! Random small bodies checked against brute force on the instruction graph, which the
//! test builds from its own description of the program rather than from the [`Cfg`]:
//! dominance and post-dominance by removing a node and searching, reaching definitions
//! and liveness by path search.

use gpusan_ptx::ast::{Function, Item};
use gpusan_ptx::cfg::{Cfg, DomTree, InstId};
use gpusan_ptx::dataflow::{liveness, reaching_defs, DefSite};
use proptest::prelude::*;

const REGS: usize = 6; // %r0..%r3, then %p0 %p1

#[derive(Debug, Clone)]
enum Op {
    /// `add.s32 %rD, %rA, %rB`, guarded by `%pG` when present.
    Add(usize, usize, usize, Option<usize>),
    /// `setp.lt.s32 %pD, %rA, %rB`
    Setp(usize, usize, usize),
}

#[derive(Debug, Clone)]
enum Term {
    None,
    Bra(usize),
    BraIf(usize, usize),
    Ret,
    RetIf(usize),
    Brx(usize, Vec<usize>),
}

fn block() -> impl Strategy<Value = (Vec<Op>, Term)> {
    let r = 0..4usize;
    let p = 0..2usize;
    let op = prop_oneof![
        (r.clone(), r.clone(), r.clone(), proptest::option::of(p.clone())).prop_map(|(d, a, b, g)| Op::Add(d, a, b, g)),
        (p.clone(), r.clone(), r.clone()).prop_map(|(d, a, b)| Op::Setp(d, a, b)),
    ];
    let t = 0..8usize;
    let term = prop_oneof![
        Just(Term::None),
        t.clone().prop_map(Term::Bra),
        (p.clone(), t.clone()).prop_map(|(g, t)| Term::BraIf(g, t)),
        Just(Term::Ret),
        p.prop_map(Term::RetIf),
        (r, proptest::collection::vec(t, 1..4)).prop_map(|(i, ts)| Term::Brx(i, ts)),
    ];
    (proptest::collection::vec(op, 0..4), term)
}

/// One instruction as the oracle sees it. Registers are `0..4` for `%r`, `4..6` for `%p`.
struct Inst {
    defs: Vec<usize>,
    uses: Vec<usize>,
    guarded: bool,
    /// Blocks it may branch to, whether it may fall through, whether it may leave.
    targets: Vec<usize>,
    falls: bool,
    leaves: bool,
}

impl Inst {
    /// A write that surely happens ends the old value.
    fn kills(&self, r: usize) -> bool {
        self.defs.contains(&r) && !self.guarded
    }
}

struct Program {
    text: String,
    insts: Vec<Inst>,
    /// The first instruction at or after each block's label; `insts.len()` for the exit.
    label_at: Vec<usize>,
}

fn program(blocks: &[(Vec<Op>, Term)]) -> Program {
    let n = blocks.len();
    let mut text = String::from(".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k()\n{\n");
    text.push_str(".reg .b32 %r<4>;\n.reg .pred %p<2>;\n");
    let (mut insts, mut label_at) = (Vec::new(), Vec::new());
    let plain = |defs, uses| Inst { defs, uses, guarded: false, targets: vec![], falls: true, leaves: false };
    for (k, (ops, term)) in blocks.iter().enumerate() {
        text.push_str(&format!("$L{k}:\n"));
        label_at.push(insts.len());
        for op in ops {
            match *op {
                Op::Add(d, a, b, g) => {
                    let guard = g.map_or(String::new(), |g| format!("@%p{g} "));
                    text.push_str(&format!("{guard}add.s32 %r{d}, %r{a}, %r{b};\n"));
                    let mut uses = vec![a, b];
                    uses.extend(g.map(|g| 4 + g));
                    insts.push(Inst { guarded: g.is_some(), ..plain(vec![d], uses) });
                }
                Op::Setp(d, a, b) => {
                    text.push_str(&format!("setp.lt.s32 %p{d}, %r{a}, %r{b};\n"));
                    insts.push(plain(vec![4 + d], vec![a, b]));
                }
            }
        }
        let branch = |targets: Vec<usize>, uses, guarded| Inst {
            targets: targets.into_iter().map(|t| t % n).collect(),
            falls: guarded,
            guarded,
            ..plain(vec![], uses)
        };
        match term {
            Term::None => {}
            Term::Bra(t) => {
                text.push_str(&format!("bra.uni $L{};\n", t % n));
                insts.push(branch(vec![*t], vec![], false));
            }
            Term::BraIf(g, t) => {
                text.push_str(&format!("@%p{g} bra $L{};\n", t % n));
                insts.push(branch(vec![*t], vec![4 + g], true));
            }
            Term::Ret => {
                text.push_str("ret;\n");
                insts.push(Inst { leaves: true, ..branch(vec![], vec![], false) });
            }
            Term::RetIf(g) => {
                text.push_str(&format!("@%p{g} ret;\n"));
                insts.push(Inst { leaves: true, ..branch(vec![], vec![4 + g], true) });
            }
            Term::Brx(i, ts) => {
                let labels: Vec<String> = ts.iter().map(|t| format!("$L{}", t % n)).collect();
                text.push_str(&format!("$T{k}: .branchtargets {};\nbrx.idx %r{i}, $T{k};\n", labels.join(", ")));
                insts.push(branch(ts.clone(), vec![*i], false));
            }
        }
    }
    text.push_str("}\n");
    label_at.push(insts.len());
    Program { text, insts, label_at }
}

impl Program {
    /// Successors of instruction `i`; `insts.len()` is the exit.
    fn succs(&self, i: usize) -> Vec<usize> {
        let inst = &self.insts[i];
        let mut s: Vec<usize> = inst.targets.iter().map(|&t| self.label_at[t]).collect();
        if inst.falls {
            s.push(i + 1);
        }
        if inst.leaves {
            s.push(self.insts.len());
        }
        s
    }

    /// Nodes reachable from `from` (the exit included) without entering `avoid`.
    fn reach(&self, from: usize, avoid: Option<usize>) -> Vec<bool> {
        let mut seen = vec![false; self.insts.len() + 1];
        let mut work = vec![from];
        while let Some(i) = work.pop() {
            if Some(i) == avoid || std::mem::replace(&mut seen[i], true) || i == self.insts.len() {
                continue;
            }
            work.extend(self.succs(i));
        }
        seen
    }

    /// Whether some path from `from` reads `r` before an unguarded write of it.
    fn live(&self, from: usize, r: usize) -> bool {
        let mut seen = vec![false; self.insts.len() + 1];
        let mut work = vec![from];
        while let Some(i) = work.pop() {
            if std::mem::replace(&mut seen[i], true) || i == self.insts.len() {
                continue;
            }
            let inst = &self.insts[i];
            if inst.uses.contains(&r) {
                return true;
            }
            if !inst.kills(r) {
                work.extend(self.succs(i));
            }
        }
        false
    }

    /// The writes of `r` some path carries to the top of `to` without another unguarded write.
    fn reaching(&self, to: usize, r: usize, reachable: &[bool]) -> Vec<usize> {
        let writes = (0..self.insts.len()).filter(|&d| reachable[d] && self.insts[d].defs.contains(&r));
        writes
            .filter(|&d| {
                let mut seen = vec![false; self.insts.len() + 1];
                let mut work = self.succs(d);
                while let Some(i) = work.pop() {
                    if i == to {
                        return true;
                    }
                    if std::mem::replace(&mut seen[i], true) || i == self.insts.len() {
                        continue;
                    }
                    let inst = &self.insts[i];
                    if !inst.kills(r) {
                        work.extend(self.succs(i));
                    }
                }
                false
            })
            .collect()
    }
}

fn function(text: &str) -> Function {
    let module = gpusan_ptx::parse(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let f = module.items.into_iter().find_map(|i| match i {
        Item::Function(f) => Some(*f),
        _ => None,
    });
    f.unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn graph_and_dataflow_match_brute_force(blocks in proptest::collection::vec(block(), 1..8)) {
        let prog = program(&blocks);
        let f = function(&prog.text);
        let cfg = Cfg::build(&f).unwrap();
        let n = prog.insts.len();
        prop_assert_eq!(cfg.num_insts(), n);
        if n == 0 {
            return Ok(());
        }
        let (dom, pdom) = (DomTree::dominators(&cfg), DomTree::post_dominators(&cfg));
        let block = |i: usize| cfg.block_of(InstId(i as u32));
        let reachable = prog.reach(0, None);
        let to_exit: Vec<bool> = (0..n).map(|j| prog.reach(j, None)[n]).collect();
        for i in 0..n {
            prop_assert_eq!(cfg.is_reachable(block(i)), reachable[i], "reachability of i{}\n{}", i, prog.text);
            let without_i = prog.reach(0, Some(i));
            for j in 0..n {
                let same = block(i) == block(j);
                let dominates = reachable[j] && (same && i <= j || dom.strictly_dominates(block(i), block(j)));
                let expected = reachable[j] && reachable[i] && !without_i[j];
                prop_assert_eq!(dominates, expected, "i{} dominates i{}\n{}", i, j, prog.text);
                let post = to_exit[j] && (same && i >= j || pdom.strictly_dominates(block(i), block(j)));
                let expected = to_exit[j] && (i == j || !prog.reach(j, Some(i))[n]);
                prop_assert_eq!(post, expected, "i{} post-dominates i{}\n{}", i, j, prog.text);
            }
        }

        let (rd, live) = (reaching_defs(&cfg, &f), liveness(&cfg, &f));
        let regs = live.analysis().registers();
        let reg = |r: usize| {
            let name = if r < 4 { format!("%r{r}") } else { format!("%p{}", r - 4) };
            regs.resolve(&cfg, 0, name.as_str().into()).unwrap()
        };
        for j in 0..n {
            let before = live.before(InstId(j as u32));
            for r in 0..REGS {
                prop_assert_eq!(before.contains(reg(r).index()), prog.live(j, r), "r{} live at i{}\n{}", r, j, prog.text);
                if reachable[j] {
                    let got: Vec<usize> = rd
                        .reaching(InstId(j as u32), reg(r))
                        .into_iter()
                        .map(|s| match s {
                            DefSite::Inst(d) => d.index(),
                            DefSite::Entry => usize::MAX,
                        })
                        .collect();
                    prop_assert_eq!(got, prog.reaching(j, r, &reachable), "writes of r{} reaching i{}\n{}", r, j, prog.text);
                }
            }
        }
    }
}
