//! Control-flow graph, dominator, loop and dataflow tests.
//!
//! Fixtures follow Cranelift's file tests: each `fixtures/cfg/*.ptx` is a module, a
//! `// ---- expected` line, then the expected output as `//` comments, so the whole file
//! stays valid PTX that `gpusan ptx cfg` and `ptxas` accept. The output is
//! [`gpusan_ptx::cfg::dump`] of every function, then, for each instruction whose line
//! ends in `//?`, the registers live before and after it and the definitions reaching
//! each register it reads. `BLESS=1 cargo test` rewrites the expected part.

use std::fmt::Write;
use std::path::Path;

use gpusan_ptx::ast::{Function, Item, Statement};
use gpusan_ptx::cfg::{statement_at, BlockId, Cfg, CfgError, DomTree, InstId, LoopForest};
use gpusan_ptx::dataflow::{liveness, reaching_defs, BitSet, DefSite, Registers};
use gpusan_ptx::printer::Ptx;

fn functions(module: &gpusan_ptx::Module) -> impl Iterator<Item = &Function> {
    module.items.iter().filter_map(|i| match i {
        Item::Function(f) if f.body.is_some() => Some(&**f),
        _ => None,
    })
}

/// A register as the facts print it: scoped ones carry their `{ }` scope number.
fn reg_name(regs: &Registers, r: usize) -> String {
    let r = gpusan_ptx::dataflow::RegId(r as u32);
    match regs.scope(r) {
        0 => regs.name(r).to_string(),
        s => format!("{}@{s}", regs.name(r)),
    }
}

fn reg_list(regs: &Registers, set: &BitSet) -> String {
    let v: Vec<String> = set.iter().map(|r| reg_name(regs, r)).collect();
    if v.is_empty() {
        "-".into()
    } else {
        v.join(" ")
    }
}

fn facts(out: &mut String, src: &str, cfg: &Cfg, f: &Function) {
    let line_of = |offset: u32| src[..offset as usize].matches('\n').count();
    let marked: Vec<usize> =
        src.lines().enumerate().filter(|(_, l)| l.trim_end().ends_with("//?")).map(|(i, _)| i).collect();
    let insts = cfg.instructions(f);
    let live = liveness(cfg, f);
    let reach = reaching_defs(cfg, f);
    let regs = live.analysis().registers();
    for (i, inst) in insts.iter().enumerate() {
        if inst.span.is_none() || !marked.contains(&line_of(inst.span.start)) {
            continue;
        }
        let id = InstId(i as u32);
        let _ = writeln!(out, "i{i}: {}", Ptx(*inst).to_string().replace(" \t", " "));
        let _ = writeln!(out, "    live before  {}", reg_list(regs, &live.before(id)));
        let _ = writeln!(out, "    live after   {}", reg_list(regs, &live.after(id)));
        for &r in live.analysis().operands().uses(id) {
            let sites: Vec<String> = reach
                .reaching(id, r)
                .into_iter()
                .map(|s| match s {
                    DefSite::Entry => "entry".to_string(),
                    DefSite::Inst(d) => format!("i{}", d.0),
                })
                .collect();
            let sites = if sites.is_empty() { "-".to_string() } else { sites.join(" ") };
            let _ = writeln!(out, "    {} <- {sites}", reg_name(regs, r.index()));
        }
    }
}

fn render(src: &str) -> String {
    let module = gpusan_ptx::parse(src).unwrap_or_else(|e| panic!("fixture does not parse:\n{e}"));
    let mut out = String::new();
    for f in functions(&module) {
        let _ = writeln!(out, "function {}", f.name);
        match Cfg::build(f) {
            Ok(cfg) => {
                out.push_str(&gpusan_ptx::cfg::dump(&cfg, f));
                facts(&mut out, src, &cfg, f);
            }
            Err(e) => {
                let _ = writeln!(out, "error: {e}");
            }
        }
    }
    out
}

#[test]
fn fixtures() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cfg");
    gpusan_testkit::file_tests(&dir, 10, |input| {
        render(input).lines().map(|l| if l.is_empty() { "//\n".to_string() } else { format!("// {l}\n") }).collect()
    });
}

// ---- unit tests ----------------------------------------------------------------------

fn kernel(body: &str) -> Function {
    let src =
        format!(".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k(.param .u64 p)\n{{\n{body}\n}}\n");
    let module = gpusan_ptx::parse(&src).unwrap_or_else(|e| panic!("{e}"));
    let f = functions(&module).next().unwrap().clone();
    f
}

#[test]
fn inst_paths_lead_back_into_nested_scopes() {
    let f = kernel(
        ".reg .b32 %r<3>;\nmov.u32 %r1, 1;\n{\n.reg .b32 t;\n{\nmov.u32 t, 2;\n}\nadd.s32 %r2, %r1, t;\n}\nret;",
    );
    let cfg = Cfg::build(&f).unwrap();
    let body = f.body.as_deref().unwrap();
    assert_eq!(cfg.inst_path(InstId(1)), &[2, 1, 0]);
    assert_eq!(cfg.inst_path(InstId(2)), &[2, 2]);
    for i in 0..cfg.num_insts() as u32 {
        let Some(Statement::Inst(inst)) = statement_at(body, cfg.inst_path(InstId(i))) else {
            panic!("path of i{i} is no instruction")
        };
        assert_eq!(inst, cfg.inst(&f, InstId(i)));
    }
    assert_eq!(cfg.inst(&f, InstId(2)).opcode, "add");
    assert_eq!(cfg.inst_scope(InstId(1)), 2);
    assert_eq!(cfg.scope_parent(2), Some(1));
}

