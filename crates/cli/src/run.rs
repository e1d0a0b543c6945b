//! `gpusan run [options] -- PROGRAM [ARGS…]`: starts the program with the runtime
//! injected, waits for it, and reports what the runtime found, in the style users know
//! from compute-sanitizer.
//!
//! The runtime (libgpusan_inject.so, next to this binary or at `$GPUSAN_INJECT_LIB`)
//! reads its options from `GPUSAN_*` variables and writes its findings into a private
//! folder, one file per process (programs start others): the final document at exit, and
//! each new finding at once to `<file>.events`, so a process that crashes still leaves its
//! findings behind. The report merges them all.
//!
//! Calls cudart refuses itself (a 2-D copy wider than its pitch, a symbol copy past the
//! variable) never reach the driver, so the preloaded hooks cannot see them; the Compute
//! Sanitizer API's runtime-API callbacks can. When `libsanitizer-public.so` is found, the
//! same library is also named in `CUDA_INJECTION64_PATH` (the driver then calls its
//! `InitializeInjection`); when not, the report says those errors were not observed.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use gpusan_abi::env::{self, INJECT_LIB, REAL_PTXAS, SANITIZER_LIB as SANITIZER_LIB_VAR};
use gpusan_runtime::report::{Collector, CollectorConfig, Document, EventLine, TextConfig};

use crate::cs_compat::{self, CsArgs, TargetProcesses};
use crate::python::{self, PythonHooks, TorchAllocator};
use crate::supervise::{self, Cut};
use crate::{junit, progress, sarif, stream};

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq)]
pub enum Mode {
    /// Host API checks: every allocation, free, copy and set judged against the
    /// allocation registry. Kernels run unchanged.
    Api,
    /// Host API checks, and every kernel with PTX replaced by an instrumented build that
    /// counts its executed global and generic memory instructions (proves substitution).
    Count,
    /// Host API checks, and every kernel with PTX checked: each global (and generic-global)
    /// access against the bounds and liveness of the allocation its pointer came from,
    /// shared and local accesses against the variable they address. Single-root accesses;
    /// the others are counted as unchecked.
    Check,
    /// Host API checks, and canaries: the bytes past the end of every device allocation
    /// and pool block hold a keyed hash that gpusan's own kernel scans on a low-priority
    /// stream every `--canary-interval-ms`; an overwritten one is reported
    /// (`canary_overwrite`). Kernels run unchanged, machine code included: always-on
    /// overflow detection at production cost.
    Canary,
    /// A tenant of the `gpusan serve` manager at `--server`: the program's driver calls go
    /// to the manager, which runs them in the tenant's own memory partition and fences every
    /// kernel into it. Driver-API programs only so far (allocations, copies, PTX modules,
    /// launches, synchronizations).
    Fence,
}

impl Mode {
    /// The mode as the injected library knows it, by the same name (a test keeps them so).
    fn abi(self) -> gpusan_abi::Mode {
        match self {
            Mode::Api => gpusan_abi::Mode::Api,
            Mode::Count => gpusan_abi::Mode::Count,
            Mode::Check => gpusan_abi::Mode::Check,
            Mode::Canary => gpusan_abi::Mode::Canary,
            Mode::Fence => gpusan_abi::Mode::Fence,
        }
    }
}

/// What a kernel does at an error the checker finds (`--mode check`).
#[derive(Clone, Copy, Debug, ValueEnum, PartialEq)]
pub enum CheckReaction {
    /// Record the error and skip the faulting access; the kernel goes on.
    Report,
    /// Record the error, then trap: the kernel stops at its first error (under cuda-gdb,
    /// the debugger stops there). The trap is a launch failure for the program.
    Abort,
}

impl CheckReaction {
    /// The reaction as the pass knows it, by the same name (a test keeps them so).
    fn abi(self) -> gpusan_abi::Reaction {
        match self {
            CheckReaction::Report => gpusan_abi::Reaction::Report,
            CheckReaction::Abort => gpusan_abi::Reaction::Abort,
        }
    }
}

/// How `--mode check` bounds accesses to a function's stack frame.
#[derive(Clone, Copy, Debug, ValueEnum, PartialEq)]
pub enum LocalBounds {
    /// Each local array or struct by itself: an index past one array that lands in its
    /// neighbour is an error.
    Object,
    /// The frame as a whole: should the objects gpusan reads from the PTX be wrong for a
    /// program (a finding in a local array that is no bug), this goes back to the frame.
    Frame,
}

