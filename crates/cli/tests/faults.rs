//! GPU faults are findings (issue 13): a kernel that faults, checked or not, is reported
//! with the error, the call that returned it, and the kernels launched since the last
//! synchronization that succeeded; once per context, however many calls fail after; the
//! program's own error passes through; `ERROR SUMMARY: 0 errors` never follows a fault.
//! A fault learnt by polling, or never learnt, is found all the same; what instrumented
//! kernels recorded before it is reported even when the program aborts on the error.
//! With the fake driver (`coverage_prog fault`, `faults_prog`: its kernel `fault_me` faults).

mod fake_driver;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use fake_driver::Outcome;

fn dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = fake_driver::build("faults", &[("coverage_prog", "coverage_prog.c"), ("faults_prog", "faults_prog.c")]);
        // The Compute Sanitizer API's stand-in, for `runtime_only`.
        let sanitizer = d.join("sanitizer");
        std::fs::create_dir_all(&sanitizer).unwrap();
        fake_driver::run(
            std::process::Command::new("cc")
                .args(["-shared", "-fPIC", "-o"])
                .args([sanitizer.join("libsanitizer-public.so"), fake_driver::sources().join("libsanitizer.c")]),
        );
        d
    })
}

fn run(options: &[&str]) -> Outcome {
    run_prog("coverage_prog", "fault", options)
}

fn run_prog(prog: &str, scenario: &str, options: &[&str]) -> Outcome {
    let d = dir();
    let prog = d.join(prog);
    let cache = d.join("cache");
    let sanitizer = d.join("sanitizer/libsanitizer-public.so");
    let env = [("GPUSAN_CACHE_DIR", cache.as_path()), ("GPUSAN_SANITIZER_LIB", sanitizer.as_path())];
    fake_driver::gpusan_run(d, options, &[prog.to_str().unwrap(), scenario], &env)
}

/// The details of the report's errors of `kind`.
fn details<'a>(o: &'a Outcome, kind: &str) -> Vec<&'a serde_json::Value> {
    let errors = o.report["errors"].as_array().map(Vec::as_slice).unwrap_or_default();
    errors.iter().filter(|e| e["kind"] == kind).map(|e| &e["details"]).collect()
}

fn has_main(stack: &serde_json::Value) -> bool {
    stack.as_array().is_some_and(|frames| frames.iter().any(|f| f["function"] == "main"))
}

#[test]
fn a_fault_is_one_finding_naming_the_kernels_since_the_last_synchronization() {
    for mode in ["api", "check"] {
        let o = run(&["--mode", mode, "--error-exitcode", "7"]);
        // The program saw the driver's errors as they were.
        assert!(o.stdout.contains("launch=700") && o.stdout.contains("sync=700 sync=700"), "{mode}: {}", o.stdout);
        assert_eq!(o.kinds(), vec!["kernel_fault"], "{mode}: {:#}", o.report);
        assert_eq!(o.count("kernel_fault"), 1, "{mode}: once per context");
        assert_eq!(o.code, Some(7), "{mode}: --error-exitcode applies");
        let d = &o.report["errors"][0]["details"];
        assert_eq!(d["error"], "CUDA_ERROR_ILLEGAL_ADDRESS", "{d:#}");
        assert_eq!(d["api"], "cuLaunchKernel", "the first call that returned it: {d:#}");
        let kernels: Vec<(String, serde_json::Value, serde_json::Value)> = d["kernels"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| (k["kernel"].as_str().unwrap().to_string(), k["grid"].clone(), k["block"].clone()))
            .collect();
        assert_eq!(
            kernels,
            vec![
                ("fault_me".to_string(), serde_json::json!([2, 1, 1]), serde_json::json!([64, 1, 1])),
                ("zeta".to_string(), serde_json::json!([1, 1, 1]), serde_json::json!([32, 1, 1]))
            ],
            "zeta's first run was synchronized: {d:#}"
        );
        assert!(o.stderr.contains("GPU fault: CUDA_ERROR_ILLEGAL_ADDRESS (700)"), "{}", o.stderr);
        assert!(o.stderr.contains("ERROR SUMMARY: 1 error"), "{}", o.stderr);
        // Where the program first launched the kernel and learnt of the fault: its own frames.
        for stack in ["launch_stack", "call_stack"] {
            let frames = d[stack].as_array().cloned().unwrap_or_default();
            assert!(frames.iter().any(|f| f["function"] == "main"), "{mode} {stack}: {frames:?}");
        }
        // Each kernel's own: where it was first launched.
        for k in d["kernels"].as_array().unwrap() {
            assert!(has_main(&k["launch_stack"]), "{mode}: {k:#}");
        }
        let shown = "First launched at (a kernel's stack is taken at its first launch only)";
        assert!(o.stderr.contains(shown), "{mode}: {}", o.stderr);
    }
}

#[test]
fn what_checked_kernels_recorded_before_a_fault_is_reported_when_the_program_aborts() {
    let o = run_prog("faults_prog", "abort", &["--mode", "check", "--error-exitcode", "7"]);
    assert!(o.stdout.contains("sync=700 rc=0"), "{}", o.stdout);
    assert!(o.stderr.contains("killed by signal 6"), "the program aborted: {}", o.stderr);
    assert_eq!(o.kinds(), vec!["kernel_fault", "out_of_bounds_write"], "{:#}", o.report);
    assert_eq!(o.count("out_of_bounds_write"), 1, "{:#}", o.report);
    let d = details(&o, "out_of_bounds_write");
    assert_eq!(d[0]["kernel"], "zeta", "{:#}", o.report);
    assert_eq!(o.code, Some(7));
}

