//! Reaching definitions, liveness and the generic solver on small kernels.

use gpusan_ptx::ast::{Function, Item};
use gpusan_ptx::cfg::{BlockId, Cfg, InstId};
use gpusan_ptx::dataflow::{
    liveness, reaching_defs, solve, Analysis, BitSet, DefSite, Direction, Liveness, RegOperands, Registers,
};
use gpusan_ptx::printer::Ptx;

fn kernel(body: &str) -> Function {
    let src =
        format!(".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k(.param .u64 p)\n{{\n{body}\n}}\n");
    let module = gpusan_ptx::parse(&src).unwrap_or_else(|e| panic!("{e}"));
    let f = module.items.into_iter().find_map(|i| match i {
        Item::Function(f) => Some(*f),
        _ => None,
    });
    f.unwrap()
}

/// The instruction whose text starts with `prefix`; there must be exactly one.
fn inst(cfg: &Cfg, f: &Function, prefix: &str) -> InstId {
    let found: Vec<usize> = cfg
        .instructions(f)
        .iter()
        .enumerate()
        .filter(|(_, i)| Ptx(**i).to_string().replace(" \t", " ").starts_with(prefix))
        .map(|(n, _)| n)
        .collect();
    assert_eq!(found.len(), 1, "instructions starting with `{prefix}`: {found:?}");
    InstId(found[0] as u32)
}

/// Where the values of register `name` that `at` reads come from.
fn reaching(cfg: &Cfg, f: &Function, at: &str, name: &str) -> Vec<DefSite> {
    let rd = reaching_defs(cfg, f);
    let i = inst(cfg, f, at);
    let r = rd.analysis().registers().resolve(cfg, cfg.inst_scope(i), name.into()).expect("a declared register");
    rd.reaching(i, r)
}

fn live_names(l: &Liveness, set: &BitSet) -> Vec<String> {
    set.iter().map(|r| l.analysis().registers().name(gpusan_ptx::dataflow::RegId(r as u32)).to_string()).collect()
}

const DECLS: &str = ".reg .pred %p<3>;\n.reg .b32 %r<5>;\n.reg .b64 %rd<2>;\nld.param.u64 %rd1, [p];\n";

#[test]
fn an_unguarded_write_kills_earlier_writes() {
    let f = kernel(&format!("{DECLS}mov.u32 %r1, 1;\nmov.u32 %r1, 2;\nst.global.u32 [%rd1], %r1;\nret;"));
    let cfg = Cfg::build(&f).unwrap();
    let two = inst(&cfg, &f, "mov.u32 %r1, 2");
    assert_eq!(reaching(&cfg, &f, "st.global", "%r1"), vec![DefSite::Inst(two)]);
}

#[test]
fn advancing_within_a_block_gives_the_fact_before() {
    let f = kernel(
        ".reg .b32 %r<4>;\n.reg .pred %p;\nmov.u32 %r1, 1;\nmov.u32 %r2, %r1;\n@%p mov.u32 %r1, 2;\n\
         add.s32 %r3, %r1, %r2;\nmov.u32 %r1, %r3;\nsetp.eq.u32 %p, %r1, 0;\n@%p bra $L;\nmov.u32 %r2, 0;\n$L:\nret;",
    );
    let cfg = Cfg::build(&f).unwrap();
    let rd = reaching_defs(&cfg, &f);
    for b in cfg.block_ids() {
        let insts: Vec<InstId> = cfg.block(b).insts().collect();
        for (k, &from) in insts.iter().enumerate() {
            for &to in &insts[k..] {
                let mut fact = rd.before(from);
                rd.advance(&mut fact, from, to);
                assert_eq!(fact, rd.before(to), "{from:?} to {to:?}");
            }
        }
    }
}

#[test]
fn a_guarded_write_kills_nothing() {
    let f = kernel(&format!(
        "{DECLS}setp.eq.u32 %p1, %r0, 0;\nmov.u32 %r1, 1;\n@%p1 mov.u32 %r1, 2;\nst.global.u32 [%rd1], %r1;\nret;"
    ));
    let cfg = Cfg::build(&f).unwrap();
    let (one, two) = (inst(&cfg, &f, "mov.u32 %r1, 1"), inst(&cfg, &f, "@%p1 mov"));
    assert_eq!(reaching(&cfg, &f, "st.global", "%r1"), vec![DefSite::Inst(one), DefSite::Inst(two)]);
}