impl LocalBounds {
    pub(crate) fn abi(self) -> gpusan_abi::LocalBounds {
        match self {
            LocalBounds::Object => gpusan_abi::LocalBounds::Object,
            LocalBounds::Frame => gpusan_abi::LocalBounds::Frame,
        }
    }
}

/// How `--mode check` reaches kernels.
#[derive(Clone, Copy, Debug, ValueEnum, PartialEq)]
pub enum Route {
    /// PTX instrumented where a module has PTX gpusan can use, machine code patched through
    /// the Compute Sanitizer API elsewhere.
    Auto,
    /// PTX only: machine code runs unchecked.
    Ptx,
    /// Machine code of every module patched; no PTX instrumented.
    Binary,
}

impl Route {
    /// The route as the injected library knows it, by the same name (a test keeps them so).
    fn abi(self) -> gpusan_abi::Route {
        match self {
            Route::Auto => gpusan_abi::Route::Auto,
            Route::Ptx => gpusan_abi::Route::Ptx,
            Route::Binary => gpusan_abi::Route::Binary,
        }
    }
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq)]
pub enum LeakCheck {
    Full,
    /// Also `no`, compute-sanitizer's word.
    #[value(alias = "no")]
    None,
}

#[derive(Args)]
pub struct RunArgs {
    /// What gpusan checks [default: check; compute-sanitizer's `--tool memcheck` is check].
    #[arg(long, value_enum)]
    mode: Option<Mode>,
    /// How `--mode check` reaches kernels: instrumented PTX, patched machine code (the
    /// Compute Sanitizer API, which needs its library), or PTX where usable and machine
    /// code elsewhere.
    #[arg(long, value_enum, default_value = "auto")]
    route: Route,
    /// Exit with this code when any error was found (else the program's own code).
    #[arg(long, value_name = "N")]
    error_exitcode: Option<i32>,
    /// Write the report as JSON to FILE (its schema: `gpusan schema`).
    #[arg(long, value_name = "FILE")]
    report_json: Option<PathBuf>,
    /// Write the findings as SARIF 2.1.0 to FILE, for code-scanning UIs.
    #[arg(long, value_name = "FILE")]
    report_sarif: Option<PathBuf>,
    /// Write the run as JUnit XML to FILE, for CI: a test case per kernel launched, and one
    /// for the host side.
    #[arg(long, value_name = "FILE")]
    report_junit: Option<PathBuf>,
    /// Report device allocations never freed.
    #[arg(long, value_enum, default_value = "none")]
    leak_check: LeakCheck,
    /// What an instrumented kernel does at an error (`--mode check`).
    #[arg(long, value_enum, default_value = "report")]
    check_reaction: CheckReaction,
    /// How accesses to local arrays are bounded (`--mode check`): each array by itself, or
    /// the function's whole stack frame.
    #[arg(long, value_enum, default_value = "object")]
    local_bounds: LocalBounds,
    /// Measurement build (`--mode check`): kernels also count the checks a naive checker
    /// would make and those that ran; the report gets `check_counts` (slower kernels, same
    /// verdicts; modules are instrumented at every load, not taken from the cache).
    #[arg(long)]
    count_checks: bool,
    /// Write the text report to FILE instead of standard error; `%p` in the name is gpusan's
    /// process id, `%q{VAR}` the variable VAR, `%%` a `%` (as compute-sanitizer's).
    #[arg(long, value_name = "FILE")]
    log_file: Option<String>,
    /// Stop the program after SECONDS (SIGTERM, then SIGKILL 5 s later), report what its
    /// processes left, and exit with 124.
    #[arg(long, value_name = "SECONDS")]
    timeout: Option<u64>,
    /// Make every kernel launched unchecked an error (machine code only, PTX the pass
    /// refused, …): all-or-nothing runs fail unless every launch was checked.
    #[arg(long)]
    require_checked: bool,
    /// Freed bytes held back from reuse so use-after-free stays detectable.
    #[arg(long, value_name = "BYTES", default_value_t = 256 << 20)]
    quarantine_bytes: u64,
    /// Bytes padded after each device allocation where `--mode check` may patch machine
    /// code (route auto or binary), so an overflow that would reach a neighbouring
    /// allocation is caught by the binary route; 0: none. Registered at the size asked;
    /// large allocations only where it costs at most an eighth more memory.
    /// (`--padding`, compute-sanitizer's name, is the same option.)
    /// In `--mode canary` the same padding holds each allocation's tail canary, and
    /// PyTorch's caching allocator is asked for it after every tensor (its memory
    /// statistics count it). [default: 256; 32 in `--mode canary`]
    #[arg(long, alias = "padding", value_name = "BYTES")]
    redzone: Option<u64>,
    /// `--mode canary`: milliseconds between two scans of the canaries, from 0.05 to 60000,
    /// fractions included (`0.1`: every 100 µs; a scan is launched only once the previous
    /// one finished). [default: 4]
    #[arg(long = "canary-interval-ms", value_name = "MS", default_value = "4", hide_default_value = true,
          allow_negative_numbers = true, value_parser = gpusan_abi::env::canary_interval_us)]
    canary_interval_us: u64,
    /// Write the run's trace to FILE (`docs/trace-format.md`; `gpusan sim` reads it): every
    /// allocation, pool block, free and launch, per process (another process of the run
    /// writes FILE.PID); with `--mode check --route binary` (`gpusan trace`) also each warp's
    /// accesses, the run then serialized (each kernel waited for and its records drained).
    #[arg(long, value_name = "FILE")]
    pub trace: Option<std::path::PathBuf>,
    /// With `--trace` and the binary route: record the accesses of each kernel's first FIRST
    /// launches, then of one in EVERY (0: none more), so that a long run is traced in part
    /// and the launches not taken run unserialized. Every launch by default.
    #[arg(long, value_name = "FIRST:EVERY", value_parser = gpusan_abi::env::LaunchSample::parse, requires = "trace")]
    pub trace_sample: Option<gpusan_abi::env::LaunchSample>,
    /// `--mode fence`: the socket of the `gpusan serve` manager the program is a tenant of.
    #[arg(long, value_name = "SOCKET")]
    server: Option<std::path::PathBuf>,
    /// `--mode fence`: the size of the tenant's memory partition, as a power of two (30:
    /// 1 GiB), from 21 to 40.
    #[arg(long, value_name = "LOG2", default_value_t = 30, value_parser = clap::value_parser!(u32).range(21..=40))]
    fence_memory_log2: u32,
    /// Pool blocks (each tensor of PyTorch's caching allocator, CuPy's pools, NVTX regions)
    /// record the host stacks of their allocation and free, as device allocations do. Off
    /// by default: unwinding at every tensor allocation cost a PyTorch training step about
    /// 30% on the H100; reports then name the block and its segment without those stacks.
    #[arg(long)]
    pool_sites: bool,
    /// The access kinds beyond global memory the binary route checks (`--mode check`): `all`,
    /// `none`, or a list of `shared` (accesses past the block's shared window), `async`
    /// (`cp.async`), `bulk` (bulk copies' global ranges), `heap` (device-side double and
    /// invalid frees). Each costs a call at every instruction of its kind. The default is
    /// `heap`: on the H100 `shared` made tiled GEMMs 10x slower again and broke cuBLASLt's
    /// GEMMs (a known bug of that patch), and `async`/`bulk` cost cuBLAS about 11x.
    #[arg(long, value_name = "LIST", default_value = "heap")]
    binary_kinds: String,
    /// Python programs: gpusan's folder first on PYTHONPATH, whose hooks make PyTorch's
    /// caching allocator and CuPy's pools report each block (a read past a tensor inside its
    /// allocator's segment is then an error); `off` leaves PYTHONPATH alone.
    #[arg(long, value_enum, default_value = "on")]
    python_hooks: PythonHooks,
    /// PyTorch's allocator: the program's own (the caching one, followed by the hooks), or
    /// `async`: `backend:cudaMallocAsync` merged into PYTORCH_CUDA_ALLOC_CONF, each tensor a
    /// stream-ordered allocation (no C++ shim is built; PyTorch's speed and memory differ).
    #[arg(long, value_enum, default_value = "caching")]
    torch_allocator: TorchAllocator,
    /// gpusan's own view in the text report too: where in the instrumented PTX a kernel's
    /// finding is, gpusan's internal counters, and every host frame (the CUDA runtime's are
    /// otherwise folded into one line). The JSON report always has all of it.
    #[arg(long)]
    verbose: bool,
    #[command(flatten)]
    cs: CsArgs,
    /// The program and its arguments (after `--`, or as the first argument that is no
    /// option of gpusan's, as compute-sanitizer takes them).
    #[arg(trailing_var_arg = true, required = true, value_name = "PROGRAM")]
    command: Vec<OsString>,
}

