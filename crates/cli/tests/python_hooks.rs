//! The Python side of `gpusan run` (issue 15): the folder put first on the program's
//! PYTHONPATH, its `sitecustomize` (chains to the program's own, does nothing outside
//! gpusan), `--python-hooks off`, `--torch-allocator async`, and the hooks themselves with a
//! fake `torch` (its allocator's trace events fired through a fake libc10_cuda.so, the C++
//! shim built against stand-in headers shaped as PyTorch 2.11's) and a fake `cupy` (thread-
//! local memory hooks, a pinned pool that calls none). The pool-block interface of the
//! runtime is a recorder preloaded in its place (`fake_python/fake_pool.c`), python3 run
//! directly: every call the runtime would get is a line to compare.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fake_python")
}

fn gpusan() -> Command {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_gpusan"));
    let lib = bin.with_file_name("libgpusan_inject.so");
    assert!(lib.is_file(), "{} missing: run `cargo build -p gpusan-inject` first", lib.display());
    let mut c = Command::new(bin);
    c.env("GPUSAN_INJECT_LIB", lib).env_remove("PYTHONPATH").env_remove("PYTORCH_CUDA_ALLOC_CONF");
    c
}

fn must(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(out.status.success(), "{cmd:?}: {}{}", text(&out.stdout), text(&out.stderr));
    out
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The scratch folder: the fake packages (with their libraries built), the recorder, a
/// CUDA include folder, gpusan's cache, and the Python folder gpusan wrote there.
struct Setup {
    root: PathBuf,
    /// Holds the fake `torch` and `cupy`.
    fakes: PathBuf,
    cache: PathBuf,
    recorder: PathBuf,
    python: PathBuf,
}

fn setup() -> &'static Setup {
    static S: OnceLock<Setup> = OnceLock::new();
    S.get_or_init(|| {
        let root = std::env::temp_dir().join(format!("gpusan-python-hooks-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let fakes = root.join("fakes");
        std::fs::create_dir_all(fakes.join("torch/lib")).unwrap();
        must(Command::new("cp").arg("-r").arg(fixtures().join("torch")).arg(fixtures().join("cupy")).arg(&fakes));
        let src = fixtures();
        let include = fakes.join("torch/include");
        must(
            Command::new("c++")
                .args(["-std=c++17", "-shared", "-fPIC", "-I"])
                .arg(&include)
                .arg(src.join("lib/c10_cuda.cpp"))
                .arg("-o")
                .arg(fakes.join("torch/lib/libc10_cuda.so")),
        );
        must(
            Command::new("c++")
                .args(["-shared", "-fPIC"])
                .arg(src.join("lib/c10.cpp"))
                .arg("-o")
                .arg(fakes.join("torch/lib/libc10.so")),
        );
        let recorder = root.join("libfakepool.so");
        must(Command::new("cc").args(["-shared", "-fPIC"]).arg(src.join("fake_pool.c")).arg("-o").arg(&recorder));
        std::fs::create_dir_all(root.join("cuda/include")).unwrap();
        std::fs::write(root.join("cuda/include/cuda_runtime_api.h"), "").unwrap();
        let cache = root.join("cache");
        let out = must(gpusan().env("GPUSAN_CACHE_DIR", &cache).args([
            "run",
            "--",
            "python3",
            "-c",
            "import os; print(os.environ['PYTHONPATH'])",
        ]));
        let python = PathBuf::from(text(&out.stdout).trim());
        assert!(python.starts_with(cache.join("python")), "{python:?}");
        Setup { root, fakes, cache, recorder, python }
    })
}

/// python3 running `code` as `gpusan run` would start it (the folder first on PYTHONPATH,
/// gpusan's report folder set) unless `outside`, with the recorder preloaded unless
/// `no_recorder`; `env` on top. Its output and the recorder's lines.
struct Py<'a> {
    outside: bool,
    no_recorder: bool,
    env: Vec<(&'a str, String)>,
}

const UNDER_GPUSAN: Py<'static> = Py { outside: false, no_recorder: false, env: Vec::new() };

impl Py<'_> {
    fn run(&self, tag: &str, code: &str) -> (Output, Vec<String>) {
        let s = setup();
        let log = s.root.join(format!("{tag}.log"));
        let _ = std::fs::remove_file(&log);
        let mut c = Command::new("python3");
        c.arg("-c").arg(code);
        c.env("PYTHONPATH", format!("{}:{}", s.python.display(), s.fakes.display()))
            .env("GPUSAN_CACHE_DIR", &s.cache)
            .env("CUDA_HOME", s.root.join("cuda"))
            .env("FAKE_POOL_LOG", &log)
            .env_remove("GPUSAN_REPORT_DIR")
            .env_remove("PYTORCH_CUDA_ALLOC_CONF")
            .env_remove("CXX");
        if !self.outside {
            c.env("GPUSAN_REPORT_DIR", &s.root);
        }
        if !self.no_recorder {
            c.env("LD_PRELOAD", &s.recorder);
        }
        c.envs(self.env.iter().map(|(k, v)| (*k, v)));
        let out = must(&mut c);
        let lines = std::fs::read_to_string(&log).unwrap_or_default().lines().map(str::to_string).collect();
        (out, lines)
    }
}

/// Lines of gpusan's own on standard error.
fn said(out: &Output) -> Vec<String> {
    text(&out.stderr).lines().filter(|l| l.starts_with("gpusan:")).map(str::to_string).collect()
}

/// A fake-torch program: blocks already handed out before CUDA initialization (in the
/// snapshot: a live one, one requested free but still used on another stream, a free one,
/// a live one), CUDA initialized, then one of each event the allocator traces.
const TORCH_PROGRAM: &str = r#"
import ctypes, torch
U = ctypes.c_uint64
f = torch.cuda._fake
f.fake_torch_block(U(0x1000), 0, U(512), U(100), 1, 0)
f.fake_torch_block(U(0x1000), 0, U(1024), U(1000), 0, 1)
f.fake_torch_block(U(0x1000), 0, U(2048), U(0), 0, 0)
f.fake_torch_block(U(0x1000), 0, U(512), U(300), 1, 0)
torch.cuda._lazy_init()
print("trackers", f.fake_torch_trackers())
ALLOC, FREE_REQUESTED, FREE_COMPLETED, SEGMENT_ALLOC, SEGMENT_FREE = 0, 1, 2, 3, 4
# A tensor used on another stream: requested free, another tensor made, then its free
# completes.
for action, addr in ((SEGMENT_ALLOC, 0x200000), (ALLOC, 0x200000), (FREE_REQUESTED, 0x200000),
                     (ALLOC, 0x201000), (FREE_COMPLETED, 0x200000), (SEGMENT_FREE, 0x200000)):
    f.fake_torch_fire(action, U(addr), U(4000), U(0x9), 1)
print("ran on")
"#;

const TORCH_EXPECTED: [&str; 6] = [
    "alloc 0x1000 100 stream=0x5 device=0 source=1",
    "alloc 0x1200 1000 stream=0x5 device=0 source=1",
    "alloc 0x1e00 300 stream=0x5 device=0 source=1",
    "alloc 0x200000 4000 stream=0x9 device=1 source=1",
    "alloc 0x201000 4000 stream=0x9 device=1 source=1",
    "free 0x200000 stream=0x9 device=1 source=1",
];

fn shims(cache: &Path) -> Vec<PathBuf> {
    let dir = cache.join("torch-shim");
    let Ok(entries) = std::fs::read_dir(&dir) else { return Vec::new() };
    entries.map(|e| e.unwrap().path().join("libgpusan_torch_shim.so")).filter(|p| p.is_file()).collect()
}

#[test]
fn torch_blocks_reach_gpusan_with_their_requested_size_and_the_completed_free() {
    let (out, lines) = UNDER_GPUSAN.run("torch", TORCH_PROGRAM);
    assert!(text(&out.stdout).contains("trackers 1\nran on"), "{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(lines, TORCH_EXPECTED, "{}", text(&out.stderr));
    assert!(said(&out).is_empty(), "{:?}", said(&out));
}

/// The shim reports a block PyTorch was asked padding for with a `source` the runtime reads
/// as PyTorch's, with that padding (a flag of the shim's own once made every padded block an
/// unknown pool's, unguarded, on the H100).
#[test]
fn the_shims_padded_source_is_the_runtimes() {
    let program = r#"
import ctypes, torch
import gpusan.torch_hook as th
torch.cuda._lazy_init()
lib = ctypes.CDLL(th.shim_path(torch))
lib.gpusan_torch_shim_padded_source.restype = ctypes.c_uint32
print("padded_source", lib.gpusan_torch_shim_padded_source(ctypes.c_uint64(32)))
"#;
    let (out, _) = UNDER_GPUSAN.run("torch-padded", program);
    let line = text(&out.stdout).lines().find(|l| l.starts_with("padded_source ")).map(str::to_string);
    let code: u32 = line
        .as_deref()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{}{}", text(&out.stdout), text(&out.stderr)));
    use gpusan_runtime::pool_blocks::{padding_of, PoolSource};
    assert_eq!((PoolSource::from_code(code), padding_of(code)), (PoolSource::Torch, 32), "source {code:#x}");
}

#[test]
fn the_torch_shim_is_built_once_and_taken_from_the_cache() {
    let cache = setup().root.join("cache-once");
    let own = ("GPUSAN_CACHE_DIR", cache.display().to_string());
    // Two processes at once: one builds, the other waits for it.
    let both = std::thread::scope(|s| {
        let py = Py { env: vec![own.clone()], ..UNDER_GPUSAN };
        let other = s.spawn(|| Py { env: vec![own.clone()], ..UNDER_GPUSAN }.run("torch-first-b", TORCH_PROGRAM).1);
        [py.run("torch-first-a", TORCH_PROGRAM).1, other.join().unwrap()]
    });
    assert_eq!(both, [TORCH_EXPECTED, TORCH_EXPECTED]);
    let built = shims(&cache);
    assert_eq!(built.len(), 1, "{built:?}");
    let when = std::fs::metadata(&built[0]).unwrap().modified().unwrap();
    // No compiler now: the cached shim must be the one used.
    let py = Py { env: vec![("CXX", "/nonexistent/c++".into()), own.clone()], ..UNDER_GPUSAN };
    let (out, lines) = py.run("torch-cached", TORCH_PROGRAM);
    assert_eq!(lines, TORCH_EXPECTED, "{}", text(&out.stderr));
    assert_eq!(std::fs::metadata(&built[0]).unwrap().modified().unwrap(), when);
}

#[test]
fn without_a_compiler_tensor_bounds_are_off_in_one_line_and_the_program_runs_on() {
    let cache = setup().root.join("cache-no-compiler");
    let py = Py {
        env: vec![("CXX", "/nonexistent/c++".into()), ("GPUSAN_CACHE_DIR", cache.display().to_string())],
        ..UNDER_GPUSAN
    };
    let (out, lines) = py.run("torch-no-compiler", TORCH_PROGRAM);
    assert!(text(&out.stdout).contains("trackers 0\nran on"), "{}", text(&out.stdout));
    assert!(lines.is_empty(), "{lines:?}");
    let said = said(&out);
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(said[0].starts_with("gpusan: tensor bounds are off:") && said[0].contains("/nonexistent/c++"), "{said:?}");
}

#[test]
fn without_the_runtimes_pool_interface_one_line_says_so_and_nothing_is_built() {
    let cache = setup().root.join("cache-no-pool");
    let py = Py { no_recorder: true, env: vec![("GPUSAN_CACHE_DIR", cache.display().to_string())], ..UNDER_GPUSAN };
    let (out, _) = py.run("torch-no-pool", TORCH_PROGRAM);
    let said = said(&out);
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(said[0].contains("tensor bounds are off") && said[0].contains("gpusan_pool_block_alloc"), "{said:?}");
    assert!(!cache.join("torch-shim").exists());
}

#[test]
fn the_stream_ordered_allocator_needs_no_shim() {
    let cache = setup().root.join("cache-async");
    let py = Py {
        env: vec![
            ("PYTORCH_CUDA_ALLOC_CONF", "backend:cudaMallocAsync".into()),
            ("GPUSAN_CACHE_DIR", cache.display().to_string()),
        ],
        ..UNDER_GPUSAN
    };
    let (out, lines) = py.run("torch-async", TORCH_PROGRAM);
    assert!(text(&out.stdout).contains("trackers 0"), "{}", text(&out.stdout));
    assert!(lines.is_empty() && said(&out).is_empty(), "{lines:?} {:?}", said(&out));
    assert!(!cache.join("torch-shim").exists());
}

#[test]
fn outside_gpusan_the_folder_starts_nothing() {
    let py = Py { outside: true, ..UNDER_GPUSAN };
    let code = "import sys, torch, cupy\n\
                print('loaded', 'gpusan' in sys.modules, [type(f).__name__ for f in sys.meta_path if type(f).__name__ == '_Finder'])\n\
                torch.cuda._lazy_init(); print('trackers', torch.cuda._fake.fake_torch_trackers())";
    let (out, lines) = py.run("outside", code);
    assert!(text(&out.stdout).contains("loaded False []\ntrackers 0"), "{}", text(&out.stdout));
    assert!(lines.is_empty() && said(&out).is_empty());
}

/// A fake-cupy program: device-pool blocks on the importing thread and on a thread started
/// after, a block handed out again, and a pinned block.
const CUPY_PROGRAM: &str = r#"
import gc, threading, cupy
pool = cupy.cuda.MemoryPool()
a = pool.malloc(1000)
a.free()
def work():
    b = pool.malloc(3000)
    b.free()
t = threading.Thread(target=work)
t.start(); t.join()
p = cupy.cuda.alloc_pinned_memory(100)
del p
gc.collect()
print("pinned freed", len(cupy.get_default_pinned_memory_pool().freed))
"#;

#[test]
fn cupy_blocks_are_reported_on_every_thread_with_the_requested_size() {
    let (out, lines) = UNDER_GPUSAN.run("cupy", CUPY_PROGRAM);
    assert!(text(&out.stdout).contains("pinned freed 1"), "{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(
        lines,
        [
            "alloc 0x10000 1000 stream=0x77 device=0 source=2",
            "free 0x10000 stream=0x77 device=0 source=2",
            "alloc 0x10000 3000 stream=0x77 device=0 source=2",
            "free 0x10000 stream=0x77 device=0 source=2",
            "alloc 0x900000 100 stream=0 device=0 source=3",
            "free 0x900000 stream=0 device=0 source=3",
        ],
        "{}",
        text(&out.stderr)
    );
}

/// A folder with a `sitecustomize` of the program's own.
fn their_site(tag: &str) -> PathBuf {
    let dir = setup().root.join(format!("their-site-{tag}"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("sitecustomize.py"), "print('their sitecustomize ran')\nMARK = 42\n").unwrap();
    dir
}

const SITE_PROBE: &str = "import sys, sitecustomize\n\
    print('mark', getattr(sitecustomize, 'MARK', None), 'gpusan', 'gpusan' in sys.modules)";

#[test]
fn the_sitecustomize_chains_to_the_programs_own_under_gpusan() {
    let s = setup();
    let theirs = their_site("under");
    let out = must(
        gpusan()
            .env("GPUSAN_CACHE_DIR", &s.cache)
            .env("PYTHONPATH", &theirs)
            .args(["run", "--", "python3", "-c", SITE_PROBE]),
    );
    assert!(
        text(&out.stdout).contains("their sitecustomize ran\nmark 42 gpusan True"),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}

#[test]
fn outside_gpusan_the_sitecustomize_only_chains() {
    let theirs = their_site("outside");
    let py = Py {
        outside: true,
        env: vec![("PYTHONPATH", format!("{}:{}", setup().python.display(), theirs.display()))],
        ..UNDER_GPUSAN
    };
    let (out, _) = py.run("site-outside", SITE_PROBE);
    assert!(
        text(&out.stdout).contains("their sitecustomize ran\nmark 42 gpusan False"),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}

#[test]
fn the_programs_pythonpath_entries_come_after_gpusans() {
    let s = setup();
    let probe = "import os; print(os.environ['PYTHONPATH'])";
    let out = must(
        gpusan()
            .env("GPUSAN_CACHE_DIR", &s.cache)
            .env("PYTHONPATH", "/their/a:/their/b")
            .args(["run", "--", "python3", "-c", probe]),
    );
    assert_eq!(text(&out.stdout).trim(), format!("{}:/their/a:/their/b", s.python.display()));
    let out = must(gpusan().env("GPUSAN_CACHE_DIR", &s.cache).env("PYTHONPATH", "/their/a").args([
        "run",
        "--python-hooks",
        "off",
        "--",
        "python3",
        "-c",
        probe,
    ]));
    assert_eq!(text(&out.stdout).trim(), "/their/a");
}

#[test]
fn torch_allocator_async_merges_the_backend_and_says_what_it_changes() {
    let s = setup();
    let json = s.root.join("async-report.json");
    let probe = "import os; print(os.environ['PYTORCH_CUDA_ALLOC_CONF'])";
    let out = must(
        gpusan()
            .env("GPUSAN_CACHE_DIR", &s.cache)
            .env("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True,backend:native")
            .args(["run", "--torch-allocator", "async", "--report-json"])
            .arg(&json)
            .args(["--", "python3", "-c", probe]),
    );
    assert_eq!(text(&out.stdout).trim(), "expandable_segments:True,backend:cudaMallocAsync");
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let notes = report["notes"].to_string();
    assert!(notes.contains("--torch-allocator async") && notes.contains("cudaMallocAsync"), "{notes}");
}

#[test]
fn the_python_package_has_gpusans_version() {
    let init =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../python/gpusan/__init__.py")).unwrap();
    assert!(init.contains(&format!("__version__ = \"{}\"", env!("CARGO_PKG_VERSION"))), "python/gpusan/__init__.py");
}
