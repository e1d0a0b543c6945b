//! Shared by the integration tests: where the repository, its PTX corpus and the pinned
//! CUDA toolchain are.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

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

/// The bin folder of the pinned toolchain (`scripts/setup-toolchain.sh` installs it).
/// A missing toolchain fails the test: CI installs it first, and a test that passes by
/// skipping its subject would prove nothing.
pub fn cuda_bin() -> PathBuf {
    let bin = match std::env::var_os("GPUSAN_CUDA") {
        Some(c) => PathBuf::from(c).join("bin"),
        None => repo_root().join(".toolchain/nvidia/cu13/bin"),
    };
    assert!(
        bin.join("ptxas").is_file(),
        "the pinned CUDA toolchain is missing at {}: run scripts/setup-toolchain.sh",
        bin.display()
    );
    bin
}