/// Where the injected library is: `$GPUSAN_INJECT_LIB`, or next to this binary.
fn inject_library() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os(INJECT_LIB) {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().context("locating the gpusan binary")?;
    let lib = exe.with_file_name("libgpusan_inject.so");
    if !lib.is_file() {
        bail!(
            "{} not found: build it with `cargo build --release -p gpusan-inject` or set {INJECT_LIB}",
            lib.display()
        );
    }
    Ok(lib)
}

const SANITIZER_LIB: &str = "libsanitizer-public.so";

/// Where the Compute Sanitizer API library is: `$GPUSAN_SANITIZER_LIB`,
/// `$CUDA_HOME/compute-sanitizer`, `/usr/local/cuda/compute-sanitizer`, or next to a
/// `compute-sanitizer` on `PATH` (through its symlinks).
pub fn sanitizer_library(env: &dyn Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    if let Some(p) = env(SANITIZER_LIB_VAR).filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p)).filter(|p| p.is_file());
    }
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(home) = env("CUDA_HOME").filter(|h| !h.is_empty()) {
        dirs.push(PathBuf::from(home).join("compute-sanitizer"));
    }
    dirs.push(PathBuf::from("/usr/local/cuda/compute-sanitizer"));
    for dir in env("PATH").iter().flat_map(std::env::split_paths) {
        let tool = dir.join("compute-sanitizer");
        if tool.is_file() {
            dirs.push(dir.clone());
            dirs.push(dir.join("../compute-sanitizer"));
            if let Some(parent) = tool.canonicalize().ok().and_then(|t| t.parent().map(Path::to_path_buf)) {
                dirs.push(parent);
            }
        }
    }
    dirs.into_iter().map(|d| d.join(SANITIZER_LIB)).find(|p| p.is_file())
}

