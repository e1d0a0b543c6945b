//! A fingerprint of the code that decides what an instrumented module looks like (the
//! `abi`, `ptx` and `passes` crates), for the key of the on-disk cache of instrumented PTX: a
//! rebuilt gpusan whose pass changed must not load what the old one wrote, and the
//! package version alone does not change between builds.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut all = Vec::new();
    for krate in ["abi/src", "ptx/src", "passes/src"] {
        let dir = root.join(krate);
        println!("cargo:rerun-if-changed={}", dir.display());
        files(&dir, &mut all);
    }
    all.sort();
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for p in &all {
        p.strip_prefix(&root).unwrap_or(p).hash(&mut h);
        std::fs::read(p).unwrap_or_default().hash(&mut h);
    }
    println!("cargo:rustc-env=GPUSAN_PASS_FINGERPRINT={:016x}", h.finish());
}
