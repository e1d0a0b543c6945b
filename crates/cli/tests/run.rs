//! `gpusan run` end to end without a GPU: a fake `libcuda.so.1` (tests/fake_cuda/) backs
//! "device" memory with host memory, and a C program calls it through each door gpusan
//! guards (linked symbols, `dlsym`, `cuGetProcAddress`). Each bug must be reported with
//! its kind; clean runs must report nothing; the program's own behaviour must not change.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use gpusan_abi::table::{table_bytes, LOOKUP_CACHE_BYTES};

#[path = "fake_driver/schema.rs"]
mod report_schema;

struct Fake {
    dir: PathBuf,
    prog: PathBuf,
    /// A preloadable shim forwarding `getenv` through `dlsym(RTLD_NEXT)`, and a program
    /// that prints what `getenv` answers.
    getenv_shim: PathBuf,
    getenv_prog: PathBuf,
}

/// Builds the fake driver and the program once per test process.
fn fake() -> &'static Fake {
    static FAKE: OnceLock<Fake> = OnceLock::new();
    FAKE.get_or_init(|| {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fake_cuda");
        let dir = std::env::temp_dir().join(format!("gpusan-fake-cuda-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let cc = |args: &[&str]| {
            let out = Command::new("cc").args(args).output().expect("a C compiler (cc)");
            assert!(out.status.success(), "cc {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        };
        let lib = dir.join("libcuda.so.1");
        cc(&[
            "-shared",
            "-fPIC",
            "-Wl,-soname,libcuda.so.1",
            "-o",
            lib.to_str().unwrap(),
            src.join("libcuda.c").to_str().unwrap(),
        ]);
        let _ = std::os::unix::fs::symlink(&lib, dir.join("libcuda.so"));
        let sanitizer = dir.join("sanitizer");
        std::fs::create_dir_all(&sanitizer).unwrap();
        cc(&[
            "-shared",
            "-fPIC",
            "-o",
            sanitizer.join("libsanitizer-public.so").to_str().unwrap(),
            src.join("libsanitizer.c").to_str().unwrap(),
        ]);
        let prog = dir.join("prog");
        let rpath = format!("-Wl,-rpath,{}", dir.display());
        cc(&[
            "-o",
            prog.to_str().unwrap(),
            src.join("prog.c").to_str().unwrap(),
            "-L",
            dir.to_str().unwrap(),
            "-lcuda",
            "-ldl",
            "-lpthread",
            &rpath,
        ]);
        let getenv_shim = dir.join("getenv_shim.so");
        cc(&[
            "-shared",
            "-fPIC",
            "-o",
            getenv_shim.to_str().unwrap(),
            src.join("getenv_shim.c").to_str().unwrap(),
            "-ldl",
        ]);
        let getenv_prog = dir.join("getenv_prog");
        cc(&["-o", getenv_prog.to_str().unwrap(), src.join("getenv_prog.c").to_str().unwrap()]);
        Fake { dir, prog, getenv_shim, getenv_prog }
    })
}

fn inject_lib() -> PathBuf {
    let lib = Path::new(env!("CARGO_BIN_EXE_gpusan")).with_file_name("libgpusan_inject.so");
    assert!(
        lib.is_file(),
        "{} missing: run `cargo build -p gpusan-inject` first (scripts/test.sh does)",
        lib.display()
    );
    lib
}

struct Outcome {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    report: serde_json::Value,
}

impl Outcome {
    fn kinds(&self) -> Vec<String> {
        let mut k: Vec<String> = self.report["summary"]["by_kind"].as_object().unwrap().keys().cloned().collect();
        k.sort();
        k
    }
}

fn gpusan_run(options: &[&str], program: &[&str]) -> Outcome {
    gpusan_run_env(options, program, &[])
}

fn gpusan_run_env(options: &[&str], program: &[&str], env: &[(&str, &Path)]) -> Outcome {
    gpusan_run_in(None, options, program, env)
}

/// `gpusan run` in working folder `cwd` (this process's when `None`).
fn gpusan_run_in(cwd: Option<&Path>, options: &[&str], program: &[&str], env: &[(&str, &Path)]) -> Outcome {
    let (mut cmd, json) = gpusan_command(options, program, env);
    if let Some(d) = cwd {
        cmd.current_dir(d);
    }
    outcome(cmd.output().unwrap(), &json)
}

/// The `gpusan run` command line of a test, and where its JSON report goes.
fn gpusan_command(options: &[&str], program: &[&str], env: &[(&str, &Path)]) -> (Command, PathBuf) {
    let f = fake();
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let json = f.dir.join(format!("report-{n}.json"));
    let _ = std::fs::remove_file(&json);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gpusan"));
    cmd.arg("run")
        .args(options)
        .args(["--report-json", json.to_str().unwrap(), "--"])
        .args(program)
        .env("GPUSAN_INJECT_LIB", inject_lib())
        .env("LD_LIBRARY_PATH", &f.dir)
        .envs(env.iter().map(|(k, v)| (*k, *v)));
    (cmd, json)
}

fn outcome(out: std::process::Output, json: &Path) -> Outcome {
    let report = serde_json::from_str(&std::fs::read_to_string(json).expect("report written")).unwrap();
    report_schema::assert_matches_schema(&report);
    Outcome {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        report,
    }
}

/// A cache file's body, under its header (`// gpusan cache <key> sha256 <digest of body>`).
fn cached_body(file: &Path) -> String {
    let text = std::fs::read_to_string(file).unwrap();
    text.split_once('\n').unwrap().1.to_string()
}

/// Writes `body` into cache file `file` as gpusan would: under a header naming its entry's
/// key (the file's stem) and the body's SHA-256. Only such a file is taken from the cache.
fn reseal(file: &Path, body: &str) {
    use sha2::Digest;
    let key = file.file_stem().unwrap().to_str().unwrap();
    let digest: String = sha2::Sha256::digest(body.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
    std::fs::write(file, format!("// gpusan cache {key} sha256 {digest}\n{body}")).unwrap();
}

fn prog() -> &'static str {
    fake().prog.to_str().unwrap()
}

#[test]
fn every_door_every_scenario() {
    let cases: &[(&str, &[&str], &[&str])] = &[
        ("clean", &[], &[]),
        ("clean", &["--leak-check", "full"], &[]),
        ("memcpy_overflow", &[], &["memcpy_out_of_bounds"]),
        ("memset_overflow", &[], &["memset_out_of_bounds"]),
        ("double_free", &[], &["double_free"]),
        ("interior_free", &[], &["invalid_free"]),
        ("uaf_copy", &[], &["use_after_free_host"]),
        ("leak", &["--leak-check", "full"], &["leak"]),
        // A module variable: bounds learnt from cuModuleGetGlobal; never a leak.
        ("symbol_clean", &["--leak-check", "full"], &[]),
        ("symbol_overflow", &[], &["memcpy_out_of_bounds"]),
        // A module variable whose address the driver was never asked for: bounds from the
        // module's declarations, resolved when the unknown address shows up.
        ("variable_clean", &["--leak-check", "full"], &[]),
        ("variable_overflow", &[], &["memcpy_out_of_bounds"]),
        // Graph memory: live across launches although freed by a free node; gone (not a
        // leak) with the graph.
        ("graph_nodes", &["--leak-check", "full"], &[]),
        ("graph_nodes_overflow", &[], &["memcpy_out_of_bounds"]),
        ("graph_capture", &["--leak-check", "full"], &[]),
        ("graph_capture_overflow", &[], &["memcpy_out_of_bounds"]),
        // Graph memory freed outside the graph after each launch (trimmed between): live
        // again at each launch; freed once more, a double free.
        ("graph_free_outside", &["--leak-check", "full"], &[]),
        ("graph_free_outside_twice", &[], &["double_free"]),
        ("leak", &[], &[]),
    ];
    let mut failures = Vec::new();
    for door in ["link", "dlsym", "getproc"] {
        for (scenario, options, want) in cases {
            let o = gpusan_run(options, &[prog(), door, scenario]);
            let got = o.kinds();
            if got != *want || o.code != Some(0) {
                failures.push(format!(
                    "{door} {scenario} {options:?}: kinds {got:?}, want {want:?}; exit {:?}\n{}{}",
                    o.code, o.stdout, o.stderr
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn report_names_the_allocation_and_the_overflow() {
    let o = gpusan_run(&[], &[prog(), "link", "memcpy_overflow"]);
    let e = &o.report["errors"][0];
    assert_eq!(e["kind"], "memcpy_out_of_bounds");
    assert_eq!(e["details"]["size"], 1028, "{e:#}");
    let text = e.to_string();
    assert!(text.contains("1024"), "allocation size missing: {e:#}");
    assert!(o.stderr.contains("ERROR SUMMARY: 1 error"), "{}", o.stderr);
}

#[test]
fn overflowing_copy_names_the_module_variable() {
    let o = gpusan_run(&[], &[prog(), "link", "variable_overflow"]);
    let e = &o.report["errors"][0];
    assert_eq!(e["kind"], "memcpy_out_of_bounds", "{:#}", o.report);
    assert_eq!(e["details"]["symbol"]["name"], "table", "{e:#}");
    assert_eq!(e["details"]["symbol"]["size"], 64, "{e:#}");
    assert!(o.stderr.contains("Symbol table is 64 bytes"), "{}", o.stderr);
}

fn sanitizer_lib() -> PathBuf {
    fake().dir.join("sanitizer/libsanitizer-public.so")
}

#[test]
fn calls_cudart_refuses_are_judged_through_runtime_api_callbacks() {
    let lib = sanitizer_lib();
    // API checks only: a check run would add a note that no ptxas was found for Triton.
    let o = gpusan_run_env(&["--mode", "api"], &[prog(), "link", "runtime_refused"], &[("GPUSAN_SANITIZER_LIB", &lib)]);
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
    assert_eq!(o.kinds(), vec!["invalid_pitch", "memcpy_out_of_bounds"], "{:#}", o.report);
    let errors = o.report["errors"].as_array().unwrap();
    let pitch = errors.iter().find(|e| e["kind"] == "invalid_pitch").unwrap();
    assert_eq!(pitch["details"]["api"], "cudaMemcpy2D", "{pitch:#}");
    assert!(pitch["message"].as_str().unwrap().contains("width of 256 bytes exceeds pitch of 128 bytes"), "{pitch:#}");
    let symbol = errors.iter().find(|e| e["kind"] == "memcpy_out_of_bounds").unwrap();
    assert_eq!(symbol["details"]["api"], "cudaMemcpyToSymbol", "{symbol:#}");
    assert_eq!(symbol["details"]["symbol"]["name"], "table", "{symbol:#}");
    assert_eq!(symbol["details"]["size"], 68, "{symbol:#}");
    assert!(!o.stderr.contains("NOTE"), "{}", o.stderr);
    assert!(o.report.get("notes").is_none(), "{:#}", o.report);
}

#[test]
fn calls_cudart_refuses_for_other_reasons_are_not_reported() {
    let lib = sanitizer_lib();
    let o = gpusan_run_env(&[], &[prog(), "link", "runtime_refused_clean"], &[("GPUSAN_SANITIZER_LIB", &lib)]);
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
    assert_eq!(o.kinds(), Vec::<String>::new(), "{:#}", o.report);
}

#[test]
fn without_a_sanitizer_library_the_report_says_runtime_api_errors_were_not_observed() {
    let o = gpusan_run(&[], &[prog(), "link", "runtime_refused"]);
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
    assert_eq!(o.kinds(), Vec::<String>::new(), "{:#}", o.report);
    assert!(o.stderr.contains("NOTE: runtime API errors were not observed"), "{}", o.stderr);
    assert!(o.report["notes"][0].as_str().unwrap().contains("not observed"), "{:#}", o.report);
}

#[test]
fn a_users_own_injection_library_is_kept() {
    let lib = sanitizer_lib();
    let theirs = fake().dir.join("their-injection.so");
    let env = [("GPUSAN_SANITIZER_LIB", lib.as_path()), ("CUDA_INJECTION64_PATH", theirs.as_path())];
    let o = gpusan_run_env(&[], &[prog(), "link", "runtime_refused"], &env);
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
    assert!(o.stderr.contains("warning: runtime API errors were not observed"), "{}", o.stderr);
    assert!(o.stderr.contains("their-injection.so"), "{}", o.stderr);
    assert_eq!(o.kinds(), Vec::<String>::new(), "{:#}", o.report);
}

#[test]
fn error_exitcode_applies_only_when_errors_were_found() {
    assert_eq!(gpusan_run(&["--error-exitcode", "42"], &[prog(), "link", "double_free"]).code, Some(42));
    assert_eq!(gpusan_run(&["--error-exitcode", "42"], &[prog(), "link", "clean"]).code, Some(0));
}

#[test]
fn program_exit_code_and_output_pass_through() {
    let o = gpusan_run(&[], &["sh", "-c", "echo out; echo err >&2; exit 7"]);
    assert_eq!(o.code, Some(7));
    assert_eq!(o.stdout, "out\n");
    assert!(o.stderr.starts_with("err\n"), "{}", o.stderr);
}

#[test]
fn a_killed_program_is_reported_with_its_findings() {
    // The program dies without running its exit handlers: the findings written before
    // the crash (the events file) must survive it.
    let o = gpusan_run(&[], &[prog(), "link", "crash_after_double_free"]);
    assert_eq!(o.code, Some(128 + 11));
    assert!(o.stderr.contains("killed by signal 11"), "{}", o.stderr);
    assert_eq!(o.report["summary"]["by_kind"]["double_free"], 1, "{:#}", o.report);
}

#[test]
fn missing_program_is_a_clear_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_gpusan"))
        .args(["run", "--", "/nonexistent/program"])
        .env("GPUSAN_INJECT_LIB", inject_lib())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("starting /nonexistent/program"));
}

/// Runs `prog link SCENARIO` and returns what the fake driver was asked to load.
fn loaded_under(mode: &str, scenario: &str) -> (String, Outcome) {
    let f = fake();
    let seen = f.dir.join(format!("loaded-{mode}-{scenario}.txt"));
    let _ = std::fs::remove_file(&seen);
    let cache = f.dir.join(format!("cache-{mode}-{scenario}"));
    let env = [("FAKE_CUDA_LOADED", seen.as_path()), ("GPUSAN_CACHE_DIR", cache.as_path())];
    let o = gpusan_run_env(&["--mode", mode], &[prog(), "link", scenario], &env);
    (std::fs::read_to_string(&seen).unwrap_or_default(), o)
}

#[test]
fn count_mode_loads_an_instrumented_module_and_api_mode_the_original() {
    let (instrumented, o) = loaded_under("count", "load_ptx");
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
    assert!(instrumented.contains(".visible .global .align 8 .u64 \t__gpusan_count;"), "{instrumented}");
    assert_eq!(instrumented.matches("red.global.add.u64").count(), 2, "one per global access:\n{instrumented}");
    assert_eq!(o.report["counters"]["modules_instrumented"], 1, "{:#}", o.report);

    let (original, o) = loaded_under("api", "load_ptx");
    assert_eq!(o.code, Some(0));
    assert!(!original.contains("__gpusan_count") && original.contains("ld.global.u32"), "{original}");
    assert!(o.report.get("counters").is_none(), "{:#}", o.report);
}

/// A free after a failed launch returns the launch's error, as the driver's free does:
/// gpusan holds the memory back, but must not turn the failure into success (a program
/// that checks its frees would go on as if nothing had happened).
#[test]
fn a_held_back_free_returns_an_earlier_launchs_error() {
    let f = fake();
    let sticky = f.dir.join("sticky");
    let native = std::process::Command::new(prog())
        .args(["link", "clean"])
        .env("LD_LIBRARY_PATH", &f.dir)
        .env("FAKE_CUDA_STICKY", &sticky)
        .output()
        .unwrap();
    let o = gpusan_run_env(&[], &[prog(), "link", "clean"], &[("FAKE_CUDA_STICKY", sticky.as_path())]);
    assert_ne!(native.status.code(), Some(0), "the fake fails frees natively");
    assert_eq!(o.code, native.status.code(), "{}{}", o.stdout, o.stderr);
}

#[test]
fn a_second_run_loads_the_instrumented_ptx_from_the_cache() {
    let f = fake();
    let cache = f.dir.join("cache-second-run");
    let _ = std::fs::remove_dir_all(&cache);
    let mut loaded = Vec::new();
    let mut from_cache = Vec::new();
    for run in 0..2 {
        let seen = f.dir.join(format!("loaded-second-run-{run}.txt"));
        let _ = std::fs::remove_file(&seen);
        let env = [("FAKE_CUDA_LOADED", seen.as_path()), ("GPUSAN_CACHE_DIR", cache.as_path())];
        let o = gpusan_run_env(&["--mode", "count"], &[prog(), "link", "load_ptx"], &env);
        assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
        loaded.push(std::fs::read_to_string(&seen).unwrap_or_default());
        from_cache.push(o.report["counters"]["modules_from_cache"].as_u64().unwrap_or(0));
    }
    // The driver gets instrumented PTX both times (never a cubin of ours), the same text.
    assert!(loaded[0].contains("__gpusan_count") && loaded[0].contains(".version"), "{}", loaded[0]);
    assert_eq!(loaded[0], loaded[1]);
    assert_eq!(from_cache, [0, 1]);
    // One entry: the PTX and its metadata (folders are other caches: the Python files').
    let mut files: Vec<_> =
        std::fs::read_dir(&cache).unwrap().flatten().map(|e| e.path()).filter(|p| p.is_file()).collect();
    files.sort();
    let ext = |p: &PathBuf| p.extension().unwrap_or_default().to_string_lossy().into_owned();
    assert!(files.len() == 2 && files[0].with_extension("ptx") == files[1], "{files:?}");
    assert_eq!((ext(&files[0]), ext(&files[1])), ("meta".into(), "ptx".into()), "{files:?}");
}

/// A cached file the driver refuses (cut short) costs one run: that run loads the
/// original module and lists it as unchecked, and the file goes, so the next run
/// instruments again.
#[test]
fn a_cached_file_the_driver_refuses_is_dropped() {
    let f = fake();
    let cache = f.dir.join("cache-refused");
    let _ = std::fs::remove_dir_all(&cache);
    let env = [("GPUSAN_CACHE_DIR", cache.as_path())];
    let run = || gpusan_run_env(&["--mode", "count"], &[prog(), "link", "load_ptx"], &env);
    assert_eq!(run().code, Some(0));
    let file = std::fs::read_dir(&cache)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "ptx"))
        .unwrap();
    reseal(&file, ".version 9.0\n.target sm_90\n");
    let o = run();
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
    assert_eq!(
        o.report["unchecked_modules"]["instrumented module refused by the driver (error 218)"], 1,
        "{:#}",
        o.report
    );
    assert!(!file.exists(), "the refused file is still cached");
    assert!(!file.with_extension("meta").exists(), "its metadata is still cached");
    let o = run();
    assert_eq!(o.report["counters"]["modules_instrumented"], 1, "{:#}", o.report);
    assert!(std::fs::read_to_string(&file).unwrap().contains('}'));
}

/// Runs `prog link counted_kernel` in check mode with the given options.
fn counted_under(options: &[&str]) -> (String, Outcome) {
    let f = fake();
    let tag = options.join("");
    let seen = f.dir.join(format!("loaded-counted{tag}.txt"));
    let _ = std::fs::remove_file(&seen);
    let cache = f.dir.join(format!("cache-counted{tag}"));
    let env = [("FAKE_CUDA_LOADED", seen.as_path()), ("GPUSAN_CACHE_DIR", cache.as_path())];
    let mut all = vec!["--mode", "check"];
    all.extend_from_slice(options);
    let o = gpusan_run_env(&all, &[prog(), "link", "counted_kernel"], &env);
    (std::fs::read_to_string(&seen).unwrap_or_default(), o)
}

#[test]
fn check_counts_reach_the_report_only_when_asked() {
    let (loaded, o) = counted_under(&["--count-checks"]);
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
    for name in ["__gpusan_n_access", "__gpusan_n_check", "__gpusan_n_group", "__gpusan_n_span"] {
        assert!(loaded.contains(&format!(".visible .global .align 8 .u64 \t{name};")), "{name}:\n{loaded}");
    }
    let c = &o.report["check_counts"];
    // What the played kernel counted, read back by name; and the load's static counts: two
    // accesses through one definition, grouped behind one range check.
    assert_eq!((c["accesses"].as_u64(), c["checks"].as_u64()), (Some(64), Some(2)), "{:#}", o.report);
    assert_eq!((c["group_checks"].as_u64(), c["span_entries"].as_u64()), (Some(32), Some(32)), "{:#}", o.report);
    assert_eq!(c["static_accesses"], 2, "{:#}", o.report);
    assert_eq!(c["static_grouped"], 2, "{:#}", o.report);
    assert_eq!(c["static_group_checks"], 1, "{:#}", o.report);
    assert_eq!(c["modules"], 1, "{:#}", o.report);
    assert!(
        o.stderr.contains("CHECK COUNTS: 64 accesses, 2 checks, 32 group checks ran: 46.9% of the checks removed"),
        "{}",
        o.stderr
    );
    // A second run counts again: counting builds are not taken from the cache.
    let (_, again) = counted_under(&["--count-checks"]);
    assert_eq!(again.report["check_counts"], o.report["check_counts"], "{:#}", again.report);

    // Without the flag: the plain checking build, no counters, no key.
    let (plain, o) = counted_under(&[]);
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
    assert!(plain.contains("__gpusan_errors") && !plain.contains("__gpusan_n_"), "{plain}");
    assert!(o.report.get("check_counts").is_none(), "{:#}", o.report);
}

#[test]
fn count_checks_needs_check_mode() {
    let out = Command::new(env!("CARGO_BIN_EXE_gpusan"))
        .args(["run", "--mode", "api", "--count-checks", "--", "true"])
        .env("GPUSAN_INJECT_LIB", inject_lib())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--count-checks counts the checks of `--mode check`"));
}

#[test]
fn machine_code_only_modules_load_unchanged_and_are_reported_unchecked() {
    let (loaded, o) = loaded_under("count", "load_cubin");
    assert_eq!(loaded, "<cubin>");
    assert_eq!(o.code, Some(0));
    assert_eq!(o.report["unchecked_modules"]["machine code only (cubin)"], 1, "{:#}", o.report);
    assert!(o.stderr.contains("UNCHECKED: 1 module loaded unchanged"), "{}", o.stderr);
}

#[test]
fn many_threads_at_once_lose_nothing_and_invent_nothing() {
    let o = gpusan_run(&["--leak-check", "full"], &[prog(), "link", "threads"]);
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
    // 1600 allocations and frees from 8 threads: exactly the one double free, no leak.
    assert_eq!(o.kinds(), vec!["double_free"], "{:#}", o.report);
    assert_eq!(o.report["summary"]["total"], 1, "{:#}", o.report);
}

#[test]
fn a_forked_child_neither_hangs_nor_changes_the_report() {
    let o = gpusan_run(&[], &[prog(), "link", "fork"]);
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
    assert_eq!(o.kinds(), Vec::<String>::new(), "{:#}", o.report);
}

#[test]
fn children_forked_while_threads_allocate_never_hang() {
    // 300 children forked while 4 threads of the parent allocate, set, copy and free: a fork
    // catches some thread holding gpusan's locks. Each child then calls the driver and exits
    // (a hung one dies of a 10 s alarm). The parent had initialised CUDA, so the children
    // cannot use it and gpusan only forwards their calls: nothing found, nothing invented.
    let started = std::time::Instant::now();
    let o = gpusan_run(&["--quarantine-bytes", "16777216"], &[prog(), "link", "fork_busy"]);
    assert!(o.stdout.contains("fork_busy: 300 children ok, 0 hung, 0 failed"), "{}{}", o.stdout, o.stderr);
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
    assert_eq!(o.kinds(), Vec::<String>::new(), "{:#}", o.report);
    assert!(started.elapsed() < std::time::Duration::from_secs(60), "took {:?}", started.elapsed());
}

#[test]
fn a_child_forked_after_cuda_was_initialised_is_not_judged_and_says_so() {
    // The parent's double free is reported once; its child, where CUDA cannot be used, has
    // its calls passed on unchecked (judging them against the parent's allocations would
    // report a call the driver refuses) and says so in a report of its own.
    let o = gpusan_run(&[], &[prog(), "link", "fork_after_init"]);
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
    assert_eq!(o.kinds(), vec!["double_free"], "{:#}", o.report);
    assert_eq!(o.report["summary"]["total"], 1, "{:#}", o.report);
    assert_eq!(o.report["cuda_processes"], 2, "{:#}", o.report);
    let notes = o.report["notes"].to_string();
    assert!(notes.contains("forked after CUDA was initialised"), "{notes}");
}

#[test]
fn children_of_a_parent_that_never_used_cuda_are_checked() {
    // PyTorch's `multiprocessing` pattern: the parent never touches CUDA, its 6 forked
    // children each do. Two overflow a set, two free twice, two are clean; half leave by
    // `_exit` (no exit handlers: their findings come from the events files). Every child's
    // own error is reported once, the clean ones add nothing, and each child is a process
    // of its own in the report (its own report file).
    let o = gpusan_run(&[], &[prog(), "link", "fork_unused_parent"]);
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
    let s = &o.report["summary"];
    assert_eq!(s["total"], 4, "{:#}", o.report);
    assert_eq!(s["by_kind"]["memset_out_of_bounds"], 2, "{:#}", o.report);
    assert_eq!(s["by_kind"]["double_free"], 2, "{:#}", o.report);
    assert_eq!(o.report["cuda_processes"], 6, "{:#}", o.report);
}

#[test]
fn findings_of_every_process_are_merged() {
    let script = format!("{p} link double_free && {p} link memcpy_overflow", p = prog());
    let o = gpusan_run(&[], &["sh", "-c", &script]);
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
    assert_eq!(o.kinds(), vec!["double_free", "memcpy_out_of_bounds"], "{:#}", o.report);
}

/// A distributed job's ranks (one process per GPU): each finding names its process and
/// rank, in the JSON and the text.
#[test]
fn each_finding_names_its_process_and_rank() {
    let script =
        format!("RANK=0 LOCAL_RANK=0 {p} link double_free && RANK=1 LOCAL_RANK=1 {p} link memcpy_overflow", p = prog());
    let o = gpusan_run(&[], &["sh", "-c", &script]);
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
    let errors = o.report["errors"].as_array().unwrap();
    let of = |kind: &str| &errors.iter().find(|e| e["kind"] == kind).unwrap()["process"];
    let (first, second) = (of("double_free"), of("memcpy_out_of_bounds"));
    assert_eq!((&first["rank"], &first["local_rank"]), (&0.into(), &0.into()), "{:#}", o.report);
    assert_eq!(second["rank"], 1, "{:#}", o.report);
    assert_ne!(first["pid"], second["pid"], "{:#}", o.report);
    // The streamed text names it too.
    assert!(o.stderr.contains(&format!("=========     In process {} (rank 1)\n", second["pid"])), "{}", o.stderr);
}

#[test]
fn device_abi_table_upload_and_error_drain() {
    // The program plays an instrumented kernel (the fake driver's memory is host memory):
    // it finds the allocation table gpusan uploaded before the launch (2 live allocations),
    // writes one error record, and synchronizes; gpusan must drain it into a report.
    let o = gpusan_run(&[], &[prog(), "link", "abi"]);
    assert_eq!(o.code, Some(0), "table or ABI variables wrong: {}{}", o.stdout, o.stderr);
    assert_eq!(o.kinds(), vec!["out_of_bounds_write"], "{:#}", o.report);
    let d = &o.report["errors"][0]["details"];
    assert_eq!(d["kernel"], "abi_probe", "{d:#}");
    assert_eq!(d["block"], serde_json::json!([2, 0, 0]));
    assert_eq!(d["thread"], serde_json::json!([5, 0, 0]));
    assert_eq!(d["ptx"]["line"], 15);
    assert_eq!(d["source"], serde_json::json!({"file": "abi.cu", "line": 7}), "{d:#}");
    assert_eq!(d["size"], 4);
    assert!(o.stderr.contains("abi_probe"), "{}", o.stderr);
}

/// A kernel whose every thread errs fills the error buffer, where instrumented code stops
/// counting: the report says errors after it were not counted.
#[test]
fn a_full_error_buffer_is_said() {
    let o = gpusan_run(&["--mode", "check"], &[prog(), "link", "checked_flood"]);
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
    assert_eq!(o.kinds(), vec!["out_of_bounds_write"], "{:#}", o.report);
    let notes = o.report["notes"].to_string();
    assert!(notes.contains("the device error buffer filled (4096 records)"), "{notes}");
    assert!(o.stderr.contains("error buffer filled"), "{}", o.stderr);
}

/// The same drain when the error buffer cannot be mapped host memory: device memory,
/// copied back at each synchronization.
#[test]
fn device_abi_error_drain_without_mapped_host_memory() {
    let f = fake();
    let flag = f.dir.join("no-host-map");
    let o = gpusan_run_env(&[], &[prog(), "link", "abi"], &[("FAKE_CUDA_NO_HOST_MAP", flag.as_path())]);
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
    assert_eq!(o.kinds(), vec!["out_of_bounds_write"], "{:#}", o.report);
    assert_eq!(o.report["errors"][0]["details"]["thread"], serde_json::json!([5, 0, 0]));
}

/// A checked module's reports name its kernel and source line from the metadata cached
/// next to its instrumented PTX (`<key>.meta`), on a run from the cache as on the first;
/// an entry without its metadata is no entry.
#[test]
fn check_mode_names_kernel_and_line_from_the_cached_meta() {
    let f = fake();
    let cache = f.dir.join("cache-checked-kernel");
    let seen = f.dir.join("loaded-checked-kernel.txt");
    let _ = std::fs::remove_dir_all(&cache);
    let run = || {
        let env = [("GPUSAN_CACHE_DIR", cache.as_path()), ("FAKE_CUDA_LOADED", seen.as_path())];
        let o = gpusan_run_env(&["--mode", "check"], &[prog(), "link", "checked_kernel"], &env);
        assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
        assert_eq!(o.kinds(), vec!["out_of_bounds_write"], "{:#}", o.report);
        let loaded = std::fs::read_to_string(&seen).unwrap();
        assert!(loaded.contains("__gpusan_errors"), "not the instrumented module: {loaded}");
        let d = &o.report["errors"][0]["details"];
        // What the metadata names (addresses differ from run to run).
        let named = serde_json::json!({"kernel": d["kernel"], "ptx": d["ptx"], "source": d["source"]});
        (named, loaded)
    };
    let entry = |ext: &str| {
        let found: Vec<PathBuf> = std::fs::read_dir(&cache)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == ext))
            .collect();
        assert_eq!(found.len(), 1, "{ext}: {found:?}");
        found[0].clone()
    };

    let (first, _) = run();
    assert_eq!(first["kernel"], "zeta", "function 1 by name: {first:#}");
    assert_eq!(first["ptx"]["line"], 11);
    assert_eq!(first["source"], serde_json::json!({"file": "checked.cu", "line": 21}), "{first:#}");
    let (ptx, meta) = (entry("ptx"), entry("meta"));
    assert_eq!(meta.with_extension("ptx"), ptx);
    assert_eq!(run().0, first, "from the cache");

    // The cached metadata is what names the line, not the image.
    let text = cached_body(&meta);
    reseal(&meta, &text.replace("checked.cu", "cached.cu"));
    assert_eq!(run().0["source"], serde_json::json!({"file": "cached.cu", "line": 21}));

    // PTX without its metadata: instrumented again (the marked PTX is not loaded), both
    // written again.
    std::fs::remove_file(&meta).unwrap();
    reseal(&ptx, &(cached_body(&ptx) + "// stale\n"));
    let (again, loaded) = run();
    assert_eq!(again, first);
    assert!(!loaded.contains("// stale"), "{loaded}");
    assert_eq!(entry("meta"), meta);
    assert!(!cached_body(&ptx).contains("// stale"));
}

#[test]
fn each_context_gets_its_own_device_table_and_error_buffer() {
    let o = gpusan_run(&[], &[prog(), "link", "abi_two_contexts"]);
    assert_eq!(o.code, Some(0), "tables shared between contexts or missing: {}{}", o.stdout, o.stderr);
    assert_eq!(o.kinds(), vec!["out_of_bounds_write"], "{:#}", o.report);
    assert_eq!(o.report["errors"][0]["details"]["kernel"], "abi_probe", "{:#}", o.report);
}

/// A library is loaded into every context its kernels run in (cudart loads a program's
/// kernels as one): each context's copy of its variables points at that context's table and
/// error buffer, not only the copy of the context current when it loaded (its kernels on a
/// second GPU would run unchecked).
#[test]
fn a_library_is_pointed_at_the_table_of_every_context_it_runs_in() {
    // 0x2000 is device 1: the record is device 1's kernel past device 0's allocation (a peer
    // access), reported against the owner's allocation with the kernel's device.
    let env = [("FAKE_CUDA_DEVICES", std::path::Path::new("2"))];
    let o = gpusan_run_env(&[], &[prog(), "link", "abi_library_two_contexts"], &env);
    assert_eq!(o.code, Some(0), "the second context's variables not pointed: {}{}", o.stdout, o.stderr);
    assert_eq!(o.kinds(), vec!["out_of_bounds_write"], "{:#}", o.report);
    let d = &o.report["errors"][0]["details"];
    assert_eq!(d["kernel"], "abi_probe", "{:#}", o.report);
    assert_eq!((&d["device"], &d["nearest"]["allocation"]["device"]), (&1.into(), &0.into()), "{:#}", o.report);
    assert!(o.stderr.contains("in block (2,0,0) on device 1"), "{}", o.stderr);
}

/// IPC opens whose range the driver does not give are not bounded: the report says how many
/// (here three: the handle twice, then once more).
#[test]
fn an_ipc_import_gpusan_could_not_bound_is_said_unchecked() {
    let env = [("FAKE_CUDA_NO_RANGE", std::path::Path::new("1"))];
    let o = gpusan_run_env(&[], &[prog(), "link", "ipc"], &env);
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
    let notes = o.report["notes"].as_array().unwrap();
    assert!(notes.iter().any(|n| n.as_str().unwrap().starts_with("3 IPC open(s)")), "{notes:?}");
    let errors = o.report["errors"].as_array().unwrap();
    assert!(errors.iter().all(|e| e["details"]["nearest"]["allocation"]["kind"] != "ipc_import"), "{:#}", o.report);
}

/// Managed memory's prefetches and advice are judged as ranges: past the end, and after the
/// free; whole-allocation ones are silent.
#[test]
fn a_prefetch_or_advice_past_a_managed_allocation_or_after_its_free_is_found() {
    let o = gpusan_run(&[], &[prog(), "link", "managed_ranges"]);
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
    assert_eq!(o.kinds(), vec!["range_out_of_bounds", "use_after_free_host"], "{:#}", o.report);
    let errors = o.report["errors"].as_array().unwrap();
    let api = |kind: &str| errors.iter().find(|e| e["kind"] == kind).unwrap()["details"]["api"].clone();
    assert_eq!(
        (api("range_out_of_bounds"), api("use_after_free_host")),
        ("cuMemPrefetchAsync".into(), "cuMemAdvise".into())
    );
    assert!(o.stderr.contains("Out-of-bounds range of 1028 bytes by cuMemPrefetchAsync (ptr)"), "{}", o.stderr);
}

/// Another process's memory opened through an IPC handle: bounded by the exporter's
/// allocation; its last close (the driver counts opens) judged as a free, so a copy after
/// it is a use after free, and one between two closes is not; never a leak.
#[test]
fn memory_opened_through_an_ipc_handle_is_bounded_and_its_close_is_a_free() {
    let o = gpusan_run(&["--leak-check", "full"], &[prog(), "link", "ipc"]);
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
    assert_eq!(o.kinds(), vec!["memcpy_out_of_bounds", "use_after_free_host"], "{:#}", o.report);
    assert_eq!(o.report["summary"]["by_kind"]["use_after_free_host"], 1, "only after the last close: {:#}", o.report);
    let errors = o.report["errors"].as_array().unwrap();
    assert!(errors.iter().all(|e| e["details"]["nearest"]["allocation"]["kind"] == "ipc_import"), "{:#}", o.report);
}

/// Peer copies on two devices: each side judged against its allocation and against the
/// device of the context the call names for it.
#[test]
fn a_peer_copy_is_judged_on_each_side_and_against_each_contexts_device() {
    let env = [("FAKE_CUDA_DEVICES", std::path::Path::new("2"))];
    let o = gpusan_run_env(&[], &[prog(), "link", "peer_copies"], &env);
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
    assert_eq!(o.kinds(), vec!["device_mismatch", "memcpy_out_of_bounds"], "{:#}", o.report);
    let errors = o.report["errors"].as_array().unwrap();
    assert!(errors.iter().all(|e| e["details"]["api"] == "cuMemcpyPeer"), "{:#}", o.report);
    let kind = |k: &str| errors.iter().find(|e| e["kind"] == k).unwrap();
    let mismatch = &kind("device_mismatch")["details"];
    assert_eq!((&mismatch["operand"], &mismatch["nearest"]["allocation"]["device"]), (&"dst".into(), &1.into()));
    assert_eq!(kind("memcpy_out_of_bounds")["details"]["operand"], "src", "{:#}", o.report);
}

#[test]
fn check_mode_loads_a_module_wired_to_the_device_abi() {
    let (checked, o) = loaded_under("check", "load_ptx");
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
    for symbol in ["__gpusan_table", "__gpusan_errors", "__gpusan_module"] {
        assert!(checked.contains(symbol), "{symbol} missing:\n{checked}");
    }
    assert_eq!(o.kinds(), Vec::<String>::new(), "{:#}", o.report);
}

#[test]
fn check_reaction_reaches_the_instrumented_module() {
    let f = fake();
    let cache = f.dir.join("cache-check-reaction");
    let load = |reaction: &str| {
        let seen = f.dir.join(format!("loaded-check-{reaction}.txt"));
        let _ = std::fs::remove_file(&seen);
        let env = [("FAKE_CUDA_LOADED", seen.as_path()), ("GPUSAN_CACHE_DIR", cache.as_path())];
        let o = gpusan_run_env(&["--mode", "check", "--check-reaction", reaction], &[prog(), "link", "load_ptx"], &env);
        assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
        std::fs::read_to_string(&seen).unwrap_or_default()
    };
    // Report first, into the same cache: an abort run must not get the report build.
    let report = load("report");
    assert!(report.contains("__gpusan_errors") && !report.contains("trap;"), "{report}");
    let abort = load("abort");
    assert!(abort.contains("__gpusan_errors") && abort.contains("\ttrap;"), "{abort}");
}

/// Triton assembles with `$TRITON_PTXAS_PATH`: check mode points it at the `ptxas`
/// stand-in (which answers as NVIDIA's ptxas, plus a line saying so), other modes and a
/// user's own choice leave it alone.
#[test]
fn check_mode_gives_triton_the_ptxas_stand_in() {
    let ptxas = gpusan_testkit::ptxas();
    let show =
        "echo \"path=${TRITON_PTXAS_PATH:-unset}\"; [ -z \"$TRITON_PTXAS_PATH\" ] || \"$TRITON_PTXAS_PATH\" --version";
    let env: &[(&str, &Path)] = &[("GPUSAN_REAL_PTXAS", &ptxas)];
    let o = gpusan_run_env(&["--mode", "check"], &["sh", "-c", show], env);
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
    assert!(o.stdout.lines().any(|l| l.starts_with("path=/") && l.ends_with("/bin/ptxas")), "{}", o.stdout);
    assert!(o.stdout.contains("release 13.0") && o.stdout.contains("ptxas stand-in"), "{}", o.stdout);

    let o = gpusan_run_env(&["--mode", "api"], &["sh", "-c", show], env);
    assert!(o.stdout.contains("path=unset"), "{}", o.stdout);

    let mine = Path::new("/opt/my/ptxas");
    let o = gpusan_run_env(
        &["--mode", "check"],
        &["sh", "-c", "echo \"path=$TRITON_PTXAS_PATH\""],
        &[("GPUSAN_REAL_PTXAS", &ptxas), ("TRITON_PTXAS_PATH", mine)],
    );
    assert!(o.stdout.contains("path=/opt/my/ptxas\n"), "{}", o.stdout);
}

/// A kernel launched for the first time inside a global-mode stream capture (cudart then
/// loads its module: lazy loading) must not break the capture, although gpusan sets up the
/// module's device ABI right then; the fake driver fails and invalidates the capture at
/// the first call the real one prohibits. Every launch of the graph must find the table
/// up to date.
#[test]
fn check_mode_keeps_a_global_capture_valid_across_a_first_launch() {
    let f = fake();
    let cache = f.dir.join("cache-capture");
    let o = gpusan_run_env(
        &["--mode", "check", "--leak-check", "full"],
        &[prog(), "link", "capture_first_launch"],
        &[("GPUSAN_CACHE_DIR", cache.as_path())],
    );
    assert_eq!(o.code, Some(0), "capture invalidated or table stale: {}{}", o.stdout, o.stderr);
    assert_eq!(o.kinds(), Vec::<String>::new(), "{:#}", o.report);

    // The error buffer the module got during the capture works: the graph's kernel writes
    // a record, the synchronization after the graph's launch reports it.
    let o = gpusan_run_env(
        &["--mode", "check"],
        &[prog(), "link", "capture_first_launch_overflow"],
        &[("GPUSAN_CACHE_DIR", cache.as_path())],
    );
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
    assert_eq!(o.kinds(), vec!["out_of_bounds_write"], "{:#}", o.report);
    assert_eq!(o.report["errors"][0]["details"]["kernel"], "k", "{:#}", o.report);
}

/// Runs the `table_growth` scenario (3002 allocations, and a few module variables, in the
/// table after 30 launches; two ABI modules) in check mode and returns its outcome with the numbers it printed.
fn table_growth(env: &[(&str, &str)]) -> (Outcome, std::collections::HashMap<String, u64>) {
    let env: Vec<(&str, &Path)> = env.iter().map(|(k, v)| (*k, Path::new(*v))).collect();
    let o = gpusan_run_env(&[], &[prog(), "link", "table_growth"], &env);
    assert_eq!(o.code, Some(0), "a table missed allocations: {}{}", o.stdout, o.stderr);
    assert_eq!(o.kinds(), Vec::<String>::new(), "{:#}", o.report);
    let line = o.stdout.lines().find(|l| l.starts_with("addresses=")).expect("the scenario's numbers");
    let numbers = line
        .split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.parse().unwrap()))
        .collect();
    (o, numbers)
}