/// `--mode canary` starts no Compute Sanitizer API: its runtime-API callbacks would cost
/// every runtime call of the program, and canary mode is meant to stay on in production.
const CANARY_NO_SANITIZER: &str =
    "runtime API errors were not observed (canary mode starts no Compute Sanitizer API: its callbacks cost every \
     runtime call)";

/// How runtime-API errors will be observed, as the environment of the program.
pub enum RuntimeApi {
    /// Set `CUDA_INJECTION64_PATH` to the injected library, using this sanitizer library.
    Observed(PathBuf),
    /// Not observed, for the reason given (the report's note).
    NotObserved(String),
}

pub fn runtime_api(lib: &Path, env: &dyn Fn(&str) -> Option<OsString>) -> RuntimeApi {
    let Some(sanitizer) = sanitizer_library(env) else {
        return RuntimeApi::NotObserved(format!(
            "runtime API errors were not observed (no {SANITIZER_LIB} found: set {SANITIZER_LIB_VAR} or CUDA_HOME)"
        ));
    };
    match env("CUDA_INJECTION64_PATH").filter(|p| !p.is_empty()) {
        Some(theirs) if Path::new(&theirs) != lib => RuntimeApi::NotObserved(format!(
            "runtime API errors were not observed (CUDA_INJECTION64_PATH={} is kept as the user set it)",
            Path::new(&theirs).display()
        )),
        _ => RuntimeApi::Observed(sanitizer),
    }
}

/// A private folder for the runtime's files (0700, an unpredictable name in the temporary
/// folder: a name made of gpusan's pid could be taken first by anyone), removed when
/// dropped.
struct Scratch(tempfile::TempDir);

impl Scratch {
    fn new() -> Result<Scratch> {
        use std::os::unix::fs::PermissionsExt;
        let private = std::fs::Permissions::from_mode(0o700);
        let dir = tempfile::Builder::new().prefix("gpusan-").permissions(private).tempdir();
        Ok(Scratch(dir.with_context(|| format!("cannot create a folder in {}", std::env::temp_dir().display()))?))
    }

    fn path(&self) -> &Path {
        self.0.path()
    }
}

