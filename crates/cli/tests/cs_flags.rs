//! compute-sanitizer's options in `gpusan run` (issue 16), with the fake driver: each does
//! what compute-sanitizer's manual says, or is refused by name. `cs_prog` launches two
//! kernels, `_Z6secondPi` four times and `_Z5firstPi` twice (second, first, second, second,
//! first, second); each launch that runs checked leaves one finding of its own, each that
//! runs unchecked (its unchecked copy) none.

mod fake_driver;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use fake_driver::Outcome;

fn dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| fake_driver::build("cs-flags", &[("cs_prog", "cs_prog.c")]))
}

fn prog() -> String {
    dir().join("cs_prog").to_str().unwrap().to_string()
}

fn run_with(options: &[&str], program: &[&str]) -> Outcome {
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let cache = dir().join(format!("cache-{n}"));
    fake_driver::gpusan_run(dir(), options, program, &[("GPUSAN_CACHE_DIR", &cache)])
}

fn run(options: &[&str]) -> Outcome {
    let o = run_with(options, &[&prog()]);
    assert!(o.stdout.contains("cs done rc=0"), "{options:?}: {}{}", o.stdout, o.stderr);
    o
}

/// The findings' PTX lines: 100 + the index of the launch that left each.
fn launches_found(o: &Outcome) -> Vec<u64> {
    let errors = o.report["errors"].as_array().cloned().unwrap_or_default();
    let mut lines: Vec<u64> = errors.iter().map(|e| e["details"]["ptx"]["line"].as_u64().unwrap() - 100).collect();
    lines.sort();
    lines
}

/// (kernel, launches, unchecked reason) of each coverage line, sorted.
fn coverage(o: &Outcome) -> Vec<(String, u64, Option<String>)> {
    let list = o.report["coverage"]["kernels"].as_array().cloned().unwrap_or_default();
    let mut k: Vec<_> = list
        .iter()
        .map(|k| {
            let name = k["mangled"].as_str().unwrap().to_string();
            (name, k["launches"].as_u64().unwrap(), k["unchecked"].as_str().map(str::to_string))
        })
        .collect();
    k.sort();
    k
}

fn line(kernel: &str, launches: u64, unchecked: Option<&str>) -> (String, u64, Option<String>) {
    (kernel.to_string(), launches, unchecked.map(str::to_string))
}

#[test]
fn check_is_the_default_mode_and_every_launch_is_checked() {
    let o = run(&[]);
    assert_eq!(o.report["mode"], "check", "{:#}", o.report);
    assert_eq!(launches_found(&o), vec![0, 1, 2, 3, 4, 5], "{:#}", o.report);
    assert_eq!(coverage(&o), vec![line("_Z5firstPi", 2, None), line("_Z6secondPi", 4, None)]);
    let o = run(&["--tool", "memcheck"]);
    assert_eq!(launches_found(&o), vec![0, 1, 2, 3, 4, 5]);
}

#[test]
fn kernel_name_checks_only_matching_kernels() {
    let o = run(&["--kernel-name", "kns=second"]);
    assert_eq!(launches_found(&o), vec![0, 2, 3, 5], "{:#}", o.report);
    assert_eq!(
        coverage(&o),
        vec![line("_Z5firstPi", 2, Some("not selected by --kernel-name")), line("_Z6secondPi", 4, None)]
    );
    // The whole mangled name, and a regular expression found in it.
    assert_eq!(launches_found(&run(&["--kernel-name", "kne=_Z5firstPi"])), vec![1, 4]);
    assert_eq!(launches_found(&run(&["--kernel-name", "kne=first"])), Vec::<u64>::new(), "kne is the whole name");
    assert_eq!(launches_found(&run(&["--kernel-name", "regex=^_Z[0-9]first"])), vec![1, 4]);
}