/// Allocations of `table_growth` (its table also holds the module variables it read).
const TABLE_ENTRIES: u64 = 3002;
/// What of gpusan's error buffer comes from `cuMemAlloc`: nothing, it is mapped host
/// memory (`cuMemHostAlloc`) when the driver has it, as the fake does.
const ERROR_BUFFER_BYTES: u64 = 0;

fn counter(o: &Outcome, name: &str) -> u64 {
    o.report["counters"][name].as_u64().unwrap_or_else(|| panic!("counter {name} missing: {:#}", o.report))
}

/// The table grows in place (CUDA virtual memory management): one address for the whole
/// run, each module pointed once, and the memory it holds is the cache, header and entries
/// rounded up to one granule, at any granularity.
#[test]
fn device_table_grows_in_place_within_one_granule_of_its_size() {
    for granule in [4096u64, 2 << 20] {
        let (o, n) = table_growth(&[("FAKE_CUDA_GRANULE", &granule.to_string())]);
        assert!(n["entries"] >= TABLE_ENTRIES, "{n:?}");
        assert_eq!(n["addresses"], 1, "the table moved: {n:?}");
        assert_eq!(n["pointings"], 2, "modules pointed more than once: {n:?}");
        let table = LOOKUP_CACHE_BYTES + table_bytes(n["entries"]);
        assert!(n["vmm_bytes"] >= table && n["vmm_bytes"] < table + granule, "granule {granule}: {n:?}");
        assert_eq!(n["gpusan_alloc_bytes"], ERROR_BUFFER_BYTES, "a table buffer from cuMemAlloc: {n:?}");
        assert_eq!(counter(&o, "device_table_bytes"), n["vmm_bytes"]);
        assert_eq!(counter(&o, "device_table_moves"), 0);
    }
}