#[test]
fn writes_on_both_arms_meet_at_the_join() {
    let f = kernel(&format!(
        "{DECLS}mov.u32 %r1, 0;\nsetp.eq.u32 %p1, %r0, 0;\n@%p1 bra $L_else;\nmov.u32 %r1, 1;\nbra.uni $L_join;\n\
         $L_else:\nmov.u32 %r2, 5;\n$L_join:\nst.global.u32 [%rd1], %r1;\nret;"
    ));
    let cfg = Cfg::build(&f).unwrap();
    let (zero, one) = (inst(&cfg, &f, "mov.u32 %r1, 0"), inst(&cfg, &f, "mov.u32 %r1, 1"));
    // The else arm does not write %r1, so the write before the branch survives along it.
    assert_eq!(reaching(&cfg, &f, "st.global", "%r1"), vec![DefSite::Inst(zero), DefSite::Inst(one)]);
}

#[test]
fn a_loop_carries_its_own_write_back_to_the_header() {
    let f = kernel(&format!(
        "{DECLS}mov.u32 %r1, 0;\n$L_h:\nadd.s32 %r1, %r1, 1;\nsetp.lt.u32 %p1, %r1, 9;\n@%p1 bra $L_h;\nret;"
    ));
    let cfg = Cfg::build(&f).unwrap();
    let (init, add) = (inst(&cfg, &f, "mov.u32 %r1, 0"), inst(&cfg, &f, "add.s32"));
    assert_eq!(reaching(&cfg, &f, "add.s32", "%r1"), vec![DefSite::Inst(init), DefSite::Inst(add)]);
    assert_eq!(reaching(&cfg, &f, "setp", "%r1"), vec![DefSite::Inst(add)]);
}

#[test]
fn an_undefined_register_has_no_reaching_definition() {
    let f = kernel(&format!("{DECLS}st.global.u32 [%rd1], %r3;\nret;"));
    let cfg = Cfg::build(&f).unwrap();
    assert_eq!(reaching(&cfg, &f, "st.global", "%r3"), vec![]);
}

#[test]
fn reg_params_are_defined_on_entry() {
    let src = ".version 8.0\n.target sm_80\n.address_size 64\n\
               .func (.reg .b32 %rv) f(.reg .b32 %a)\n{\nadd.s32 %rv, %a, 1;\nmov.u32 %a, 3;\nret;\n}\n";
    let module = gpusan_ptx::parse(src).unwrap();
    let Item::Function(f) = &module.items[3] else { panic!("no function") };
    let cfg = Cfg::build(f).unwrap();
    assert_eq!(reaching(&cfg, f, "add.s32", "%a"), vec![DefSite::Entry]);
    let l = liveness(&cfg, f);
    assert_eq!(live_names(&l, l.live_in(cfg.entry())), ["%a"]);
    assert_eq!(live_names(&l, l.live_out(cfg.entry())), ["%rv"], "the return register is read by the caller");
}

#[test]
fn liveness_ends_at_the_last_read_and_starts_at_the_write() {
    let f = kernel(&format!(
        "{DECLS}mov.u32 %r1, 1;\nadd.s32 %r2, %r1, 1;\nmov.u32 %r1, 0;\nst.global.u32 [%rd1], %r2;\nret;"
    ));
    let cfg = Cfg::build(&f).unwrap();
    let l = liveness(&cfg, &f);
    let add = inst(&cfg, &f, "add.s32");
    assert_eq!(live_names(&l, &l.before(add)), ["%r1", "%rd1"]);
    assert_eq!(live_names(&l, &l.after(add)), ["%r2", "%rd1"]);
    // %r1's second value is never read: dead right after its write.
    let dead = inst(&cfg, &f, "mov.u32 %r1, 0");
    assert!(!live_names(&l, &l.after(dead)).contains(&"%r1".to_string()));
    assert_eq!(live_names(&l, l.live_in(cfg.entry())), Vec::<String>::new(), "%rd1 is written first");
}

