//! GPU faults are findings (issue 13): a kernel that faults, checked or not, is reported
//! with the error, the call that returned it, and the kernels launched since the last
//! synchronization that succeeded; once per context, however many calls fail after; the
//! program's own error passes through; `ERROR SUMMARY: 0 errors` never follows a fault.
//! With the fake driver (`coverage_prog fault`: its kernel `fault_me` faults).

mod fake_driver;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use fake_driver::Outcome;

fn dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| fake_driver::build("faults", &[("coverage_prog", "coverage_prog.c")]))
}

fn run(options: &[&str]) -> Outcome {
    let d = dir();
    let prog = d.join("coverage_prog");
    let cache = d.join("cache");
    fake_driver::gpusan_run(d, options, &[prog.to_str().unwrap(), "fault"], &[("GPUSAN_CACHE_DIR", &cache)])
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
    }
}
