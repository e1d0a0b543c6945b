//! Shared by the integration tests: where the repository, its PTX corpus and the pinned
//! CUDA toolchain are, and how ptxas is run.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("repository root")
}

/// Every PTX file of the corpus (nvcc and Triton), sorted.
pub fn corpus_files() -> Vec<PathBuf> {
    let root = repo_root();
    let mut files = Vec::new();
    for dir in ["tests/corpus/ptx", "tests/corpus/triton"] {
        let Ok(entries) = std::fs::read_dir(root.join(dir)) else { continue };
        files.extend(
            entries.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.extension().is_some_and(|e| e == "ptx")),
        );
    }
    files.sort();
    files
}

/// The pinned ptxas (`scripts/setup-toolchain.sh` installs it). A missing toolchain fails
/// the test: a test that passes by skipping its subject would prove nothing.
pub fn ptxas() -> PathBuf {
    let bin = match std::env::var_os("GPUSAN_CUDA") {
        Some(c) => PathBuf::from(c).join("bin"),
        None => repo_root().join(".toolchain/nvidia/cu13/bin"),
    };
    let ptxas = bin.join("ptxas");
    assert!(
        ptxas.is_file(),
        "the pinned CUDA toolchain is missing at {}: run scripts/setup-toolchain.sh",
        bin.display()
    );
    ptxas
}

/// Assembles `ptx_path` with `-v` for the architecture its `.target` names (with `-g` for
/// a debug target); returns ptxas's report on success.
pub fn assemble(ptxas: &Path, ptx_path: &Path, cubin: &Path) -> Result<String, String> {
    let src = std::fs::read_to_string(ptx_path).map_err(|e| e.to_string())?;
    let target = src.lines().find(|l| l.trim_start().starts_with(".target")).ok_or("no .target line")?;
    let arch = if target.contains("sm_90a") { "sm_90a" } else { "sm_90" };
    let mut cmd = Command::new(ptxas);
    cmd.arg("-v").arg(format!("-arch={arch}")).arg(ptx_path).arg("-o").arg(cubin);
    if target.contains("debug") {
        cmd.arg("-g");
    }
    let out = cmd.output().map_err(|e| format!("running {}: {e}", ptxas.display()))?;
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    if out.status.success() {
        Ok(text)
    } else {
        Err(text)
    }
}

/// `Used N registers` per entry function, from `ptxas -v`.
pub fn registers(report: &str) -> Vec<(String, u32)> {
    let mut out = Vec::new();
    let mut current = None;
    for line in report.lines() {
        if let Some(rest) = line.split("Compiling entry function '").nth(1) {
            current = rest.split('\'').next().map(str::to_string);
        } else if let Some(rest) = line.split("Used ").nth(1) {
            if let (Some(name), Some(n)) = (current.take(), rest.split(' ').next().and_then(|n| n.parse().ok())) {
                out.push((name, n));
            }
        }
    }
    out
}
