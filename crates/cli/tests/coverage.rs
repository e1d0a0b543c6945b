//! The report's coverage (issue 13): every kernel launched, how often, and the route that
//! checked it or why it ran unchecked, with the fake driver (`coverage_prog SCENARIO`). A
//! run whose kernels went unchecked must say so in one line, and `--require-checked` makes
//! each unchecked kernel an error.

mod fake_driver;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use fake_driver::Outcome;

fn dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| fake_driver::build("coverage", &[("coverage_prog", "coverage_prog.c")]))
}

fn run(options: &[&str], scenario: &str) -> Outcome {
    let d = dir();
    let prog = d.join("coverage_prog");
    let cache = d.join(format!("cache-{scenario}"));
    let o = fake_driver::gpusan_run(d, options, &[prog.to_str().unwrap(), scenario], &[("GPUSAN_CACHE_DIR", &cache)]);
    assert!(o.stdout.contains(&format!("{scenario} done rc=0")), "{scenario}: {}{}", o.stdout, o.stderr);
    o
}

/// (name, launches, checked_by, unchecked) of each kernel in the report.
fn kernels(o: &Outcome) -> Vec<(String, u64, Option<String>, Option<String>)> {
    let list = o.report["coverage"]["kernels"].as_array().cloned().unwrap_or_default();
    let s = |v: &serde_json::Value| v.as_str().map(str::to_string);
    let mut k: Vec<_> = list
        .iter()
        .map(|k| (s(&k["name"]).unwrap(), k["launches"].as_u64().unwrap(), s(&k["checked_by"]), s(&k["unchecked"])))
        .collect();
    k.sort();
    k
}

#[test]
fn kernels_of_an_instrumented_module_are_counted_checked() {
    let o = run(&["--mode", "check"], "ptx");
    let route = Some("PTX at load".to_string());
    assert_eq!(
        kernels(&o),
        vec![("alpha".into(), 1, route.clone(), None), ("zeta".into(), 3, route, None)],
        "{:#}",
        o.report
    );
    assert!(o.stderr.contains("COVERAGE: checked 2 of 2 kernels (launches: 4 of 4)"), "{}", o.stderr);
    assert!(o.stderr.contains("ERROR SUMMARY: 0 errors\n"), "{}", o.stderr);
}

#[test]
fn machine_code_kernels_are_listed_unchecked_and_can_be_made_errors() {
    let o = run(&["--mode", "check"], "cubin");
    let why = Some("machine code only (cubin)".to_string());
    assert_eq!(kernels(&o), vec![("mc".into(), 2, None, why)], "{:#}", o.report);
    assert!(
        o.stderr.contains(
            "COVERAGE: checked 0 of 1 kernel (launches: 0 of 2); 1 unchecked: 1 machine code only (cubin) (e.g. mc)"
        ),
        "{}",
        o.stderr
    );
    assert!(
        o.stderr.contains("ERROR SUMMARY: 0 errors; no kernel launch was checked (1 kernel, 2 launches)"),
        "{}",
        o.stderr
    );
    assert!(o.kinds().is_empty(), "not an error unless asked: {:#}", o.report);
    assert_eq!(o.code, Some(0));

    let o = run(&["--mode", "check", "--require-checked", "--error-exitcode", "9"], "cubin");
    assert_eq!(o.kinds(), vec!["unchecked_launch"], "{:#}", o.report);
    assert_eq!(o.code, Some(9), "{}", o.stderr);
    assert!(
        o.stderr.contains("--require-checked: kernels launched unchecked: mc (machine code only (cubin), 2 launches)"),
        "{}",
        o.stderr
    );
    let o = run(&["--mode", "check", "--require-checked", "--error-exitcode", "9"], "ptx");
    assert_eq!((o.kinds(), o.code), (vec![], Some(0)), "every launch checked: {}", o.stderr);
}

#[test]
fn api_mode_and_unknown_handles_never_read_as_checked() {
    let o = run(&["--mode", "api"], "ptx");
    let why = Some("api mode: kernels are not instrumented (use --mode check)".to_string());
    assert_eq!(kernels(&o), vec![("alpha".into(), 1, None, why.clone()), ("zeta".into(), 3, None, why)]);
    assert!(o.stderr.contains("COVERAGE: checked 0 of 2 kernels"), "{}", o.stderr);

    let o = run(&["--mode", "check"], "ghost");
    let k = kernels(&o);
    assert_eq!(k.len(), 1, "{k:?}");
    assert_eq!((k[0].1, k[0].2.as_deref()), (1, None));
    assert!(k[0].0.contains("0x7777"), "{k:?}");
    assert_eq!(k[0].3.as_deref(), Some("its module was loaded where gpusan did not see it"));
}

/// Kernels run by graphs count once per launch of the graph, not at capture: a captured
/// launch runs nothing, and each launch of the executable graph runs every kernel node.
#[test]
fn graph_launches_count_each_kernel_node_and_captures_count_nothing() {
    let o = run(&["--mode", "check"], "graph");
    let route = Some("PTX at load".to_string());
    assert_eq!(
        kernels(&o),
        vec![("alpha".into(), 8, route.clone(), None), ("zeta".into(), 6, route, None)],
        "{:#}",
        o.report
    );
    assert!(o.stderr.contains("COVERAGE: checked 2 of 2 kernels (launches: 14 of 14)"), "{}", o.stderr);
}

/// Machine code that declares the device ABI checks itself even where gpusan kept no record
/// of its build (a program's cubin cache that outlived gpusan's): it counts as checked at
/// build time, and its record names the module's one launched kernel, demangled, not
/// `<unknown kernel>`.
#[test]
fn machine_code_with_the_device_abi_is_checked_and_its_kernel_named() {
    let o = run(&["--mode", "check"], "abi_cubin");
    let route = Some("build time".to_string());
    assert_eq!(kernels(&o), vec![("tri".into(), 2, route, None)], "{:#}", o.report);
    assert_eq!(o.kinds(), vec!["out_of_bounds_write"], "{:#}", o.report);
    let d = &o.report["errors"][0]["details"];
    assert_eq!((&d["kernel"], &d["mangled"]), (&"tri(float*, int)".into(), &"_Z3triPfi".into()), "{d:#}");
    assert!(o.stderr.contains("     at tri(float*, int)"), "{}", o.stderr);
}

/// A module unloaded, or gone with its context, keeps its kernels' launches and verdict: the
/// driver hands its handles out again, and the kernel of another module at the same handle
/// is another line.
#[test]
fn an_unloaded_module_keeps_its_launches_apart_from_its_handles_next_owner() {
    for scenario in ["unload", "context"] {
        let o = run(&["--mode", "check"], scenario);
        let checked = ("zeta".to_string(), 2, Some("PTX at load".to_string()), None);
        let unchecked = ("zeta".to_string(), 1, None, Some("machine code only (cubin)".to_string()));
        assert_eq!(kernels(&o), vec![unchecked, checked], "{scenario}: {:#}", o.report);
    }
}

/// A library kernel's function that reaches a launch without passing gpusan (a graph's
/// kernel node holds it) belongs to its library: the driver says which kernel it is, and
/// its launches count with the kernel's, checked, not as a module gpusan never saw.
#[test]
fn a_library_kernels_function_seen_only_in_a_graph_counts_with_its_library() {
    let o = run(&["--mode", "check"], "library_graph");
    assert_eq!(kernels(&o), vec![("zeta".into(), 4, Some("PTX at load".into()), None)], "{:#}", o.report);
}
