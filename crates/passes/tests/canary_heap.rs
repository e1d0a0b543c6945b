//! The device-heap cases of `tests/cases/` as the pinned nvcc compiles them, rewritten by
//! `canary_heap` (canary mode's one rewrite): every `malloc` and `free` call of their
//! kernels goes to gpusan's functions, and the module assembles with the pinned ptxas.
//! Whether an overflow is then found is the GPU's to show (`bench/reliability/canary_gmod.sh`).

mod common;

use gpusan_passes::canary_heap::{self, CanaryHeap};

const CASES: &[&str] = &[
    "check_device_heap_overflow",
    "check_device_heap_double_free",
    "check_device_heap_invalid_free",
    "check_device_heap_use_after_free",
    "check_clean_device_heap",
    "check_clean_device_heap_loops",
];

#[test]
fn device_heap_cases_are_rewritten_and_assemble() {
    let dir = common::scratch("canary-heap");
    for case in CASES {
        let text = common::case_ptx(case, &dir);
        // nvcc writes a call's callee on a line of its own.
        let calls = text.lines().filter(|l| matches!(l.trim(), "malloc," | "free,")).count();
        assert!(calls > 0, "{case}: no heap call in its PTX");
        let rewritten = gpusan_passes::instrument(&text, &CanaryHeap).unwrap_or_else(|e| panic!("{case}: {e}"));
        let renamed: u32 = rewritten.report.functions.iter().map(|f| f.sites).sum();
        assert_eq!(renamed as usize, calls, "{case}: every call renamed");
        // Left: the two calls inside gpusan's own functions.
        assert_eq!(rewritten.ptx.matches(", malloc, (").count(), 1, "{case}");
        assert!(rewritten.ptx.contains(canary_heap::SECRET_SYMBOL), "{case}");
        let out_ptx = dir.join(format!("{case}.canary.ptx"));
        std::fs::write(&out_ptx, &rewritten.ptx).unwrap();
        let cubin = dir.join(format!("{case}.cubin"));
        if let Err(e) = gpusan_testkit::assemble(&gpusan_testkit::ptxas(), &out_ptx, &cubin) {
            panic!("{case}: ptxas refused the rewritten module:\n{e}");
        }
    }
}