/// What one process left: its final document, or, if it died first (or its document is
/// damaged), the findings its events file holds. Damage found on the way is added to
/// `damage` (which file, why), to be reported: it must not cost the other processes'
/// findings.
fn collect_process(report: &Path, mode: &str, damage: &mut Vec<String>) -> Document {
    let name = |p: &Path| p.file_name().unwrap_or_default().to_string_lossy().into_owned();
    match std::fs::read(report) {
        Ok(bytes) => match std::str::from_utf8(&bytes)
            .map_err(|e| e.to_string())
            .and_then(|t| Document::from_json(t).map_err(|e| e.to_string()))
        {
            Ok(doc) => return doc,
            Err(why) => {
                damage.push(format!("{} is damaged ({why}): its findings are those of its events file", name(report)))
            }
        },
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            damage.push(format!("{} could not be read ({e}): its findings are those of its events file", name(report)))
        }
        Err(_) => {}
    }
    let mut events = report.as_os_str().to_owned();
    events.push(".events");
    let events = PathBuf::from(events);
    let mut collector = Collector::new(CollectorConfig::default());
    let mut process = None;
    if let Ok(bytes) = std::fs::read(&events) {
        let text = String::from_utf8_lossy(&bytes);
        // A last line cut short by a crash is expected; any other unreadable line is damage.
        let complete = text.ends_with('\n');
        let lines: Vec<&str> = text.lines().collect();
        let mut unreadable = 0;
        for (i, line) in lines.iter().enumerate() {
            match serde_json::from_str::<EventLine>(line) {
                Ok(l) => {
                    process = process.or(l.process);
                    collector.push(l.report);
                }
                Err(_) if !complete && i + 1 == lines.len() => {}
                Err(_) => unreadable += 1,
            }
        }
        if unreadable > 0 {
            damage.push(format!("{} has {unreadable} unreadable line(s), skipped", name(&events)));
        }
    }
    let mut doc = collector.finish(mode, Vec::new(), |_| Vec::new());
    for e in &mut doc.errors {
        e.process = process.clone();
    }
    doc
}

/// The findings of every process of the run (each writes `report-<pid>.json[.events]`),
/// with a note for each damaged file.
pub fn collect(dir: &Path, mode: &str) -> Result<Document> {
    let mut doc = Collector::new(CollectorConfig::default()).finish(mode, Vec::new(), |_| Vec::new());
    // Only the processes' documents count: none means no CUDA activity was seen.
    doc.cuda_processes = 0;
    let mut reports: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter_map(|p| {
            let name = p.file_name()?.to_str()?;
            let base = name.strip_suffix(".events").unwrap_or(name);
            (base.starts_with("report-") && base.ends_with(".json")).then(|| p.with_file_name(base))
        })
        .collect();
    reports.sort();
    reports.dedup();
    let mut damage = Vec::new();
    for r in reports {
        doc.merge(collect_process(&r, mode, &mut damage));
    }
    doc.notes.extend(damage.into_iter().map(|d| format!("damaged report: {d}")));
    Ok(doc)
}

/// Triton assembles its kernels with `$TRITON_PTXAS_PATH` and loads only the cubin, so
/// runtime substitution never sees their PTX: in check mode Triton gets the `ptxas`
/// stand-in (a symlink named ptxas to this binary in the run's folder) unless the user
/// chose a ptxas. Without NVIDIA's ptxas to hand on to, the stand-in could not answer
/// Triton's `--version`, so `TRITON_PTXAS_PATH` stays unset: a process that loads Triton
/// then says its kernels were not checked (the injected library's note; most programs
/// never load Triton, and a warning for all of them would be noise).
fn triton_ptxas(cmd: &mut Command, scratch: &Path) {
    if std::env::var_os("TRITON_PTXAS_PATH").is_some() {
        return;
    }
    let (Ok(me), Ok(real)) = (std::env::current_exe(), crate::ptxas::real_ptxas()) else {
        return;
    };
    let bin = scratch.join("bin");
    let link = bin.join("ptxas");
    if std::fs::create_dir_all(&bin).and_then(|()| std::os::unix::fs::symlink(&me, &link)).is_ok() {
        cmd.env("TRITON_PTXAS_PATH", &link).env(REAL_PTXAS, real);
    }
}

/// How the text report shows findings: compute-sanitizer's options, and `--verbose`.
fn presentation(a: &RunArgs) -> cs_compat::Presentation {
    cs_compat::Presentation { text: TextConfig { verbose: a.verbose, ..TextConfig::default() }, ..a.cs.presentation() }
}