/// Without VMM (the reservation refused) the table lives in `cuMemAlloc` buffers that
/// double; each move re-points both modules, and outgrown buffers stay held and counted.
#[test]
fn device_table_falls_back_to_growing_buffers_without_vmm() {
    let (o, n) = table_growth(&[("FAKE_CUDA_NO_VMM", "1")]);
    assert!(n["entries"] >= TABLE_ENTRIES, "{n:?}");
    assert_eq!(n["vmm_bytes"], 0, "{n:?}");
    let moves = counter(&o, "device_table_moves");
    assert!(moves >= 1, "3002 entries outgrow the first buffer (2047 entries): {n:?}");
    assert_eq!(n["addresses"], 1 + moves, "{n:?}");
    // Each module once at its load, then each module loaded by then at each move.
    assert!(n["pointings"] > 2 + moves && n["pointings"] <= 2 + 2 * moves, "{n:?} after {moves} moves");
    let table_buffers = n["gpusan_alloc_bytes"] - ERROR_BUFFER_BYTES;
    assert_eq!(counter(&o, "device_table_bytes"), table_buffers, "{n:?}");
    assert!(
        table_buffers >= 2 * (LOOKUP_CACHE_BYTES + table_bytes(TABLE_ENTRIES)),
        "outgrown buffers not counted: {n:?}"
    );
}

