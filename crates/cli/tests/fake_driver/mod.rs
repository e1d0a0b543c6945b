//! The fake CUDA driver (tests/fake_cuda/libcuda.c) and programs linked against it, built
//! for a test file, and `gpusan run` over them: what the test files that run programs
//! without a GPU share.
// Each test file uses its own part of this.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

pub mod schema;

/// The sources: tests/fake_cuda/.
pub fn sources() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fake_cuda")
}

/// Runs `cmd`, which must succeed.
pub fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(out.status.success(), "{cmd:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// Builds the fake driver into a new folder named after `tag` and this process, with each
/// program (its name, its source in tests/fake_cuda/) linked against it; returns the
/// folder. Put the folder on `LD_LIBRARY_PATH` of what runs the programs.
pub fn build(tag: &str, programs: &[(&str, &str)]) -> PathBuf {
    let src = sources();
    let dir = std::env::temp_dir().join(format!("gpusan-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let lib = dir.join("libcuda.so.1");
    run(Command::new("cc")
        .args(["-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o"])
        .args([&lib, &src.join("libcuda.c")]));
    let _ = std::os::unix::fs::symlink(&lib, dir.join("libcuda.so"));
    // NVTX v3's headers as CUDA 13.0 ships them (the pinned `nvidia-nvtx` wheel).
    let cuda_include = gpusan_testkit::cuda_bin().parent().map(|c| c.join("include")).unwrap_or_default();
    for (name, source) in programs {
        run(Command::new("cc")
            .arg("-I")
            .arg(&cuda_include)
            .arg("-o")
            .args([&dir.join(name), &src.join(source)])
            .arg("-L")
            .arg(&dir)
            .args(["-lcuda", "-ldl", "-lpthread"])
            .arg(format!("-Wl,-rpath,{}", dir.display())));
    }
    dir
}

/// The injected library next to the `gpusan` binary under test.
pub fn inject_lib() -> PathBuf {
    let lib = Path::new(env!("CARGO_BIN_EXE_gpusan")).with_file_name("libgpusan_inject.so");
    assert!(lib.is_file(), "{} missing: run `cargo build -p gpusan-inject` first", lib.display());
    lib
}

/// What a `gpusan run` showed.
pub struct Outcome {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    /// The JSON report (`null` when none was written).
    pub report: serde_json::Value,
}

impl Outcome {
    /// The kinds of error reported, sorted.
    pub fn kinds(&self) -> Vec<String> {
        let mut k: Vec<String> =
            self.report["summary"]["by_kind"].as_object().map(|m| m.keys().cloned().collect()).unwrap_or_default();
        k.sort();
        k
    }

    /// How many errors of `kind` were reported.
    pub fn count(&self, kind: &str) -> u64 {
        self.report["summary"]["by_kind"][kind].as_u64().unwrap_or(0)
    }
}

/// `gpusan run OPTIONS --report-json … -- PROGRAM…` with the fake driver of `dir`.
pub fn gpusan_run(dir: &Path, options: &[&str], program: &[&str], env: &[(&str, &Path)]) -> Outcome {
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let json = dir.join(format!("report-{n}.json"));
    let _ = std::fs::remove_file(&json);
    let out = Command::new(env!("CARGO_BIN_EXE_gpusan"))
        .arg("run")
        .args(options)
        .arg("--report-json")
        .arg(&json)
        .arg("--")
        .args(program)
        .env("GPUSAN_INJECT_LIB", inject_lib())
        .env("LD_LIBRARY_PATH", dir)
        .envs(env.iter().map(|(k, v)| (*k, *v)))
        .output()
        .unwrap();
    let report: serde_json::Value =
        std::fs::read_to_string(&json).ok().and_then(|t| serde_json::from_str(&t).ok()).unwrap_or_default();
    if !report.is_null() {
        schema::assert_matches_schema(&report);
    }
    Outcome {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        report,
    }
}

/// tests/fake_cuda/pyext.c as `libpyext.so` in `dir` (whose fake driver it links against),
/// and the Python script `script` that drives it through ctypes written beside it; returns
/// the command line that runs the script with the library (add the scenario's arguments).
pub fn python_ext(dir: &Path, script_name: &str, script: &str) -> Vec<String> {
    let lib = dir.join("libpyext.so");
    run(Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .args([&lib, &sources().join("pyext.c")])
        .arg("-L")
        .arg(dir)
        .arg("-lcuda")
        .arg(format!("-Wl,-rpath,{}", dir.display())));
    let path = dir.join(script_name);
    std::fs::write(&path, script).unwrap();
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    vec![python, path.display().to_string(), lib.display().to_string()]
}

/// The prologue of a script [`python_ext`] runs: `ext`, the library (through
/// `ctypes.PyDLL`, which keeps the GIL held during calls, as C extensions do, unless the
/// scenario named in `sys.argv[2]` ends in `_nogil`: then `ctypes.CDLL`, which releases it),
/// and `set_label`, gpusan's `gpusan_set_label`.
pub const PYTHON_PROLOGUE: &str = r#"import ctypes, sys
from ctypes import c_uint64, c_int, c_char_p
scenario = sys.argv[2]
ext = (ctypes.CDLL if scenario.endswith("_nogil") else ctypes.PyDLL)(sys.argv[1])
ext.ext_alloc.restype = c_uint64
ext.ext_alloc.argtypes = [c_uint64]
ext.ext_free.argtypes = [c_uint64]
ext.ext_copy.argtypes = [c_uint64, c_uint64]
ext.ext_launch_store.argtypes = [c_uint64]
set_label = ctypes.CDLL(None).gpusan_set_label
set_label.argtypes = [c_char_p]
set_label.restype = c_int
"#;