/// The Python side of the run (`--python-hooks`, `--torch-allocator`): its notes for the
/// report.
fn python_env(cmd: &mut Command, a: &RunArgs) -> Vec<String> {
    let mut notes = Vec::new();
    if a.python_hooks == PythonHooks::On {
        match python::folder() {
            Ok(dir) => {
                cmd.env("PYTHONPATH", python::pythonpath(&dir, std::env::var_os("PYTHONPATH").as_deref()));
            }
            Err(why) => eprintln!("gpusan: warning: the Python hooks are off: {why}"),
        }
    }
    if a.torch_allocator == TorchAllocator::Async {
        for (i, var) in python::ALLOC_CONF_VARS.iter().enumerate() {
            let theirs = std::env::var(var).ok();
            // The CUDA one always; the generic one only where the program set it.
            if i == 0 || theirs.as_deref().is_some_and(|t| !t.is_empty()) {
                let value = python::async_alloc_conf(theirs.as_deref());
                if i == 0 {
                    notes.push(python::async_note(&value));
                }
                cmd.env(var, value);
            }
        }
    }
    notes
}

/// Where the text report goes: `--log-file` (made empty first, unless `append`), or
/// standard error.
fn text_sink(log_file: Option<&Path>, append: bool) -> Result<stream::Sink> {
    let Some(p) = log_file else { return Ok(Box::new(std::io::stderr())) };
    let file = std::fs::OpenOptions::new().create(true).write(true).append(append).truncate(!append).open(p);
    Ok(Box::new(file.with_context(|| format!("opening {}", p.display()))?))
}

/// The machine-readable reports asked for: JSON, SARIF, JUnit.
fn write_reports(a: &RunArgs, doc: &Document) -> Result<()> {
    let write = |p: &Path, text: String| std::fs::write(p, text).with_context(|| format!("writing {}", p.display()));
    if let Some(p) = &a.report_json {
        write(p, doc.to_json())?;
    }
    if let Some(p) = &a.report_sarif {
        write(p, serde_json::to_string_pretty(&sarif::to_sarif(doc))?)?;
    }
    if let Some(p) = &a.report_junit {
        let program = Path::new(&a.command[0]).file_name().unwrap_or(a.command[0].as_os_str());
        let config = junit::JunitConfig { suite: format!("gpusan: {}", program.to_string_lossy()) };
        write(p, junit::to_junit(doc, &config))?;
    }
    Ok(())
}

/// The mode the run asks for (check by default), refused beside options it cannot serve.
fn run_mode(a: &RunArgs) -> Result<Mode> {
    let memcheck = a.cs.validate().map_err(anyhow::Error::msg)?;
    if let (true, Some(m)) = (memcheck, a.mode.filter(|m| *m != Mode::Check)) {
        bail!("--tool memcheck is --mode check; --mode {} asks for less", m.abi().name());
    }
    let run_mode = a.mode.unwrap_or(Mode::Check);
    if a.count_checks && run_mode != Mode::Check {
        bail!("--count-checks counts the checks of `--mode check`");
    }
    if a.require_checked && run_mode == Mode::Canary {
        bail!("--require-checked: `--mode canary` checks no kernel (it guards allocations); use --mode check");
    }
    Ok(run_mode)
}

/// `--redzone`, or its default: the padding that holds canary mode's tail canaries is
/// smaller than the binary route's red zones.
/// Microseconds as the decimal milliseconds [`env::CANARY_INTERVAL_MS`] carries (exact:
/// `env::canary_interval_us` reads it back to the same microseconds).
fn interval_ms(us: u64) -> String {
    format!("{}.{:03}", us / 1_000, us % 1_000)
}

fn redzone(a: &RunArgs, mode: gpusan_abi::Mode) -> u64 {
    let default = if mode == gpusan_abi::Mode::Canary { env::CANARY_PAD_DEFAULT } else { env::REDZONE_DEFAULT };
    a.redzone.unwrap_or(default)
}

