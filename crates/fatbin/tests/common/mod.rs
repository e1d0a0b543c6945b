//! Fixtures and the pinned CUDA tools, shared by the integration tests.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use gpusan_fatbin::{Fatbin, HostElf, SectionKind};

/// Every fixture scripts/build-fatbin-fixtures.sh makes.
pub const HOST_FIXTURES: &[&str] = &["exe_sm90", "exe_multi", "exe_zstd", "lib.so", "rdc.o"];
pub const FATBIN_FIXTURES: &[&str] = &["sm90.fatbin", "multi.fatbin", "lz4.fatbin", "plain.fatbin", "ident.fatbin"];

pub fn all_fixtures() -> impl Iterator<Item = &'static str> {
    HOST_FIXTURES.iter().chain(FATBIN_FIXTURES).copied()
}

pub fn fixture_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

pub fn fixture(name: &str) -> Vec<u8> {
    let path = fixture_path(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}; run scripts/build-fatbin-fixtures.sh", path.display()))
}

pub fn is_host(name: &str) -> bool {
    HOST_FIXTURES.contains(&name)
}

/// The fatbins of a fixture that `cuobjdump` lists without `-all`: a host file's
/// `.nv_fatbin` when it has one, else its `__nv_relfatbin`; all of a `.fatbin` file.
pub fn listed_fatbins<'a>(name: &str, data: &'a [u8]) -> Vec<Fatbin<'a>> {
    if !is_host(name) {
        return gpusan_fatbin::parse(data).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    let host = HostElf::parse(data).unwrap_or_else(|e| panic!("{name}: {e}"));
    let linked: Vec<_> = host.fatbins_in(SectionKind::NvFatbin).cloned().collect();
    if linked.is_empty() {
        host.fatbins_in(SectionKind::RelFatbin).cloned().collect()
    } else {
        linked
    }
}

/// The name cuobjdump gives extracted files: the file name without its extension.
pub fn stem(name: &str) -> &str {
    name.rsplit_once('.').map_or(name, |(stem, _)| stem)
}

/// A tool of the pinned toolchain (see `gpusan-testkit`).
pub fn cuda_tool(tool: &str) -> PathBuf {
    gpusan_testkit::cuda_tool(tool)
}

/// Runs a CUDA tool in `dir` and returns its standard output; fails the test if it fails.
pub fn run_tool(tool: &str, args: &[&str], dir: &Path) -> String {
    let output = Command::new(cuda_tool(tool))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {tool}: {e}"));
    assert!(output.status.success(), "{tool} {args:?} failed: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).expect("tool output is UTF-8")
}
