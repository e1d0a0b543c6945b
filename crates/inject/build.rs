//! Three things the library needs at build time.
//!
//! Canary mode's device code (`canary/gpusan_canary.cu`), compiled by the same nvcc into a
//! fatbin of sm_90 machine code and compute_75 PTX (older and newer GPUs JIT it) (`routes::canary` loads it in each
//! context it guards); its hash is checked against `gpusan_abi::canary`'s vectors while it
//! compiles, so a mismatch fails the build.
//!
//! The binary route's patch module (`patches/gpusan_patches.cu`), compiled by the pinned
//! nvcc with `--compile-as-tools-patch` into a fatbin the library embeds
//! (`routes::binary`): nvcc is `$GPUSAN_CUDA/bin/nvcc`, else the one
//! `scripts/setup-toolchain.sh` installs in `.toolchain/`; without either the build fails
//! and says how to get it.
//!
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

/// The pinned nvcc: `$GPUSAN_CUDA/bin/nvcc` or the setup script's.
fn nvcc(root: &Path) -> PathBuf {
    println!("cargo:rerun-if-env-changed=GPUSAN_CUDA");
    let cuda = std::env::var_os("GPUSAN_CUDA")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("../.toolchain/nvidia/cu13"));
    let nvcc = cuda.join("bin/nvcc");
    if !nvcc.is_file() {
        panic!(
            "gpusan-inject: no nvcc at {} to build the binary route's patches: run scripts/setup-toolchain.sh \
             (or set GPUSAN_CUDA to a CUDA 13.0 toolkit with the Sanitizer API headers)",
            nvcc.display()
        );
    }
    nvcc
}

fn patches(root: &Path) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("patches");
    println!("cargo:rerun-if-changed={}", dir.display());
    let out = PathBuf::from(std::env::var_os("OUT_DIR").unwrap()).join("gpusan_patches.fatbin");
    let nvcc = nvcc(root);
    let status = std::process::Command::new(&nvcc)
        .args(["--fatbin", "--compile-as-tools-patch", "-arch=sm_90", "-O3", "-o"])
        .arg(&out)
        .arg(dir.join("gpusan_patches.cu"))
        .status()
        .unwrap_or_else(|e| panic!("gpusan-inject: running {}: {e}", nvcc.display()));
    assert!(status.success(), "gpusan-inject: {} failed on patches/gpusan_patches.cu ({status})", nvcc.display());
}

fn canary(root: &Path) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("canary");
    println!("cargo:rerun-if-changed={}", dir.display());
    let out = PathBuf::from(std::env::var_os("OUT_DIR").unwrap()).join("gpusan_canary.fatbin");
    let nvcc = nvcc(root);
    let status = std::process::Command::new(&nvcc)
        // Machine code for the H100, PTX for any GPU CUDA 13 supports (the driver JITs it).
        .args(["--fatbin", "-gencode", "arch=compute_90,code=sm_90", "-gencode", "arch=compute_75,code=compute_75"])
        .args(["-O3", "-o"])
        .arg(&out)
        .arg(dir.join("gpusan_canary.cu"))
        .status()
        .unwrap_or_else(|e| panic!("gpusan-inject: running {}: {e}", nvcc.display()));
    assert!(status.success(), "gpusan-inject: {} failed on canary/gpusan_canary.cu ({status})", nvcc.display());
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    patches(&root);
    canary(&root);
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
