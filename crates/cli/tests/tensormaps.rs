//! Tensor maps bounded where they are made (issue 14), with the fake driver
//! (`tensormap_prog SCENARIO`): a map whose declared tensor runs past its allocation, or made
//! on freed memory, is reported, through each door a program gets `cuTensorMapEncode*` by;
//! a map exactly covering its allocation is silent; memory gpusan never saw allocated is
//! counted, not judged; every call reaches the driver unchanged.

mod fake_driver;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use fake_driver::Outcome;

fn dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| fake_driver::build("tensormaps", &[("tensormap_prog", "tensormap_prog.c")]))
}

/// The program's own output natively: what each call returned and wrote.
fn native(scenario: &str) -> String {
    let out = std::process::Command::new(dir().join("tensormap_prog"))
        .arg(scenario)
        .env("LD_LIBRARY_PATH", dir())
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The lines that do not depend on where memory was allocated: the results and dims.
fn calls(stdout: &str) -> Vec<String> {
    stdout.lines().map(|l| l.split(' ').filter(|w| !w.starts_with("address=")).collect::<Vec<_>>().join(" ")).collect()
}

/// `gpusan run --mode MODE -- tensormap_prog SCENARIO`, whose calls must have gone through
/// as they do natively.
fn run(mode: &str, scenario: &str) -> Outcome {
    let prog = dir().join("tensormap_prog");
    let o = fake_driver::gpusan_run(dir(), &["--mode", mode], &[prog.to_str().unwrap(), scenario], &[]);
    assert!(o.stdout.contains(&format!("{scenario} done rc=0")), "{scenario}: {}{}", o.stdout, o.stderr);
    assert_eq!(calls(&o.stdout), calls(&native(scenario)), "{scenario}: the calls changed under gpusan");
    o
}

fn counter(o: &Outcome, name: &str) -> u64 {
    o.report["counters"][name].as_u64().unwrap_or(0)
}

#[test]
fn maps_within_their_allocation_are_silent() {
    for scenario in ["exact", "im2col_exact", "wide_exact", "replace_ok"] {
        for mode in ["api", "check"] {
            let o = run(mode, scenario);
            assert!(o.kinds().is_empty(), "{scenario} {mode}: {:#}", o.report);
            assert!(counter(&o, "tensor_maps_judged") >= 1, "{scenario} {mode}: {:#}", o.report);
            assert_eq!(counter(&o, "tensor_maps_not_judged"), 0, "{scenario} {mode}: {:#}", o.report);
        }
    }
}

#[test]
fn a_map_one_element_or_one_row_past_its_allocation_is_reported() {
    for (scenario, api, extent, past) in [
        ("element_over", "cuTensorMapEncodeTiled", 15 * 64 + 68, 4),
        ("row_over", "cuTensorMapEncodeTiled", 16 * 64 + 64, 64),
        ("im2col_over", "cuTensorMapEncodeIm2col", 16 + 3 * 16 + 8 * 64, 64),
        ("wide_over", "cuTensorMapEncodeIm2colWide", 16 + 3 * 16 + 8 * 64, 64),
        ("getproc_over", "cuTensorMapEncodeTiled", 15 * 64 + 68, 4),
        ("dlsym_over", "cuTensorMapEncodeTiled", 15 * 64 + 68, 4),
        ("replace_over", "cuTensorMapReplaceAddress", 1024, 512),
    ] {
        let o = run("api", scenario);
        assert_eq!(o.kinds(), ["tensor_map_out_of_bounds"], "{scenario}: {:#}", o.report);
        assert_eq!(o.count("tensor_map_out_of_bounds"), 1, "{scenario}: {:#}", o.report);
        let e = &o.report["errors"][0]["details"];
        assert_eq!(e["api"], api, "{scenario}: {e:#}");
        assert_eq!(e["operand"], "global_address", "{scenario}: {e:#}");
        assert_eq!(e["size"], extent, "{scenario}: {e:#}");
        let alloc = &e["nearest"]["allocation"];
        let base = u64::from_str_radix(alloc["base"].as_str().unwrap().trim_start_matches("0x"), 16).unwrap();
        let address = u64::from_str_radix(e["address"].as_str().unwrap().trim_start_matches("0x"), 16).unwrap();
        let end = base + alloc["size"].as_u64().unwrap();
        assert_eq!(address + extent - end, past, "{scenario}: {e:#}");
        assert!(o.stderr.contains("Out-of-bounds tensor map of"), "{scenario}: {}", o.stderr);
    }
}

#[test]
fn a_map_on_freed_memory_is_a_use_after_free() {
    let o = run("api", "freed");
    assert_eq!(o.kinds(), ["tensor_map_use_after_free"], "{:#}", o.report);
    assert_eq!(o.report["errors"][0]["details"]["nearest"]["allocation"]["freed"], true, "{:#}", o.report);
}

#[test]
fn memory_gpusan_did_not_allocate_and_maps_it_did_not_see_made_are_counted_not_judged() {
    for scenario in ["unknown", "replace_copy"] {
        let o = run("api", scenario);
        assert!(o.kinds().is_empty(), "{scenario}: {:#}", o.report);
        assert_eq!(counter(&o, "tensor_maps_not_judged"), 1, "{scenario}: {:#}", o.report);
    }
}

#[test]
fn calls_the_driver_refuses_are_passed_on_and_not_judged() {
    let o = run("api", "refused");
    assert!(o.stdout.contains("rank0 r=1") && o.stdout.contains("rank6 r=1"), "{}", o.stdout);
    assert!(o.kinds().is_empty(), "{:#}", o.report);
    assert!(o.report["counters"].get("tensor_maps_judged").is_none(), "{:#}", o.report);
}
