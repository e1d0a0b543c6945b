//! The shared and local memory cases of `tests/cases/` as the pinned nvcc compiles them
//! (`-O3 -lineinfo`, as the GPU suite builds them): the accesses each case is about must
//! be checked against their variable, not left unchecked, and the instrumented PTX must
//! assemble. Whether a check fires is the GPU suite's to show (`bench/gpu-suite.sh`); this
//! test makes sure there is a check to fire, and that the clean cases' on-chip accesses are
//! checked too (so their silence on the GPU means something).

mod common;

use std::path::PathBuf;
use std::process::Command;

use gpusan_passes::check::{self, Check};

/// `(case, shared accesses, local accesses)`: how many on-chip accesses the case's
/// kernels make in their own space (generic accesses into a window come on top).
const CASES: &[&str] = &[
    "check_shared_static_oob",
    "check_shared_dynamic_oob",
    "check_shared_between_arrays",
    "check_local_oob",
    "check_clean_shared_tiles",
    "check_clean_local_arrays",
];

fn compile(case: &str, dir: &std::path::Path) -> (PathBuf, String) {
    let src = gpusan_testkit::repo_root().join("tests/cases").join(format!("{case}.cu"));
    let ptx = dir.join(format!("{case}.ptx"));
    let out = Command::new(gpusan_testkit::cuda_tool("nvcc"))
        .args(["-arch=sm_90", "-lineinfo", "-ptx", "-o"])
        .arg(&ptx)
        .arg(&src)
        .output()
        .expect("running the pinned nvcc");
    assert!(out.status.success(), "nvcc {case}: {}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&ptx).unwrap();
    (ptx, text)
}

/// On-chip accesses (shared or local space) of the module, counted from the input.
fn on_chip(ptx: &str) -> (u32, u32) {
    let m = gpusan_ptx::parse(ptx).unwrap();
    let (mut shared, mut local) = (0, 0);
    for item in &m.items {
        let gpusan_ptx::ast::Item::Function(f) = item else { continue };
        let Ok(cfg) = gpusan_ptx::cfg::Cfg::build(f) else { continue };
        for inst in cfg.instructions(f) {
            for a in gpusan_ptx::semantics::memory_accesses(inst) {
                if a.space.is_shared() {
                    shared += 1;
                } else if a.space == gpusan_ptx::semantics::Space::Local {
                    local += 1;
                }
            }
        }
    }
    (shared, local)
}

#[test]
fn on_chip_cases_are_checked_and_assemble() {
    let dir = std::env::temp_dir().join(format!("gpusan-check-cases-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ptxas = gpusan_testkit::ptxas();
    for case in CASES {
        let (_, src) = compile(case, &dir);
        let (shared, local) = on_chip(&src);
        assert!(shared + local > 0, "{case}: nvcc made no shared or local access; the case tests nothing");
        let mut m = gpusan_ptx::parse(&src).unwrap();
        let r = check::run(&mut m, Some(&src)).unwrap();
        let checked_shared: u32 = r.functions.iter().map(|f| f.shared).sum();
        let checked_local: u32 = r.functions.iter().map(|f| f.local).sum();
        // Every access in shared or local space is checked (generic ones may add more).
        assert!(checked_shared >= shared, "{case}: {checked_shared} of {shared} shared accesses checked");
        assert!(checked_local >= local, "{case}: {checked_local} of {local} local accesses checked");
        let out = gpusan_passes::instrument(&src, &Check).unwrap();
        let file = dir.join(format!("{case}.instrumented.ptx"));
        std::fs::write(&file, &out.ptx).unwrap();
        common::assemble(&ptxas, &file, &dir.join(format!("{case}.cubin")))
            .unwrap_or_else(|e| panic!("{case}: instrumented, it does not assemble:\n{e}"));
        // The bug cases' checks name the right code.
        if case.contains("shared") && !case.contains("clean") {
            assert!(out.ptx.contains(&format!("[%__gs_r+36], {};", check::CODE_SHARED_OUT_OF_BOUNDS)), "{case}");
        }
        if case.contains("local") && !case.contains("clean") {
            assert!(out.ptx.contains(&format!("[%__gs_r+36], {};", check::CODE_LOCAL_OUT_OF_BOUNDS)), "{case}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