/// Mapping more memory fails midway (the device's memory exhausted for VMM): the table
/// moves to `cuMemAlloc` buffers and stays complete; both memories are counted.
#[test]
fn device_table_moves_to_a_buffer_when_mapping_fails() {
    let limit = LOOKUP_CACHE_BYTES + 8 * 4096;
    let (o, n) = table_growth(&[("FAKE_CUDA_GRANULE", "4096"), ("FAKE_CUDA_VMM_LIMIT", &limit.to_string())]);
    assert!(n["entries"] >= TABLE_ENTRIES, "{n:?}");
    let moves = counter(&o, "device_table_moves");
    assert!(moves >= 1, "{n:?}");
    assert_eq!(n["addresses"], 1 + moves, "{n:?}");
    assert!(n["vmm_bytes"] > LOOKUP_CACHE_BYTES && n["vmm_bytes"] <= limit, "{n:?}");
    let buffer = n["gpusan_alloc_bytes"] - ERROR_BUFFER_BYTES;
    assert!(buffer >= LOOKUP_CACHE_BYTES + table_bytes(TABLE_ENTRIES), "{n:?}");
    assert_eq!(counter(&o, "device_table_bytes"), n["vmm_bytes"] + buffer, "{n:?}");
}

/// A shim the user preloads (after gpusan's library) that forwards `getenv` with
/// `dlsym(RTLD_NEXT)` must get the C library's `getenv`, as natively: `RTLD_NEXT` is
/// relative to the caller, not to gpusan's `dlsym`.
#[test]
fn rtld_next_is_resolved_relative_to_the_caller() {
    let f = fake();
    let native = Command::new(&f.getenv_prog).env("LD_PRELOAD", &f.getenv_shim).output().unwrap();
    let home = std::env::var("HOME").unwrap_or_else(|_| "(unset)".into());
    assert_eq!(String::from_utf8_lossy(&native.stdout), format!("shimmed {home}\n"));
    for program in [f.getenv_prog.to_str().unwrap(), prog()] {
        let args: &[&str] = if program == prog() { &[program, "link", "clean"] } else { &[program] };
        let o = gpusan_run_env(&[], args, &[("LD_PRELOAD", &f.getenv_shim)]);
        assert_eq!(o.code, Some(0), "{program}: {}{}", o.stdout, o.stderr);
        assert!(!o.stderr.contains("getenv_shim"), "{}", o.stderr);
        if program != prog() {
            assert_eq!(o.stdout, format!("shimmed {home}\n"));
        }
    }
}