#[test]
fn a_fault_learnt_by_polling_is_one_finding() {
    for (scenario, api) in [("stream_query", "cuStreamQuery"), ("event_query", "cuEventQuery")] {
        let o = run_prog("faults_prog", scenario, &["--mode", "api"]);
        assert!(o.stdout.contains("query=700 rc=0"), "{scenario}: the program's own result: {}", o.stdout);
        assert_eq!(o.code, Some(3), "{scenario}: the program's exit code without --error-exitcode");
        assert_eq!(o.count("kernel_fault"), 1, "{scenario}: {:#}", o.report);
        let d = details(&o, "kernel_fault");
        assert_eq!(d[0]["api"], api, "{scenario}: {:#}", d[0]);
        assert_eq!(d[0]["kernels"][0]["kernel"], "fault_me", "{scenario}: {:#}", d[0]);
        assert!(has_main(&d[0]["call_stack"]), "{scenario}: {:#}", d[0]);
    }
}

#[test]
fn a_fault_the_program_never_learns_of_is_found_at_exit() {
    let o = run_prog("faults_prog", "unchecked", &["--mode", "api", "--error-exitcode", "7"]);
    assert!(o.stdout.contains("launched rc=0"), "{}", o.stdout);
    assert_eq!(o.count("kernel_fault"), 1, "{:#}", o.report);
    let d = details(&o, "kernel_fault");
    assert!(d[0]["api"].as_str().unwrap().contains("at exit"), "{:#}", d[0]);
    assert_eq!(d[0]["kernels"][0]["kernel"], "fault_me", "{:#}", d[0]);
    assert_eq!(d[0]["kernels"][0]["grid"], serde_json::json!([2, 1, 1]), "{:#}", d[0]);
    assert!(!o.stderr.contains("ERROR SUMMARY: 0 errors"), "{}", o.stderr);
    assert_eq!(o.code, Some(7));
}

#[test]
fn each_context_that_faults_is_one_finding() {
    let o = run_prog("faults_prog", "two_contexts", &["--mode", "api"]);
    assert_eq!(o.stdout.matches("sync=700").count(), 6, "{}", o.stdout);
    assert_eq!(o.count("kernel_fault"), 2, "{:#}", o.report);
    assert_eq!(o.code, Some(0), "the program's own exit code");
}

#[test]
fn only_a_synchronization_of_its_stream_or_context_clears_a_kernel_from_the_suspects() {
    let o = run_prog("faults_prog", "streams", &["--mode", "api"]);
    assert!(o.stdout.contains("sync=700 rc=0"), "{}", o.stdout);
    let d = details(&o, "kernel_fault");
    assert_eq!(d.len(), 1, "{:#}", o.report);
    let kernels: Vec<&str> =
        d[0]["kernels"].as_array().unwrap().iter().map(|k| k["kernel"].as_str().unwrap()).collect();
    assert_eq!(kernels, vec!["alpha", "fault_me"], "zeta's stream was synchronized, theirs was not: {:#}", d[0]);
    assert_eq!(d[0]["kernels"][1]["block"], serde_json::json!([64, 1, 1]), "{:#}", d[0]);
}

#[test]
fn a_faulted_contexts_memory_is_not_reported_as_leaked() {
    // `streams` never frees its 64 bytes: after the fault it could not have.
    let o = run_prog("faults_prog", "streams", &["--mode", "api", "--leak-check", "full"]);
    assert_eq!(o.kinds(), vec!["kernel_fault"], "{:#}", o.report);
    let notes = o.report["notes"].to_string();
    assert!(notes.contains("1 allocation(s) of a context where a kernel faulted"), "{notes}");
}

#[test]
fn a_fault_only_a_runtime_call_returned_is_found_through_the_runtime_api_callbacks() {
    let o = run_prog("faults_prog", "runtime_only", &["--mode", "api", "--error-exitcode", "7"]);
    assert!(o.stdout.contains("runtime=700"), "the program's own result: {}{}", o.stdout, o.stderr);
    assert_eq!(o.count("kernel_fault"), 1, "{:#}", o.report);
    let d = details(&o, "kernel_fault");
    assert_eq!(d[0]["api"], "cudaFake", "the runtime call's name: {:#}", d[0]);
    assert_eq!(o.code, Some(7));
}

#[test]
fn a_graph_launch_is_among_the_suspects() {
    let o = run_prog("faults_prog", "graph", &["--mode", "api"]);
    assert!(o.stdout.contains("sync=700 rc=0"), "{}", o.stdout);
    let d = details(&o, "kernel_fault");
    assert_eq!(d.len(), 1, "{:#}", o.report);
    let kernels = d[0]["kernels"].as_array().unwrap();
    assert_eq!(kernels.len(), 1, "the captured launch did not run; the graph did: {:#}", d[0]);
    let exec = o.stdout.split("exec=").nth(1).and_then(|t| t.split_whitespace().next()).unwrap();
    let exec = u64::from_str_radix(exec.trim_start_matches("0x"), 16).unwrap();
    assert_eq!(kernels[0]["graph"], exec, "{:#}", d[0]);
    assert!(has_main(&kernels[0]["launch_stack"]), "{:#}", d[0]);
    assert!(o.stderr.contains(&format!("the kernels of CUDA graph {exec:#x} (cuGraphLaunch)")), "{}", o.stderr);
}
