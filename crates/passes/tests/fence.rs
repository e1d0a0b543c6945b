//! Cases of `tests/cases/` as the pinned nvcc compiles them, fenced (`--mode fence`'s pass,
//! issue 18): their global and generic loads, stores and atomics are fenced, their module
//! variables reached through relocated addresses, and the fenced module assembles with the
//! pinned ptxas. Whether a fenced kernel stays in its partition is
//! the GPU's to show (`docs/fence-design.md`).

mod common;

use gpusan_passes::fence;

const CASES: &[&str] = &[
    "check_global_oob_adjacent",
    "check_atomic_oob",
    "check_clean_generic_pointers",
    "check_clean_aligned_vectors",
    "check_clean_shared_tiles",
    "check_clean_struct_of_pointers",
    "api_clean_symbols",
    "api_kernel_trap",
    "api_kernel_assert",
];

#[test]
fn cases_are_fenced_and_assemble() {
    let dir = common::scratch("fence");
    for case in CASES {
        let text = common::case_ptx(case, &dir);
        let mut module = gpusan_ptx::parse(&text).unwrap();
        let report = fence::run(&mut module).unwrap_or_else(|e| panic!("{case}: {e}"));
        let fenced: u32 = report.pass.functions.iter().map(|f| f.sites).sum();
        assert!(fenced + report.trapped > 0, "{case}: nothing fenced");
        if case.contains("trap") || case.contains("assert") {
            assert!(report.trapped > 0, "{case}: its trap is left");
        }
        let printed = gpusan_ptx::print(&module);
        gpusan_passes::verify(&gpusan_ptx::parse(&printed).unwrap()).unwrap_or_else(|e| panic!("{case}: {e}"));
        let out_ptx = dir.join(format!("{case}.fenced.ptx"));
        std::fs::write(&out_ptx, &printed).unwrap();
        let cubin = dir.join(format!("{case}.cubin"));
        if let Err(e) = gpusan_testkit::assemble(&gpusan_testkit::ptxas(), &out_ptx, &cubin) {
            panic!("{case}: ptxas refused the fenced module:\n{e}");
        }
        // Its `__device__` variables are reached through their relocated addresses.
        if *case == "api_clean_symbols" {
            assert!(report.relocated > 0, "{case}: no variable relocated");
        }
        println!(
            "{case}: {fenced} fenced, {} relocated, {} traps, {} unfenced",
            report.relocated, report.trapped, report.unfenced
        );
    }
}

/// The switch of the corpus (`brx.idx` over a 16-entry `.branchtargets`, debug build):
/// its index clamped, the module still assembles.
#[test]
fn an_indirect_branch_is_clamped_and_assembles() {
    let src = std::fs::read_to_string(gpusan_testkit::repo_root().join("tests/corpus/ptx/switch_brx.G.ptx")).unwrap();
    let out = gpusan_passes::instrument(&src, &fence::Fence).unwrap();
    assert!(out.ptx.contains("min.u32 \t%__gf_i, %r36, 15;"), "{}", out.ptx);
    let dir = common::scratch("fence-brx");
    let (ptx, cubin) = (dir.join("switch_brx.fenced.ptx"), dir.join("switch_brx.cubin"));
    std::fs::write(&ptx, &out.ptx).unwrap();
    if let Err(e) = gpusan_testkit::assemble(&gpusan_testkit::ptxas(), &ptx, &cubin) {
        panic!("ptxas refused the fenced switch:\n{e}");
    }
}

/// The corpus's `cp.async` kernels (optimized and debug builds): every copy's global source
/// fenced, and the module still assembles.
#[test]
fn async_copies_are_fenced_and_assemble() {
    let dir = common::scratch("fence-cp");
    for name in ["cp_async.O3", "cp_async.G"] {
        let path = gpusan_testkit::repo_root().join(format!("tests/corpus/ptx/{name}.ptx"));
        let src = std::fs::read_to_string(path).unwrap();
        let is_copy = |l: &str| ["cp.async.ca.", "cp.async.cg."].iter().any(|c| l.trim_start().starts_with(c));
        let copies = src.lines().filter(|l| is_copy(l)).count();
        assert!(copies > 0, "{name}: no cp.async");
        let out = gpusan_passes::instrument(&src, &fence::Fence).unwrap();
        let fenced =
            out.ptx.lines().filter(|l| l.trim_start().starts_with("cp.async.c") && l.contains("[%__gf_t]")).count();
        assert_eq!(fenced, copies, "{name}: every copy's source fenced");
        let (ptx, cubin) = (dir.join(format!("{name}.fenced.ptx")), dir.join(format!("{name}.cubin")));
        std::fs::write(&ptx, &out.ptx).unwrap();
        if let Err(e) = gpusan_testkit::assemble(&gpusan_testkit::ptxas(), &ptx, &cubin) {
            panic!("{name}: ptxas refused the fenced module:\n{e}");
        }
    }
}