pub fn run(a: RunArgs) -> Result<i32> {
    let run_mode = run_mode(&a)?;
    let selection = a.cs.selection().map_err(anyhow::Error::msg)?;
    let env = |k: &str| std::env::var_os(k);
    let log_file = match &a.log_file {
        Some(p) => Some(cs_compat::log_file_name(p, std::process::id(), &env).map_err(anyhow::Error::msg)?),
        None => None,
    };
    let Some(binary_kinds) = gpusan_abi::binary::Kinds::parse(&a.binary_kinds) else {
        bail!(
            "--binary-kinds: `{}` is not all, none or a list of {}",
            a.binary_kinds,
            gpusan_abi::binary::Kinds::NAMES.join(", ")
        );
    };
    let lib = inject_library()?;
    let scratch = Scratch::new()?;

    let mode = run_mode.abi();
    let (leak_check, count_checks) = (
        if a.leak_check == LeakCheck::Full { env::LEAK_CHECK_FULL } else { env::LEAK_CHECK_NONE },
        if a.count_checks { env::CHECK_COUNT_ON } else { env::CHECK_COUNT_OFF },
    );
    let mut preload = OsString::from(&lib);
    if let Some(old) = std::env::var_os("LD_PRELOAD").filter(|o| !o.is_empty()) {
        preload.push(":");
        preload.push(old);
    }
    match (mode == gpusan_abi::Mode::Fence, &a.server) {
        (true, None) => bail!("--mode fence needs --server SOCKET: the `gpusan serve` manager to be a tenant of"),
        (false, Some(_)) => bail!("--server is for --mode fence"),
        _ => {}
    }
    let mut cmd = Command::new(&a.command[0]);
    if let Some(server) = &a.server {
        cmd.env(env::SERVER, std::path::absolute(server)?).env(env::FENCE_MEMORY_LOG2, a.fence_memory_log2.to_string());
    }
    cmd.args(&a.command[1..])
        .env("LD_PRELOAD", preload)
        .env(env::MODE, mode.name())
        .env(env::ROUTE, a.route.abi().name())
        .env(env::REPORT_DIR, scratch.path())
        .env(env::LEAK_CHECK, leak_check)
        .env(env::CHECK_REACTION, a.check_reaction.abi().name())
        .env(env::LOCAL_BOUNDS, a.local_bounds.abi().name())
        .env(env::QUARANTINE_BYTES, a.quarantine_bytes.to_string())
        .env(env::REDZONE, redzone(&a, mode).to_string())
        .env(env::CANARY_INTERVAL_MS, interval_ms(a.canary_interval_us))
        .env(env::POOL_SITES, if a.pool_sites { env::POOL_SITES_ON } else { "0" })
        .env(env::BINARY_KINDS, binary_kinds.name())
        .env(env::CHECK_COUNT, count_checks);
    if let Some(trace) = &a.trace {
        // A trace of an earlier run at the same path is replaced, not appended to.
        let _ = std::fs::remove_file(trace);
        cmd.env(env::TRACE_OUT, std::path::absolute(trace)?);
        if let Some(s) = a.trace_sample {
            cmd.env(env::TRACE_SAMPLE, format!("{}:{}", s.first, s.every));
        }
    }
    if !selection.is_all() {
        cmd.env(env::KERNEL_SELECTION, selection.to_env());
    }
    if a.cs.target_processes == TargetProcesses::ApplicationOnly {
        cmd.env(env::ONLY_CHILD_OF, std::process::id().to_string());
    }
    let runtime_api = if mode == gpusan_abi::Mode::Canary {
        RuntimeApi::NotObserved(CANARY_NO_SANITIZER.into())
    } else {
        runtime_api(&lib, &env)
    };
    let note = match runtime_api {
        RuntimeApi::Observed(sanitizer) => {
            cmd.env("CUDA_INJECTION64_PATH", &lib).env(SANITIZER_LIB_VAR, sanitizer);
            None
        }
        RuntimeApi::NotObserved(why) => {
            if env("CUDA_INJECTION64_PATH").is_some_and(|p| !p.is_empty()) {
                eprintln!("gpusan: warning: {why}");
            }
            Some(why)
        }
    };
    if mode == gpusan_abi::Mode::Check {
        triton_ptxas(&mut cmd, scratch.path());
    }
    let python_notes = python_env(&mut cmd, &a);
    // Opened before the program starts, so findings reach it while the program runs.
    let sink = text_sink(log_file.as_deref(), false)?;
    let progress = progress::wanted();
    if progress {
        cmd.env(env::PROGRESS, "1");
    }
    nvtx_injection(&mut cmd, &lib, env("NVTX_INJECTION64_PATH"));
    let handlers = supervise::install();
    let mut child = cmd.spawn().with_context(|| format!("starting {}", a.command[0].to_string_lossy()))?;
    let header = Document::header_line(gpusan_runtime::report::VERSION, mode.name());
    let follower =
        stream::Follower::start(stream::Stream::new(scratch.path(), sink, presentation(&a), header.clone()), progress);
    let timeout = a.timeout.map(std::time::Duration::from_secs);
    let waited = supervise::wait(&mut child, timeout).context("waiting for the program");
    let streamed = follower.finish();
    let (status, cut) = waited?;
    drop(handlers);

    let mut doc = collect(scratch.path(), mode.name())?;
    doc.notes.extend(note);
    doc.notes.extend(python_notes);
    doc.notes.extend(cut.map(|c| match c {
        Cut::Signal(sig) => format!(
            "gpusan run received {}: passed on to the program; reported what its processes left",
            supervise::signal_name(sig)
        ),
        Cut::Timeout => format!(
            "the program ran past --timeout {} s: stopped with SIGTERM; reported what its processes left",
            a.timeout.unwrap_or_default()
        ),
    }));
    if a.require_checked {
        doc.require_checked();
    }
    let shown = presentation(&a);
    doc.notes.extend(shown.note(&doc));
    let mut stream = match streamed {
        Some(s) => s,
        None => stream::Stream::new(scratch.path(), text_sink(log_file.as_deref(), true)?, shown, header),
    };
    let mut text = stream.final_text(&doc);
    use std::os::unix::process::ExitStatusExt;
    let program_code = match (status.code(), status.signal()) {
        (Some(c), _) => c,
        (None, Some(sig)) => {
            text.push_str(&format!("========= The program was killed by signal {sig}\n"));
            128 + sig
        }
        (None, None) => 1,
    };
    stream.write(&text).with_context(|| match &log_file {
        Some(p) => format!("writing {}", p.display()),
        None => "writing the report to standard error".into(),
    })?;
    write_reports(&a, &doc)?;
    // A run cut short ends as such runs do: 128 + the signal, or `timeout`'s 124.
    Ok(match (cut, a.error_exitcode) {
        (Some(Cut::Signal(sig)), _) => 128 + sig,
        (Some(Cut::Timeout), _) => 124,
        (None, Some(code)) if doc.summary.total > 0 => code,
        (None, _) => program_code,
    })
}

