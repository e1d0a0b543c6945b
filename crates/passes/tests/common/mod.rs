//! The shared test support (the corpus, the pinned toolchain: see `gpusan-testkit`), and
//! how a check fixture names its configuration.
#![allow(unused_imports)]
pub use gpusan_testkit::*;

use gpusan_passes::check::{CheckConfig, Counting, LocalBounds, Reaction};

/// The configuration a check fixture asks for in its header lines (`// check-reaction:
/// abort`, `// check-count: dynamic`, `// local-bounds: frame`); the default otherwise.
#[allow(dead_code)]
pub fn check_config_of(input: &str) -> CheckConfig {
    let reaction = input
        .lines()
        .find_map(|l| l.strip_prefix("// check-reaction: "))
        .map(|r| Reaction::from_name(r.trim()).expect("a reaction name"))
        .unwrap_or_default();
    let counting = input
        .lines()
        .find_map(|l| l.strip_prefix("// check-count: "))
        .map(|c| match c.trim() {
            "dynamic" => Counting::Dynamic,
            other => panic!("`// check-count: {other}`: only `dynamic`"),
        })
        .unwrap_or_default();
    let local_bounds = input
        .lines()
        .find_map(|l| l.strip_prefix("// local-bounds: "))
        .map(|b| LocalBounds::from_name(b.trim()).expect("`object` or `frame`"))
        .unwrap_or_default();
    CheckConfig { reaction, counting, local_bounds }
}

/// `tests/cases/<case>.cu` compiled by the pinned nvcc to `dir/<case>.ptx` (`-arch=sm_90
/// -lineinfo`, as the GPU suite builds it); returns the PTX.
#[allow(dead_code)]
pub fn case_ptx(case: &str, dir: &std::path::Path) -> String {
    let ptx = dir.join(format!("{case}.ptx"));
    let src = repo_root().join("tests/cases").join(format!("{case}.cu"));
    let out = std::process::Command::new(cuda_tool("nvcc"))
        .args(["-arch=sm_90", "-lineinfo", "-ptx", "-o"])
        .arg(&ptx)
        .arg(&src)
        .output()
        .expect("running the pinned nvcc");
    assert!(out.status.success(), "nvcc {case}: {}", String::from_utf8_lossy(&out.stderr));
    std::fs::read_to_string(&ptx).unwrap()
}

/// A scratch folder of this test process, named after `what`.
#[allow(dead_code)]
pub fn scratch(what: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("gpusan-{what}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