#[test]
fn a_guarded_write_does_not_end_liveness() {
    let f = kernel(&format!(
        "{DECLS}mov.u32 %r1, 1;\nsetp.eq.u32 %p1, %r0, 0;\n@%p1 mov.u32 %r1, 2;\nst.global.u32 [%rd1], %r1;\nret;"
    ));
    let cfg = Cfg::build(&f).unwrap();
    let l = liveness(&cfg, &f);
    let guarded = inst(&cfg, &f, "@%p1 mov");
    let before = live_names(&l, &l.before(guarded));
    assert!(before.contains(&"%r1".to_string()) && before.contains(&"%p1".to_string()), "{before:?}");
}

#[test]
fn a_value_read_around_a_loop_is_live_across_the_back_edge() {
    let f = kernel(&format!(
        "{DECLS}mov.u32 %r1, 0;\nmov.u32 %r2, 7;\n$L_h:\nadd.s32 %r1, %r1, 1;\nsetp.lt.u32 %p1, %r1, 9;\n\
         @%p1 bra $L_h;\nst.global.u32 [%rd1], %r2;\nret;"
    ));
    let cfg = Cfg::build(&f).unwrap();
    let l = liveness(&cfg, &f);
    let header = BlockId(1);
    assert_eq!(live_names(&l, l.live_in(header)), ["%r1", "%r2", "%rd1"]);
    assert_eq!(live_names(&l, l.live_out(header)), ["%r1", "%r2", "%rd1"]);
}

#[test]
fn registers_resolve_through_scopes_and_ranges() {
    let f = kernel(".reg .b32 %r<3>;\n.reg .b32 x;\n{\n.reg .b32 x;\nmov.u32 x, %tid.x;\n}\nmov.u32 x, %r2;\nret;");
    let cfg = Cfg::build(&f).unwrap();
    let regs = Registers::collect(&cfg, &f);
    assert_eq!(regs.len(), 5, "%r0 %r1 %r2 x and the inner x");
    assert!(regs.resolve(&cfg, 0, "%r3".into()).is_none());
    let ops = RegOperands::compute(&cfg, &f, &regs);
    let (inner, outer) = (ops.defs(InstId(0))[0], ops.defs(InstId(1))[0]);
    assert_ne!(inner, outer);
    assert_eq!(regs.scope(inner), 1);
    assert!(ops.uses(InstId(0)).is_empty(), "%tid.x is no declared register");
}

#[test]
fn for_each_inst_agrees_with_before_and_after() {
    let f = kernel(&format!(
        "{DECLS}mov.u32 %r1, 0;\n$L_h:\nadd.s32 %r1, %r1, 1;\n@%p1 mov.u32 %r2, %r1;\nsetp.lt.u32 %p1, %r1, 9;\n\
         @%p1 bra $L_h;\nst.global.u32 [%rd1], %r2;\nret;"
    ));
    let cfg = Cfg::build(&f).unwrap();
    let (l, rd) = (liveness(&cfg, &f), reaching_defs(&cfg, &f));
    for b in cfg.block_ids() {
        let mut seen = 0;
        l.for_each_inst(b, |i, before, after| {
            assert_eq!((before, after), (&l.before(i), &l.after(i)));
            seen += 1;
        });
        rd.for_each_inst(b, |i, before, after| assert_eq!((before, after), (&rd.before(i), &rd.after(i))));
        assert_eq!(seen, cfg.block(b).len());
    }
}

/// A must-analysis through the same solver: registers written on every path so far.
/// Its join is intersection, so its bottom is the full set.
struct DefinitelyWritten<'a> {
    ops: &'a RegOperands,
    n: usize,
}

impl Analysis for DefinitelyWritten<'_> {
    type Fact = BitSet;
    const DIRECTION: Direction = Direction::Forward;

    fn bottom(&self) -> BitSet {
        let mut all = BitSet::new(self.n);
        (0..self.n).for_each(|r| {
            all.insert(r);
        });
        all
    }

    fn boundary(&self) -> BitSet {
        BitSet::new(self.n)
    }

    fn join(&self, into: &mut BitSet, from: &BitSet) -> bool {
        into.intersect_with(from)
    }

    fn transfer(&self, i: InstId, fact: &mut BitSet) {
        if !self.ops.is_guarded(i) {
            self.ops.defs(i).iter().for_each(|r| {
                fact.insert(r.index());
            });
        }
    }
}