#[test]
fn undefined_label_is_an_error_not_a_panic() {
    let f = kernel("bra.uni $L_x;");
    match Cfg::build(&f) {
        Err(CfgError::UndefinedLabel { label, .. }) => assert_eq!(label, "$L_x"),
        other => panic!("expected UndefinedLabel, got {other:?}"),
    }
}

#[test]
fn duplicate_label_in_one_scope_is_an_error() {
    let f = kernel("$L_a:\nret;\n$L_a:\nret;");
    assert!(matches!(Cfg::build(&f), Err(CfgError::DuplicateLabel { .. })));
}

#[test]
fn check_finds_what_build_finds() {
    // `Cfg::check` is `Cfg::build` without the graph: the same first error, or none.
    for body in [
        "ret;",
        "$L_a:\nbra.uni $L_a;",
        "bra.uni $L_x;",
        "$L_a:\nret;\n$L_a:\nret;",
        "bra;",
        ".reg .b32 %r<2>;\nbra %r1;",
        ".reg .b32 %r<2>;\nbrx.idx %r1, $T;",
        ".reg .b32 %r<2>;\n$T: .branchtargets $L_a, $L_b;\nbrx.idx %r1, $T;\n$L_a:\nret;",
        ".reg .b32 %r<2>;\n$T: .branchtargets $L_a;\n$T: .branchtargets $L_a;\n$L_a:\nret;",
        // The first of several errors, in the order the graph meets them.
        "bra.uni $L_y;\nbra.uni $L_x;\n$L_a:\n$L_a:\nret;",
        "bra.uni $L_y;\n{\n$L_in:\nret;\n}\nbra.uni $L_in;\nbra.uni $L_z;",
    ] {
        let f = kernel(body);
        assert_eq!(Cfg::check(&f), Cfg::build(&f).map(|_| ()), "{body}");
    }
    let m = gpusan_ptx::parse(".version 8.0\n.target sm_80\n.address_size 64\n.extern .func f();\n").unwrap();
    let Item::Function(f) = &m.items[3] else { panic!() };
    assert_eq!(Cfg::check(f), Err(CfgError::NoBody(f.name)));
}

#[test]
fn declaration_without_body_is_an_error() {
    let m = gpusan_ptx::parse(".version 8.0\n.target sm_80\n.address_size 64\n.extern .func f();\n").unwrap();
    let Item::Function(f) = &m.items[3] else { panic!() };
    assert!(matches!(Cfg::build(f), Err(CfgError::NoBody(_))));
}

#[test]
fn empty_body_has_an_entry_that_falls_to_the_exit() {
    let f = kernel("");
    let cfg = Cfg::build(&f).unwrap();
    assert_eq!(cfg.num_blocks(), 2);
    assert_eq!(cfg.succs(cfg.entry()), &[cfg.exit()]);
}

#[test]
fn dominates_follows_the_tree_and_excludes_unreachable_blocks() {
    // b0 -> b1 | b2 -> b3, b4 dead.
    let f =
        kernel(".reg .pred %p;\nsetp.eq.u32 %p, 1, 1;\n@%p bra $L_b;\nbra.uni $L_j;\n$L_b:\nnop;\n$L_j:\nret;\nnop;");
    let cfg = Cfg::build(&f).unwrap();
    let dom = DomTree::dominators(&cfg);
    let b = |i| BlockId(i);
    assert!(dom.dominates(b(0), b(3)));
    assert!(dom.dominates(b(3), b(3)));
    assert!(!dom.strictly_dominates(b(3), b(3)));
    assert!(!dom.dominates(b(1), b(3)));
    assert!(!dom.dominates(b(2), b(3)));
    assert!(!cfg.is_reachable(b(4)));
    assert!(!dom.dominates(b(0), b(4)));
    assert_eq!(dom.idom(b(3)), Some(b(0)));
    let pdom = DomTree::post_dominators(&cfg);
    assert_eq!(pdom.idom(b(0)), Some(b(3)));
    assert!(pdom.dominates(cfg.exit(), b(1)));
}

#[test]
fn loops_nest_and_report_depth() {
    let f = kernel(
        ".reg .pred %p<3>;\nsetp.eq.u32 %p1, 1, 1;\n$L_o:\nnop;\n$L_i:\nnop;\n@%p1 bra $L_i;\n@%p2 bra $L_o;\nret;",
    );
    let cfg = Cfg::build(&f).unwrap();
    let dom = DomTree::dominators(&cfg);
    let loops = LoopForest::compute(&cfg, &dom);
    assert_eq!(loops.len(), 2);
    let (outer, inner) = (&loops.loops()[0], &loops.loops()[1]);
    assert_eq!(outer.header, BlockId(1));
    assert_eq!(inner.header, BlockId(2));
    assert_eq!(inner.parent, Some(gpusan_ptx::cfg::LoopId(0)));
    assert_eq!(loops.depth(BlockId(2)), 2);
    assert_eq!(loops.depth(BlockId(3)), 1);
    assert_eq!(loops.depth(BlockId(4)), 0);
    assert_eq!(outer.preheader, Some(BlockId(0)));
    assert_eq!(inner.preheader, Some(BlockId(1)));
}

#[test]
fn bitset_operations_report_change() {
    let mut a = BitSet::new(130);
    assert!(a.insert(0) && a.insert(64) && a.insert(129));
    assert!(!a.insert(64));
    let mut b = BitSet::new(130);
    b.insert(64);
    b.insert(5);
    assert!(a.union_with(&b));
    assert!(!a.union_with(&b));
    assert_eq!(a.iter().collect::<Vec<_>>(), vec![0, 5, 64, 129]);
    assert!(a.subtract(&b));
    assert_eq!(a.iter().collect::<Vec<_>>(), vec![0, 129]);
    assert!(!a.intersect_with(&a.clone()));
    assert!(a.remove(129) && !a.remove(129));
    assert_eq!(a.count(), 1);
}