/// compute-sanitizer matches every filter key against the mangled name only: its `--help`
/// (2025.3.1, CUDA 13.0, the pinned one in .toolchain) says "the full mangled name of the
/// kernel", "a substring in the mangled name", "a regular expression found in the mangled
/// name", for `--kernel-name` and `--kernel-name-exclude` alike. So does gpusan: a pattern
/// only the demangled name `second(int*)` has selects and excludes nothing; one the mangled
/// name `_Z6secondPi` has does.
#[test]
fn kernel_filters_match_the_mangled_name_and_not_the_demangled_one() {
    let second = vec![0, 2, 3, 5];
    let none = Vec::<u64>::new();
    for (filter, found) in [
        ("kns=6secondPi", &second),
        ("kns=second(int", &none),
        ("kne=_Z6secondPi", &second),
        ("kne=second(int*)", &none),
        ("kne=second", &none),
        ("regex=^_Z6second", &second),
        ("regex=^second\\(", &none),
    ] {
        assert_eq!(&launches_found(&run(&["--kernel-name", filter])), found, "--kernel-name {filter}");
    }
    let all = vec![0, 1, 2, 3, 4, 5];
    let first = vec![1, 4];
    for (filter, found) in [
        ("kns=6secondPi", &first),
        ("kns=second(int", &all),
        ("kne=second(int*)", &all),
        ("regex=^_Z6second", &first),
        ("regex=^second\\(", &all),
    ] {
        assert_eq!(&launches_found(&run(&["--kernel-name-exclude", filter])), found, "--kernel-name-exclude {filter}");
    }
}

#[test]
fn kernel_name_exclude_runs_those_kernels_unchecked_and_says_so() {
    let o = run(&["--kernel-name-exclude", "kns=first"]);
    assert_eq!(launches_found(&o), vec![0, 2, 3, 5], "{:#}", o.report);
    assert_eq!(
        coverage(&o),
        vec![line("_Z5firstPi", 2, Some("excluded by --kernel-name-exclude")), line("_Z6secondPi", 4, None)]
    );
    assert!(o.stderr.contains("1 excluded by --kernel-name-exclude (e.g. first)"), "{}", o.stderr);
}

#[test]
fn the_launch_window_counts_launches_the_filters_let_through() {
    let o = run(&["--kernel-name", "kns=second", "--launch-skip", "1", "--launch-count", "2"]);
    // second's launches are 0, 2, 3, 5: the first skipped, the next two checked, the last past the count.
    assert_eq!(launches_found(&o), vec![2, 3], "{:#}", o.report);
    assert_eq!(
        coverage(&o),
        vec![
            line("_Z5firstPi", 2, Some("not selected by --kernel-name")),
            line("_Z6secondPi", 1, Some("past --launch-count")),
            line("_Z6secondPi", 1, Some("skipped by --launch-skip")),
            line("_Z6secondPi", 2, None),
        ]
    );
    // Without filters every launch counts; the short options too.
    assert_eq!(launches_found(&run(&["-s", "4"])), vec![4, 5]);
    assert_eq!(launches_found(&run(&["-c", "1"])), vec![0]);
}

#[test]
fn print_limit_prints_the_first_findings_and_the_json_keeps_all() {
    let o = run(&["--print-limit", "1"]);
    assert_eq!(o.stderr.matches("Out-of-bounds").count(), 1, "{}", o.stderr);
    assert_eq!(o.report["errors"].as_array().unwrap().len(), 6);
    let note = "--print-limit 1: 5 more findings not printed (the JSON report has all 6)";
    assert!(o.report["notes"].to_string().contains(note), "{:#}", o.report["notes"]);
    assert!(o.stderr.contains(note), "{}", o.stderr);
    assert!(o.stderr.contains("ERROR SUMMARY: 6 errors"), "all counted: {}", o.stderr);
    let all = run(&["--print-limit", "0"]);
    assert_eq!(all.stderr.matches("Out-of-bounds").count(), 6, "{}", all.stderr);
}

#[test]
fn error_exitcode_counts_only_what_was_checked() {
    let o = run(&["--error-exitcode", "7"]);
    assert_eq!(o.code, Some(7));
    let o = run(&["--error-exitcode", "7", "--print-limit", "1"]);
    assert_eq!(o.code, Some(7), "findings not printed still count");
    let o = run(&["--error-exitcode", "7", "--launch-skip", "6"]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert!(launches_found(&o).is_empty());
}

#[test]
fn log_file_names_take_the_pid_and_variables() {
    let logs = dir().join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    let pattern = format!("{}/cs.%p.%q{{CS_TAG}}.%%.log", logs.display());
    let tag = Path::new("seven");
    let o = fake_driver::gpusan_run(dir(), &["--log-file", &pattern], &[&prog()], &[("CS_TAG", tag)]);
    assert!(!o.stderr.contains("ERROR SUMMARY"), "the report went to the file: {}", o.stderr);
    let written: Vec<String> = std::fs::read_dir(&logs)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("cs."))
        .collect();
    assert_eq!(written.len(), 1, "{written:?}");
    let name = &written[0];
    let pid = name.strip_prefix("cs.").and_then(|n| n.strip_suffix(".seven.%.log")).unwrap();
    assert!(pid.parse::<u32>().is_ok(), "{name}");
    let text = std::fs::read_to_string(logs.join(name)).unwrap();
    assert!(text.contains("ERROR SUMMARY: 6 errors"), "{text}");

    let bad = run_with(&["--log-file", "x.%d.log"], &[&prog()]);
    assert_ne!(bad.code, Some(0));
    assert!(bad.stderr.contains("`%` followed by `d`"), "{}", bad.stderr);
}

