//! What gpusan's test suites share, so each knows one way to find the repository, the PTX
//! corpus and the pinned CUDA toolchain, to run ptxas, and to keep Cranelift-style file
//! tests (input, a separator line, expected output; `BLESS=1` rewrites the expectations).
//!
//! A missing toolchain or corpus fails the calling test: CI installs both first, and a test
//! that passes by skipping its subject would prove nothing.

pub mod modules;

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

/// The bin folder of the pinned toolchain: `$GPUSAN_CUDA/bin`, else `.toolchain/` in the
/// repository (`scripts/setup-toolchain.sh` installs it).
pub fn cuda_bin() -> PathBuf {
    let bin = match std::env::var_os(gpusan_abi::env::CUDA) {
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

/// A tool of the pinned toolchain (`ptxas`, `cuobjdump`, `nvdisasm`, `nvcc`).
pub fn cuda_tool(name: &str) -> PathBuf {
    cuda_bin().join(name)
}

pub fn ptxas() -> PathBuf {
    cuda_tool("ptxas")
}

/// Assembles `ptx_path` with `-v` for the architecture its `.target` names (with `-g` for a
/// debug target); returns ptxas's report on success, its messages on failure.
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

/// The line between a file test's input and its expected output.
pub const SEPARATOR: &str = "// ---- expected";

/// Runs the file tests in `dir` (every `*.ptx`, at least `min` of them): the text after
/// [`SEPARATOR`] must equal `render(input)`. With `BLESS=1` differing expectations are
/// rewritten instead; the test still fails if any fixture's output could not be produced.
pub fn file_tests(dir: &Path, min: usize, render: impl Fn(&str) -> String) {
    let bless = std::env::var_os("BLESS").is_some_and(|v| v == "1");
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "ptx"))
        .collect();
    paths.sort();
    assert!(paths.len() >= min, "expected at least {min} fixtures in {}", dir.display());
    let mut failed = Vec::new();
    for path in &paths {
        let text = std::fs::read_to_string(path).unwrap();
        let (input, expected) = match text.split_once(&format!("{SEPARATOR}\n")) {
            Some((i, e)) => (i, e.to_string()),
            None => (text.as_str(), String::new()),
        };
        let actual = render(input);
        if actual == expected {
            continue;
        }
        if bless {
            let input = input.trim_end_matches('\n');
            std::fs::write(path, format!("{input}\n\n{SEPARATOR}\n{actual}")).unwrap();
        } else {
            eprintln!("=== {}: expected\n{expected}=== actual\n{actual}", path.display());
            failed.push(path.file_name().unwrap().to_string_lossy().into_owned());
        }
    }
    assert!(failed.is_empty(), "fixtures differ (BLESS=1 rewrites them): {failed:?}");
}

/// The file tests in `dir` are real PTX: the pinned ptxas assembles every input and every
/// expected output (those that are not `// error:` expectations).
pub fn assemble_file_tests(dir: &Path) {
    let ptxas = ptxas();
    let work = std::env::temp_dir().join(format!("gpusan-fixtures-{}-{:x}", std::process::id(), dir_hash(dir)));
    std::fs::create_dir_all(&work).unwrap();
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "ptx"))
        .collect();
    paths.sort();
    let mut failed = Vec::new();
    for path in &paths {
        let text = std::fs::read_to_string(path).unwrap();
        let (input, expected) = text.split_once(&format!("{SEPARATOR}\n")).unwrap_or((&text, ""));
        let mut parts = vec![("input", input)];
        if !expected.starts_with("// error:") {
            parts.push(("expected output", expected));
        }
        for (what, ptx) in parts {
            let file = work.join("f.ptx");
            std::fs::write(&file, ptx).unwrap();
            if let Err(e) = assemble(&ptxas, &file, &work.join("f.cubin")) {
                failed.push(format!("{} ({what}):\n{e}", path.display()));
            }
        }
    }
    let _ = std::fs::remove_dir_all(&work);
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// Distinguishes the scratch folders of test binaries running at once.
fn dir_hash(dir: &Path) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    dir.hash(&mut h);
    h.finish()
}

/// A kernel of `blocks` basic blocks in one chain: each a guarded branch around a global
/// load and store through fresh registers (three definitions a block), the shape of long
/// straight-line code with many branches. Analyses and passes must stay linear on it.
pub fn chain_kernel(blocks: usize) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(blocks * 200 + 512);
    let _ = write!(
        s,
        ".version 9.0\n.target sm_90\n.address_size 64\n\n.visible .entry chain(\n\t.param .u64 p,\n\t.param .u32 n\n)\n{{\n\
         \t.reg .pred %p<{}>;\n\t.reg .b32 %r<{}>;\n\t.reg .b64 %rd<{}>;\n\
         \tld.param.u64 %rd1, [p];\n\tcvta.to.global.u64 %rd2, %rd1;\n\tld.param.u32 %r1, [n];\n",
        blocks + 1,
        2 * blocks + 2,
        blocks + 3
    );
    for i in 0..blocks {
        let _ = write!(
            s,
            "\tsetp.le.u32 %p{p}, %r1, {i};\n\t@%p{p} bra $L__BB0_{i};\n\tadd.s64 %rd{d}, %rd2, {off};\n\
             \tld.global.u32 %r{a}, [%rd{d}];\n\tadd.s32 %r{b}, %r{a}, 1;\n\tst.global.u32 [%rd{d}+4], %r{b};\n$L__BB0_{i}:\n",
            p = i + 1,
            d = i + 3,
            off = 4 * (i % 1000),
            a = 2 * i + 2,
            b = 2 * i + 3
        );
    }
    s.push_str("\tret;\n}\n");
    s
}