#[test]
fn the_solver_runs_a_must_analysis_with_intersection() {
    let f = kernel(&format!(
        "{DECLS}setp.eq.u32 %p1, %r0, 0;\n@%p1 bra $L_else;\nmov.u32 %r1, 1;\nmov.u32 %r2, 1;\nbra.uni $L_join;\n\
         $L_else:\nmov.u32 %r2, 2;\n$L_join:\nst.global.u32 [%rd1], %r2;\n$L_loop:\nmov.u32 %r3, 0;\nbra.uni $L_loop;"
    ));
    let cfg = Cfg::build(&f).unwrap();
    let regs = Registers::collect(&cfg, &f);
    let ops = RegOperands::compute(&cfg, &f, &regs);
    let r = solve(&cfg, DefinitelyWritten { ops: &ops, n: regs.len() });
    let names = |s: &BitSet| -> Vec<String> {
        s.iter().map(|r| regs.name(gpusan_ptx::dataflow::RegId(r as u32)).to_string()).collect()
    };
    let join = inst(&cfg, &f, "st.global");
    assert_eq!(names(&r.before(join)), ["%p1", "%r2", "%rd1"], "%r1 is written on one arm only");
    // The loop header's own back edge must not erase what its entry brought.
    let lp = inst(&cfg, &f, "mov.u32 %r3");
    assert_eq!(names(&r.after(lp)), ["%p1", "%r2", "%r3", "%rd1"]);
}

/// A declared-but-unused range costs nothing: the largest count the parser allows, of
/// which the body names two, makes two registers (in index order) and the analyses run
/// in the time of a two-register function.
#[test]
fn a_huge_register_range_makes_registers_only_for_the_names_used() {
    let n = gpusan_ptx::MAX_REGISTER_COUNT;
    let f = kernel(&format!(
        ".reg .b64 %rd<{n}>;\n.reg .b32 %x1<{n}>;\nmov.u64 %rd9, 0;\nmov.u64 %rd{}, %rd9;\nmov.u32 %x12, 1;\nret;",
        n - 1
    ));
    let started = std::time::Instant::now();
    let cfg = Cfg::build(&f).unwrap();
    let regs = Registers::collect(&cfg, &f);
    assert_eq!(regs.len(), 3, "%rd9, %rd{} and %x12", n - 1);
    let names: Vec<String> = (0..3).map(|i| regs.name(gpusan_ptx::dataflow::RegId(i)).to_string()).collect();
    assert_eq!(names, ["%rd9", &format!("%rd{}", n - 1), "%x12"]);
    assert!(regs.resolve(&cfg, 0, "%rd10".into()).is_none(), "unused, so never asked for");
    let l = liveness(&cfg, &f);
    assert!(live_names(&l, l.live_in(BlockId(0))).is_empty());
    assert!(started.elapsed() < std::time::Duration::from_secs(2), "{:?}", started.elapsed());
}

/// A set over a domain past `DENSE_MAX` (held as runs) answers as the bit vector does.
#[test]
fn large_domain_sets_behave_as_bit_vectors() {
    let n = gpusan_ptx::dataflow::DENSE_MAX + 1000;
    let (mut a, mut b) = (BitSet::new(n), BitSet::new(n));
    for i in (0..n).step_by(3).chain([n - 1, 5, 6]) {
        a.insert(i);
    }
    for i in 100..n - 100 {
        b.insert(i);
    }
    let expected: Vec<usize> = (0..n).filter(|i| i % 3 == 0 || [n - 1, 5, 6].contains(i)).collect();
    assert_eq!(a.iter().collect::<Vec<_>>(), expected);
    assert_eq!(a.count(), expected.len());
    assert!(a.contains(n - 1) && !a.contains(n) && !a.contains(1));
    let mut u = a.clone();
    assert!(u.union_with(&b));
    assert!(!u.union_with(&b), "nothing new the second time");
    assert_eq!(u.count(), b.count() + expected.iter().filter(|&&i| !(100..n - 100).contains(&i)).count());
    let mut i = a.clone();
    assert!(i.intersect_with(&b));
    assert_eq!(
        i.iter().collect::<Vec<_>>(),
        expected.iter().copied().filter(|i| (100..n - 100).contains(i)).collect::<Vec<_>>()
    );
    let mut d = a.clone();
    assert!(d.subtract(&b));
    assert_eq!(d.count(), a.count() - i.count());
    assert!(a.remove(n - 1) && !a.remove(n - 1));
    assert_ne!(a, d);
    a.clear();
    assert!(a.is_empty() && a == BitSet::new(n));
}