/// A program that never uses CUDA gets no clean verdict: the text and the JSON say that
/// nothing was seen, and its exit code passes through.
#[test]
fn a_run_without_cuda_activity_says_nothing_was_checked() {
    for (program, code) in [(&["true"][..], 0), (&["sh", "-c", "exit 3"][..], 3)] {
        let o = gpusan_run(&[], program);
        assert_eq!(o.code, Some(code), "{}", o.stderr);
        assert_eq!(o.report["cuda_processes"], 0, "{:#}", o.report);
        assert!(
            o.stderr.contains("ERROR SUMMARY: 0 errors; no CUDA activity seen: nothing was checked"),
            "{}",
            o.stderr
        );
        assert!(o.stderr.contains("NOTE: no CUDA activity seen"), "{}", o.stderr);
    }
    // A CUDA program, and one started from a shell, are seen.
    let o = gpusan_run(&[], &["sh", "-c", &format!("{} link clean", prog())]);
    assert_eq!(o.report["cuda_processes"], 1, "{:#}", o.report);
    assert!(!o.stderr.contains("no CUDA activity"), "{}", o.stderr);
    assert!(o.stderr.contains("ERROR SUMMARY: 0 errors\n"), "{}", o.stderr);
}

/// Runs `prog link load_ptx` in count mode with cache `cache`: what the driver loaded, and
/// the outcome.
fn count_cached(cache: &Path, tag: &str) -> (String, Outcome) {
    let seen = fake().dir.join(format!("loaded-{tag}.txt"));
    let _ = std::fs::remove_file(&seen);
    let env = [("FAKE_CUDA_LOADED", seen.as_path()), ("GPUSAN_CACHE_DIR", cache)];
    let o = gpusan_run_env(&["--mode", "count"], &[prog(), "link", "load_ptx"], &env);
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
    (std::fs::read_to_string(&seen).unwrap_or_default(), o)
}