#[test]
fn application_only_checks_the_application_and_not_its_children() {
    let child = format!("{} && true", prog());
    let o = run_with(&["--target-processes", "all"], &["sh", "-c", &child]);
    assert_eq!(launches_found(&o).len(), 6, "{}", o.stderr);
    let o = run_with(&["--target-processes", "application-only"], &["sh", "-c", &child]);
    assert!(o.stdout.contains("cs done rc="), "the child still runs: {}", o.stdout);
    assert!(launches_found(&o).is_empty(), "{:#}", o.report);
    assert_eq!(o.report["cuda_processes"], 0, "{:#}", o.report);
    let o = run_with(&["--target-processes", "application-only"], &[&prog()]);
    assert_eq!(launches_found(&o).len(), 6, "the application itself is checked: {}", o.stderr);
}

#[test]
fn show_backtrace_and_demangle_shape_the_text() {
    let o = run(&["--print-limit", "1"]);
    assert!(o.stderr.contains("Host Frame"), "{}", o.stderr);
    assert!(o.stderr.contains("second(int*)"), "{}", o.stderr);
    for shown in ["no", "device"] {
        let o = run(&["--print-limit", "1", "--show-backtrace", shown]);
        assert!(!o.stderr.contains("Host Frame"), "{shown}: {}", o.stderr);
        let json = o.report["errors"][0].to_string();
        assert!(json.contains("\"function\""), "the JSON keeps its frames: {json}");
    }
    let o = run(&["--print-limit", "1", "--show-backtrace", "host"]);
    assert!(o.stderr.contains("Host Frame"), "{}", o.stderr);
    let o = run(&["--print-limit", "1", "--demangle", "simple"]);
    assert!(o.stderr.contains("second") && !o.stderr.contains("second(int*)"), "{}", o.stderr);
    let o = run(&["--print-limit", "1", "--demangle", "no"]);
    assert!(o.stderr.contains("_Z6secondPi"), "{}", o.stderr);
    assert_eq!(o.report["errors"][0]["details"]["kernel"], "second(int*)", "the JSON keeps its names");
}

fn gpusan(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_gpusan")).args(args).output().unwrap()
}

#[test]
fn tools_and_options_gpusan_lacks_are_errors_that_say_so() {
    for (args, says) in [
        (&["--tool", "racecheck"][..], "--tool racecheck: gpusan has no racecheck yet"),
        (&["--tool", "initcheck"][..], "--tool initcheck: gpusan has no initcheck yet"),
        (&["--tool", "synccheck"][..], "--tool synccheck: gpusan has no synccheck yet"),
        (
            &["--save", "x.rec"][..],
            "compute-sanitizer's --save is not supported by gpusan: write the findings with --report-json",
        ),
        (&["--xml"][..], "compute-sanitizer's --xml is not supported by gpusan"),
        (&["--read", "x.rec"][..], "compute-sanitizer's --read is not supported by gpusan: a run's record is its --report-json FILE: `gpusan report show FILE` prints it again"),
        (&["--kernel-name", "oob"][..], "--kernel-name oob: `oob` is no key=value pair"),
        (&["--tool", "memcheck", "--mode", "api"][..], "--tool memcheck is --mode check"),
    ] {
        let mut argv = vec!["run"];
        argv.extend_from_slice(args);
        argv.extend_from_slice(&["--", "true"]);
        let out = gpusan(&argv);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    let out = gpusan(&["run", "--no-such-option", "--", "true"]);
    assert_eq!(out.status.code(), Some(2), "clap's own error");
    assert!(String::from_utf8_lossy(&out.stderr).contains("unexpected argument '--no-such-option'"));
}

#[test]
fn the_program_may_follow_the_options_without_a_separator() {
    let out = Command::new(env!("CARGO_BIN_EXE_gpusan"))
        .args(["run", "--tool", "memcheck", "--print-limit", "2", "sh", "-c", "echo ran $0 $1", "--tool", "x"])
        .env("GPUSAN_INJECT_LIB", fake_driver::inject_lib())
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ran --tool x\n", "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0));
}