/// NVTX finds its tool in `NVTX_INJECTION64_PATH`: gpusan's library, which learns the pool
/// regions allocators describe with NVTX's memory API (`doors::nvtx` in the injected
/// library). A tool the program named itself is kept: gpusan's library loads it and
/// forwards to it (`GPUSAN_NVTX_CHAIN`).
fn nvtx_injection(cmd: &mut Command, lib: &Path, theirs: Option<OsString>) {
    if let Some(theirs) = theirs.filter(|t| !t.is_empty() && Path::new(t) != lib) {
        cmd.env(env::NVTX_CHAIN, theirs);
    }
    cmd.env("NVTX_INJECTION64_PATH", lib);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The command line's names are the ones the injected library parses: `--mode check`
    /// must reach it as `check`.
    #[test]
    fn option_names_are_the_abis() {
        let name = |v: clap::builder::PossibleValue| v.get_name().to_string();
        for m in Mode::value_variants() {
            assert_eq!(name(m.to_possible_value().unwrap()), m.abi().name());
        }
        assert_eq!(Mode::value_variants().len(), gpusan_abi::Mode::ALL.len(), "a mode the command cannot ask for");
        for r in CheckReaction::value_variants() {
            assert_eq!(name(r.to_possible_value().unwrap()), r.abi().name());
        }
        assert_eq!(CheckReaction::value_variants().len(), gpusan_abi::Reaction::ALL.len());
        for b in LocalBounds::value_variants() {
            assert_eq!(name(b.to_possible_value().unwrap()), b.abi().name());
        }
        assert_eq!(LocalBounds::value_variants().len(), gpusan_abi::LocalBounds::ALL.len());
        for r in Route::value_variants() {
            assert_eq!(name(r.to_possible_value().unwrap()), r.abi().name());
        }
        assert_eq!(Route::value_variants().len(), gpusan_abi::Route::ALL.len());
        assert_eq!(name(LeakCheck::Full.to_possible_value().unwrap()), env::LEAK_CHECK_FULL);
        assert_eq!(name(LeakCheck::None.to_possible_value().unwrap()), env::LEAK_CHECK_NONE);
    }
}