fn cache_entry(cache: &Path, ext: &str) -> PathBuf {
    let found: Vec<PathBuf> = std::fs::read_dir(cache)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == ext))
        .collect();
    assert_eq!(found.len(), 1, "{ext}: {found:?}");
    found[0].clone()
}

/// Cached PTX runs as the program's code: an entry is named by a SHA-256 of its input and
/// used only if its body is the one its header's digest names, under its own key, read
/// from a file (no symlink) of the user's that no one else can write, in a folder the
/// same. Anything else is a miss: instrumented again and written anew.
#[test]
fn a_cache_entry_is_used_only_when_verified_and_private() {
    use std::os::unix::fs::PermissionsExt;
    let f = fake();
    let cache = f.dir.join("cache-verified");
    let _ = std::fs::remove_dir_all(&cache);
    let (first, o) = count_cached(&cache, "verified");
    assert_eq!(o.report["counters"]["modules_from_cache"], 0);
    assert_eq!(std::fs::metadata(&cache).unwrap().permissions().mode() & 0o777, 0o700, "a private folder");
    let ptx = cache_entry(&cache, "ptx");
    let stem = ptx.file_stem().unwrap().to_str().unwrap().to_string();
    assert!(stem.len() == 64 && stem.chars().all(|c| c.is_ascii_hexdigit()), "not a SHA-256 key: {stem}");
    assert_eq!(count_cached(&cache, "verified").1.report["counters"]["modules_from_cache"], 1);

    let planted = ".version 8.0\n.target sm_90\n.address_size 64\n// planted\n";
    let refused = |what: &str, plant: &dyn Fn()| {
        plant();
        let (loaded, o) = count_cached(&cache, "verified");
        assert!(!loaded.contains("planted"), "{what}: the planted PTX was loaded");
        assert_eq!(loaded, first, "{what}: not the instrumented module");
        assert_eq!(o.report["counters"]["modules_from_cache"], 0, "{what}: {:#}", o.report);
        assert!(cached_body(&ptx).contains("__gpusan_count"), "{what}: the entry was not written anew");
    };
    refused("a swapped body", &|| {
        let text = std::fs::read_to_string(&ptx).unwrap();
        let header = text.split_once('\n').unwrap().0;
        std::fs::write(&ptx, format!("{header}\n{planted}")).unwrap();
    });
    refused("a body without a header", &|| std::fs::write(&ptx, planted).unwrap());
    refused("another entry's file", &|| {
        let other = cache.join(format!("{}.ptx", "0".repeat(64)));
        reseal(&other, planted);
        std::fs::rename(&other, &ptx).unwrap();
    });
    refused("a symlink", &|| {
        let elsewhere = f.dir.join(format!("{stem}.ptx"));
        reseal(&elsewhere, planted);
        std::fs::remove_file(&ptx).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &ptx).unwrap();
    });
    refused("a file others can write", &|| {
        reseal(&ptx, planted);
        std::fs::set_permissions(&ptx, std::fs::Permissions::from_mode(0o666)).unwrap();
    });
    assert_eq!(std::fs::metadata(&ptx).unwrap().permissions().mode() & 0o077, 0, "written anew, private");
    // Only root can give a file away (CI runs as root).
    if unsafe { libc::geteuid() } == 0 {
        refused("a file of another user", &|| {
            reseal(&ptx, planted);
            std::os::unix::fs::chown(&ptx, Some(65534), Some(65534)).unwrap();
        });
    }

    // A folder others can write: nothing read from it, nothing written to it.
    reseal(&ptx, planted);
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o777)).unwrap();
    let (loaded, o) = count_cached(&cache, "verified");
    assert_eq!(loaded, first);
    assert_eq!(o.report["counters"]["modules_from_cache"], 0);
    assert!(cached_body(&ptx).contains("planted"), "written into a folder others can write");
    let notes = o.report["notes"].to_string();
    assert!(notes.contains("cache folder") && notes.contains("writable by group or others"), "no word of it: {notes}");
}

