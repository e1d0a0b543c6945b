//! Every function of every module in `tests/corpus/ptx/` through the graph, dominators,
//! loops, reaching definitions and liveness, checking the invariants that must hold
//! whatever the code: dominance from the entry, back edges closing on a dominator, and
//! solver results that are a fixpoint of their equations. Skipped when the corpus is
//! absent; `GPUSAN_PTX_CORPUS=dir` points it elsewhere.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use gpusan_ptx::ast::{Function, Item};
use gpusan_ptx::cfg::{Cfg, DomTree, LoopForest};
use gpusan_ptx::dataflow::{liveness, reaching_defs, Analysis, Direction, Results};

/// Per file, debug build: well above what the largest corpus module needs.
const LIMIT: Duration = Duration::from_secs(60);

/// Each block's stored facts satisfy the equations the solver is meant to solve.
fn assert_fixpoint<A: Analysis>(r: &Results<A>, what: &str)
where
    A::Fact: std::fmt::Debug,
{
    let (cfg, a) = (r.cfg(), r.analysis());
    for b in cfg.block_ids() {
        let block = cfg.block(b);
        let (mut meet, mut fact) = (a.bottom(), a.bottom());
        match A::DIRECTION {
            Direction::Forward => {
                if b == cfg.entry() {
                    a.join(&mut meet, &a.boundary());
                }
                for &p in &block.preds {
                    if cfg.is_reachable(p) || !block.reachable {
                        a.join(&mut meet, r.block_out(p));
                    }
                }
                assert!(meet == *r.block_in(b), "{what}: IN of b{} is not the join of its predecessors", b.0);
                fact.clone_from(r.block_in(b));
                block.insts().for_each(|i| a.transfer(i, &mut fact));
                assert!(fact == *r.block_out(b), "{what}: OUT of b{} is not its IN carried across it", b.0);
            }
            Direction::Backward => {
                if b == cfg.exit() {
                    a.join(&mut meet, &a.boundary());
                }
                for &s in &block.succs {
                    a.join(&mut meet, r.block_in(s));
                }
                assert!(meet == *r.block_out(b), "{what}: OUT of b{} is not the join of its successors", b.0);
                fact.clone_from(r.block_out(b));
                block.insts().rev().for_each(|i| a.transfer(i, &mut fact));
                assert!(fact == *r.block_in(b), "{what}: IN of b{} is not its OUT carried back across it", b.0);
            }
        }
    }
}

fn check(f: &Function, what: &str) -> (usize, usize) {
    let cfg = Cfg::build(f).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(Cfg::check(f), Ok(()), "{what}: the check disagrees with the graph");
    let dom = DomTree::dominators(&cfg);
    let mut covered = 0;
    for b in cfg.block_ids() {
        let block = cfg.block(b);
        assert_eq!(block.insts.start, covered, "{what}: blocks must partition the instructions");
        covered = block.insts.end;
        for &s in &block.succs {
            assert!(cfg.preds(s).contains(&b), "{what}: b{} -> b{} missing from the predecessors", b.0, s.0);
        }
        assert_eq!(block.reachable, cfg.rpo_index(b).is_some());
        if block.reachable {
            assert!(dom.dominates(cfg.entry(), b), "{what}: entry does not dominate reachable b{}", b.0);
            if let Some(d) = dom.idom(b) {
                assert!(cfg.rpo_index(d) < cfg.rpo_index(b), "{what}: idom of b{} comes after it", b.0);
                assert!(dom.strictly_dominates(d, b));
            }
        } else {
            assert!(dom.idom(b).is_none() && !dom.dominates(cfg.entry(), b));
        }
    }
    assert_eq!(covered as usize, cfg.num_insts());

    let loops = LoopForest::compute(&cfg, &dom);
    for l in loops.loops() {
        for &u in &l.latches {
            assert!(cfg.succs(u).contains(&l.header) && dom.dominates(l.header, u), "{what}: bad back edge");
        }
        for &b in &l.blocks {
            assert!(dom.dominates(l.header, b), "{what}: loop header b{} does not dominate b{}", l.header.0, b.0);
        }
    }
    for b in cfg.block_ids() {
        let holding = loops.loops().iter().filter(|l| l.contains(b)).count() as u32;
        assert_eq!(loops.depth(b), holding, "{what}: depth of b{}", b.0);
    }
    for &(u, h) in loops.irreducible_edges() {
        assert!(!dom.dominates(h, u));
    }

    assert_fixpoint(&reaching_defs(&cfg, f), &format!("{what}: reaching definitions"));
    assert_fixpoint(&liveness(&cfg, f), &format!("{what}: liveness"));
    (cfg.num_insts(), cfg.num_blocks())
}

#[test]
fn corpus_functions_satisfy_graph_and_dataflow_invariants() {
    let dir = std::env::var_os(gpusan_abi::env::PTX_CORPUS)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/corpus/ptx"));
    let mut paths: Vec<PathBuf> = match std::fs::read_dir(&dir) {
        Ok(rd) => rd.map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|e| e == "ptx")).collect(),
        Err(_) => Vec::new(),
    };
    // The corpus is committed: an empty one means a broken checkout, not a reason to pass.
    assert!(paths.len() >= 40, "only {} PTX files in {}: run scripts/build-corpus.sh", paths.len(), dir.display());
    paths.sort();
    let total = Instant::now();
    for path in &paths {
        let src = std::fs::read_to_string(path).unwrap();
        let module = gpusan_ptx::parse(&src).unwrap_or_else(|e| panic!("{}", e.with_path(path.display().to_string())));
        let start = Instant::now();
        let (mut functions, mut insts, mut blocks) = (0, 0, 0);
        for item in &module.items {
            let Item::Function(f) = item else { continue };
            if f.body.is_none() {
                continue;
            }
            let (i, b) = check(f, &format!("{} {}", path.display(), f.name));
            functions += 1;
            insts += i;
            blocks += b;
        }
        let took = start.elapsed();
        eprintln!(
            "{}: {functions} functions, {insts} instructions, {blocks} blocks: {took:.2?}",
            path.file_name().unwrap().to_string_lossy()
        );
        assert!(took < LIMIT, "{} took {took:?}", path.display());
    }
    eprintln!("corpus: {} files in {:.2?}", paths.len(), total.elapsed());
}