/// The corpus's Hopper bulk copies and TMA (optimized and debug builds): every bulk copy's
/// global side fenced, every tensor copy's map taken anew from the `__grid_constant__`
/// parameter it came from (and named for the manager's check at launch), nothing left
/// unfenced, and the module still assembles.
#[test]
fn bulk_and_tensor_copies_are_fenced_and_assemble() {
    let dir = common::scratch("fence-tma");
    for name in ["tma_bulk.O3", "tma_bulk.G"] {
        let path = gpusan_testkit::repo_root().join(format!("tests/corpus/ptx/{name}.ptx"));
        let src = std::fs::read_to_string(path).unwrap();
        let starts = |l: &str, p: &str| l.trim_start().starts_with(p);
        let bulk = src
            .lines()
            .filter(|l| {
                starts(l, "cp.async.bulk.")
                    && !l.contains("commit_group")
                    && !l.contains("wait_group")
                    && !l.contains(".tensor")
            })
            .count();
        let tensor = src.lines().filter(|l| starts(l, "cp.async.bulk.tensor")).count();
        assert!(bulk > 0 && tensor > 0, "{name}: {bulk} bulk, {tensor} tensor copies");
        let mut module = gpusan_ptx::parse(&src).unwrap();
        let report = fence::run(&mut module).unwrap();
        assert_eq!(report.unfenced, 0, "{name}");
        let maps: Vec<(String, Vec<String>)> =
            report.maps.iter().map(|(f, p)| (f.to_string(), p.iter().map(|n| n.to_string()).collect())).collect();
        assert_eq!(
            maps,
            vec![(
                "tma_tile_2d".to_string(),
                vec!["tma_tile_2d_param_0".to_string(), "tma_tile_2d_param_1".to_string()]
            )],
            "{name}"
        );
        let printed = gpusan_ptx::print(&module);
        let fenced_bulk = printed
            .lines()
            .filter(|l| {
                starts(l, "cp.async.bulk.")
                    && !l.contains(".tensor")
                    && l.contains("[%__gf_t]")
                    && l.contains("%__gf_z")
            })
            .count();
        assert_eq!(fenced_bulk, bulk, "{name}: every bulk copy fenced, its size clamped");
        let anew = printed.lines().filter(|l| starts(l, "cp.async.bulk.tensor") && l.contains("[%__gf_tm, {")).count();
        assert_eq!(anew, tensor, "{name}: every tensor copy reads its map from its parameter");
        gpusan_passes::verify(&gpusan_ptx::parse(&printed).unwrap()).unwrap_or_else(|e| panic!("{name}: {e}"));
        let (ptx, cubin) = (dir.join(format!("{name}.fenced.ptx")), dir.join(format!("{name}.cubin")));
        std::fs::write(&ptx, &printed).unwrap();
        if let Err(e) = gpusan_testkit::assemble(&gpusan_testkit::ptxas(), &ptx, &cubin) {
            panic!("{name}: ptxas refused the fenced module:\n{e}");
        }
    }
}

/// The bulk and tensor copies `gpusan-serve`'s containment example (`crates/serve/examples/
/// containment.rs`) launches on the GPU: fenced with nothing left over, and assembled, so
/// that a GPU call does not find out.
#[test]
fn the_containment_examples_copies_are_fenced_and_assemble() {
    let dir = common::scratch("fence-containment");
    for name in ["containment_bulk", "containment_tma"] {
        let path = gpusan_testkit::repo_root().join(format!("crates/serve/tests/ptx/{name}.ptx"));
        let mut module = gpusan_ptx::parse(&std::fs::read_to_string(path).unwrap()).unwrap();
        let report = fence::run(&mut module).unwrap();
        assert_eq!(report.unfenced, 0, "{name}");
        if name.ends_with("tma") {
            assert_eq!(report.maps.len(), 1, "{name}: the map parameter named");
        }
        let (ptx, cubin) = (dir.join(format!("{name}.fenced.ptx")), dir.join(format!("{name}.cubin")));
        std::fs::write(&ptx, gpusan_ptx::print(&module)).unwrap();
        if let Err(e) = gpusan_testkit::assemble(&gpusan_testkit::ptxas(), &ptx, &cubin) {
            panic!("{name}: ptxas refused the fenced module:\n{e}");
        }
    }
}