/// `GPUSAN_CACHE_DIR=` (empty) is unset: the cache goes to `$XDG_CACHE_HOME/gpusan`, never
/// into the program's working folder.
#[test]
fn an_empty_cache_dir_is_not_the_working_folder() {
    let f = fake();
    let (work, xdg) = (f.dir.join("cwd-empty-cache"), f.dir.join("xdg-empty-cache"));
    for d in [&work, &xdg] {
        let _ = std::fs::remove_dir_all(d);
        std::fs::create_dir_all(d).unwrap();
    }
    let env = [("GPUSAN_CACHE_DIR", Path::new("")), ("XDG_CACHE_HOME", xdg.as_path())];
    let o = gpusan_run_in(Some(&work), &["--mode", "count"], &[prog(), "link", "load_ptx"], &env);
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
    assert_eq!(std::fs::read_dir(&work).unwrap().count(), 0, "files in the working folder");
    cache_entry(&xdg.join("gpusan"), "ptx");
}

/// The runtime's report files are never written through a symlink planted at their names
/// (the report folder may be one others can write): the planted target stays as it was.
#[test]
fn report_files_are_not_written_through_symlinks() {
    let f = fake();
    let dir = f.dir.join("reports-symlinked");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let victim = f.dir.join("victim-of-reports");
    std::fs::write(&victim, "precious\n").unwrap();
    // `exec` keeps the shell's pid: the names are known before the program starts.
    let script = format!(
        "ln -s {v} {d}/report-$$.json.events && ln -s {v} {d}/report-$$.json && ln -s {v} {d}/report-$$.tmp && exec {p} link double_free",
        v = victim.display(),
        d = dir.display(),
        p = prog()
    );
    let out = Command::new("sh")
        .args(["-c", &script])
        .env("LD_PRELOAD", inject_lib())
        .env("LD_LIBRARY_PATH", &f.dir)
        .env("GPUSAN_REPORT_DIR", &dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    // The final report replaced its symlink, with the finding.
    let report = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "json"))
        .unwrap();
    assert!(!std::fs::symlink_metadata(&report).unwrap().file_type().is_symlink());
    assert!(std::fs::read_to_string(&report).unwrap().contains("double_free"));
}

/// The runtime's folder is private (0700) and unpredictable (not named after gpusan's
/// pid, which anyone could pre-create to make the run fail), and gone after the run.
#[test]
fn the_scratch_folder_is_private_unpredictable_and_removed() {
    let f = fake();
    let tmp = f.dir.join("tmpdir-scratch");
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();
    let script = r#"d="$GPUSAN_REPORT_DIR"; echo "$(stat -c %a "$d") ${d##*/} gpusan-$PPID-0""#;
    let o = gpusan_run_env(&[], &["sh", "-c", script], &[("TMPDIR", tmp.as_path())]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let words: Vec<&str> = o.stdout.split_whitespace().collect();
    assert_eq!(words.len(), 3, "{}", o.stdout);
    assert_eq!(words[0], "700", "{}", o.stdout);
    assert_ne!(words[1], words[2], "named after gpusan's pid");
    assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), 0, "the folder is left behind");
}

/// One process's report that cannot be read costs only that file: every other process's
/// findings are reported, with the damaged file named and why.
#[test]
fn a_damaged_report_is_named_and_the_others_are_merged() {
    let script = format!(
        "{p} link double_free; printf '{{broken' > \"$GPUSAN_REPORT_DIR/report-1.json\"; \
         printf 'not json\\n' > \"$GPUSAN_REPORT_DIR/report-2.json.events\"; {p} link memcpy_overflow",
        p = prog()
    );
    let o = gpusan_run(&[], &["sh", "-c", &script]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert_eq!(o.kinds(), vec!["double_free", "memcpy_out_of_bounds"], "{:#}", o.report);
    let notes = o.report["notes"].to_string();
    assert!(notes.contains("damaged report: report-1.json is damaged ("), "{notes}");
    assert!(notes.contains("damaged report: report-2.json.events has 1 unreadable line(s)"), "{notes}");
    assert!(o.stderr.contains("NOTE: damaged report: report-1.json"), "{}", o.stderr);
}

/// Starts `gpusan run` on a program that finds a double free, then sleeps (its pid in
/// `ready` once the finding is written); what the run ended with, and the sleeper's pid.
fn cut_short(options: &[&str], cut: impl FnOnce(u32), tag: &str) -> (Outcome, i32, PathBuf) {
    let f = fake();
    let (ready, tmp) = (f.dir.join(format!("ready-{tag}")), f.dir.join(format!("tmpdir-{tag}")));
    let _ = std::fs::remove_file(&ready);
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();
    let script = format!(
        "{p} link double_free; echo $$ > {r}.part && mv {r}.part {r}; exec sleep 60",
        p = prog(),
        r = ready.display()
    );
    let (mut cmd, json) = gpusan_command(options, &["sh", "-c", &script], &[("TMPDIR", tmp.as_path())]);
    let child = cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap();
    let start = std::time::Instant::now();
    while !ready.exists() {
        assert!(start.elapsed() < std::time::Duration::from_secs(20), "the program never got ready");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let sleeper: i32 = std::fs::read_to_string(&ready).unwrap().trim().parse().unwrap();
    cut(child.id());
    let out = child.wait_with_output().unwrap();
    assert!(start.elapsed() < std::time::Duration::from_secs(30), "gpusan waited for the whole program");
    (outcome(out, &json), sleeper, tmp)
}

fn alive(pid: i32) -> bool {
    // A zombie (not yet reaped by init) has finished too.
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
}

/// SIGTERM, SIGINT or SIGHUP sent to `gpusan run` reaches the program, gpusan waits for
/// it, reports what its processes left, removes its folder and exits 128 + the signal.
#[test]
fn a_signalled_run_stops_the_program_and_still_reports() {
    for (sig, name) in [(libc::SIGTERM, "SIGTERM"), (libc::SIGINT, "SIGINT"), (libc::SIGHUP, "SIGHUP")] {
        let (o, sleeper, tmp) = cut_short(&[], |pid| unsafe { assert_eq!(libc::kill(pid as i32, sig), 0) }, name);
        assert_eq!(o.code, Some(128 + sig), "{name}: {}", o.stderr);
        assert_eq!(o.kinds(), vec!["double_free"], "{name}: {:#}", o.report);
        assert!(!alive(sleeper), "{name}: the program was left running");
        assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), 0, "{name}: the folder was left behind");
        let note = format!("gpusan run received {name}: passed on to the program");
        assert!(o.report["notes"].to_string().contains(&note), "{name}: {:#}", o.report);
        assert!(o.stderr.contains(&note), "{name}: {}", o.stderr);
    }
}

/// `--timeout` stops the program the same way, and the run exits 124.
#[test]
fn a_timeout_stops_the_program_and_still_reports() {
    let (o, sleeper, tmp) = cut_short(&["--timeout", "2"], |_| {}, "timeout");
    assert_eq!(o.code, Some(124), "{}", o.stderr);
    assert_eq!(o.kinds(), vec!["double_free"], "{:#}", o.report);
    assert!(!alive(sleeper), "the program was left running");
    assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), 0, "the folder was left behind");
    assert!(o.stderr.contains("the program ran past --timeout 2 s: stopped with SIGTERM"), "{}", o.stderr);
    // A program that ends in time is not touched.
    let o = gpusan_run(&["--timeout", "60"], &[prog(), "link", "clean"]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert!(!o.stderr.contains("--timeout"), "{}", o.stderr);
}

/// The program's own `dlsym(RTLD_NEXT)` and `dlsym(RTLD_DEFAULT)` find gpusan's exported
/// stand-ins first: they must work as stand-ins (judging, then calling the driver), never
/// take themselves for the real function and recurse.
#[test]
fn the_programs_own_global_lookups_get_working_stand_ins() {
    for door in ["next", "default"] {
        for (scenario, want) in [("clean", &[][..]), ("double_free", &["double_free"][..])] {
            let o = gpusan_run(&[], &[prog(), door, scenario]);
            assert_eq!(o.code, Some(0), "{door} {scenario}: {}{}", o.stdout, o.stderr);
            assert_eq!(o.kinds(), want, "{door} {scenario}: {:#}", o.report);
        }
    }
}

/// Freed memory held back in quarantine goes back to the driver in the context it was
/// allocated in, whatever context is current when it is evicted; memory of a context the
/// program destroyed is never freed again (the driver took it with the context).
#[test]
fn quarantine_gives_memory_back_in_its_own_context() {
    let o = gpusan_run(&["--quarantine-bytes", "1500"], &[prog(), "link", "quarantine_contexts"]);
    assert_eq!(
        o.code,
        Some(0),
        "64: a free from the wrong context, 128: a free of dead memory\n{}{}",
        o.stdout,
        o.stderr
    );
    assert_eq!(o.kinds(), Vec::<String>::new(), "{:#}", o.report);
}

/// A launch never waits for another context's table upload: with context 0x2000's upload
/// stalled inside the driver, a launch in context 0x1000 completes (a wait would end the
/// program by SIGALRM after 10 s).
#[test]
fn a_launch_does_not_wait_for_another_contexts_upload() {
    let o = gpusan_run(&["--mode", "check"], &[prog(), "link", "launch_while_another_context_uploads"]);
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
    assert_eq!(o.kinds(), Vec::<String>::new(), "{:#}", o.report);
}

/// A panic in gpusan's own code, in a stand-in before or after its real call or in `dlsym`
/// or `cuGetProcAddress`, never reaches the program (Rust aborts at an `extern "C"`
/// function): each call reaches the driver exactly once with its answer returned, the
/// program ends as natively, and the report names the internal error.
#[test]
fn a_panic_inside_gpusan_never_reaches_the_program() {
    let places = [
        ("link", "cuMemAlloc_v2"),
        ("link", "cuMemAlloc_v2:after"),
        ("dlsym", "dlsym"),
        ("getproc", "cuGetProcAddress"),
        ("getproc", "cuMemAlloc_v2:after"),
    ];
    for (door, place) in places {
        let o = gpusan_run_env(&[], &[prog(), door, "alloc_calls"], &[("GPUSAN_TEST_PANIC", Path::new(place))]);
        assert_eq!(o.code, Some(0), "{door} {place}: {}{}", o.stdout, o.stderr);
        assert!(o.stdout.contains("allocs=2\n"), "{door} {place}: {}", o.stdout);
        let notes = o.report["notes"].to_string();
        assert!(
            notes.contains("gpusan internal error") && notes.contains("GPUSAN_TEST_PANIC"),
            "{door} {place}: {notes}"
        );
    }
}
