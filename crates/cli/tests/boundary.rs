//! gpusan's C boundary under `gpusan run`, with the fake driver (tests/fake_cuda/: `prog
//! link SCENARIO`, the sanitizer stand-in): a panic inside gpusan's own code, made on
//! purpose at a named place (`GPUSAN_TEST_PANIC`, debug builds of the library), never
//! reaches the program. Without the boundary such a panic is an abort of the program at
//! the `extern "C"` function it unwinds into (SIGABRT, "panic in a function that cannot
//! unwind"), a report lost or a silent stop. The stand-ins, `dlsym` and `cuGetProcAddress`
//! are `run.rs`'s `a_panic_inside_gpusan_never_reaches_the_program`, and, through every
//! door with what each call answers compared with a native run, `boundary_prog`'s tests
//! below; these are the other entries and what follows an internal error.

mod fake_driver;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use fake_driver::Outcome;

/// The fake driver, the program, and the sanitizer stand-in in `sanitizer/`.
fn dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = fake_driver::build("boundary", &[("prog", "prog.c"), ("boundary_prog", "boundary_prog.c")]);
        std::fs::create_dir_all(dir.join("sanitizer")).unwrap();
        fake_driver::run(
            Command::new("cc")
                .args(["-shared", "-fPIC", "-o"])
                .args([dir.join("sanitizer/libsanitizer-public.so"), fake_driver::sources().join("libsanitizer.c")]),
        );
        dir
    })
}

/// `gpusan run OPTIONS -- prog link SCENARIO` with gpusan made to panic at `place`.
fn run_panicking(place: &str, options: &[&str], scenario: &str) -> Outcome {
    let d = dir();
    let (prog, lib) = (d.join("prog"), d.join("sanitizer/libsanitizer-public.so"));
    let env = [("GPUSAN_SANITIZER_LIB", lib.as_path()), ("GPUSAN_TEST_PANIC", Path::new(place))];
    fake_driver::gpusan_run(d, options, &[prog.to_str().unwrap(), "link", scenario], &env)
}

/// A panic in gpusan's code at any of its other entries from C (the Sanitizer API's
/// `InitializeInjection` and runtime-API callback, the exit handler that reads what kernels
/// left, the final report at exit) never reaches the program: the program ends as natively
/// and its output carries nothing of gpusan's panic; the report names the internal error,
/// the entry it happened in and where.
#[test]
fn a_panic_at_any_entry_into_gpusan_is_a_note_not_a_crash() {
    let cases = [
        ("runtime_refused", "InitializeInjection", "in InitializeInjection at "),
        ("runtime_refused", "runtime_callback", "in a runtime API callback at "),
        ("abi", "late_exit", "in exit at "),
        ("alloc_calls", "exit", "in exit at "),
    ];
    for (scenario, place, entry) in cases {
        let o = run_panicking(place, &[], scenario);
        assert_eq!(o.code, Some(0), "{place}: {}{}", o.stdout, o.stderr);
        assert!(!o.stderr.contains("panicked"), "{place}: gpusan's panic reached the program's output: {}", o.stderr);
        let notes = o.report["notes"].to_string();
        assert!(notes.contains(&format!("gpusan internal error ({entry}")), "{place}: {notes}");
        assert!(notes.contains(&format!("GPUSAN_TEST_PANIC at {place}")), "{place}: {notes}");
    }
}

/// A panic while gpusan has pushed another context to give quarantined memory back in it
/// (`in_context`) pops it all the same: the program's own free, made after the panic, runs
/// in the program's context (the fake driver refuses a free from the wrong context, 201).
#[test]
fn a_panic_while_gpusan_switched_context_leaves_the_programs_context() {
    let o = run_panicking("in_context", &["--quarantine-bytes", "1500"], "quarantine_contexts");
    assert_eq!(o.code, Some(0), "64: a free from the wrong context\n{}{}", o.stdout, o.stderr);
    assert!(o.report["notes"].to_string().contains("GPUSAN_TEST_PANIC at in_context"), "{:#}", o.report);
}

/// After an internal error gpusan stops following the program, so nothing is judged
/// against what it knew before: the frees it no longer saw are not reported as leaks at
/// exit (the run says what went unchecked instead).
#[test]
fn after_an_internal_error_nothing_is_judged_against_stale_bookkeeping() {
    let o = run_panicking("cuMemFree_v2", &["--leak-check", "full"], "alloc_calls");
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
    assert_eq!(o.kinds(), Vec::<String>::new(), "{:#}", o.report);
    let notes = o.report["notes"].to_string();
    assert!(notes.contains("gpusan internal error (in cuMemFree_v2 at "), "{notes}");
}

/// What `boundary_prog DOOR` prints natively: each call's answer (a refused free's and an
/// unknown name's error among them) and how often the fake driver was reached.
fn native(door: &str) -> String {
    let out = Command::new(dir().join("boundary_prog")).arg(door).output().unwrap();
    assert_eq!(out.status.code(), Some(7), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// `gpusan run -- boundary_prog DOOR`, with gpusan made to panic at `place` if given.
fn run_prog(door: &str, place: Option<&str>) -> Outcome {
    let d = dir();
    let (prog, lib) = (d.join("boundary_prog"), d.join("sanitizer/libsanitizer-public.so"));
    let mut env = vec![("GPUSAN_SANITIZER_LIB", lib.as_path())];
    env.extend(place.map(|p| ("GPUSAN_TEST_PANIC", Path::new(p))));
    fake_driver::gpusan_run(d, &[], &[prog.to_str().unwrap(), door], &env)
}

/// A panic in a stand-in (before or after its real call) or in a lookup (`dlsym`, also for
/// `RTLD_NEXT`, `cuGetProcAddress`), through each door the program finds the driver by:
/// every call of the program gets what it gets natively, the driver's refusals included,
/// each reaching the driver once (one allocation, five lookups); the program ends with its
/// own exit code, prints nothing of gpusan's panic, and the report names the entry.
#[test]
fn a_panic_in_a_stand_in_or_lookup_changes_nothing_the_program_sees() {
    let mut cases = Vec::new();
    for door in ["link", "dlsym", "getproc"] {
        for place in ["cuMemAlloc_v2", "cuMemAlloc_v2:after", "cuMemcpyHtoD_v2", "cuMemFree_v2:after"] {
            cases.push((door, place.split(':').next().unwrap(), place));
        }
    }
    cases.extend([
        ("dlsym", "dlsym", "dlsym"),
        ("next", "dlsym", "dlsym"),
        ("getproc", "dlsym", "dlsym"),
        ("getproc", "cuGetProcAddress", "cuGetProcAddress"),
    ]);
    for (door, entry, place) in cases {
        let what = format!("{door}, panic at {place}");
        let o = run_prog(door, Some(place));
        assert_eq!(o.code, Some(7), "{what}: {}{}", o.stdout, o.stderr);
        assert_eq!(o.stdout, native(door), "{what}: {}", o.stderr);
        assert!(!o.stderr.contains("panicked"), "{what}: {}", o.stderr);
        let notes = o.report["notes"].to_string();
        assert!(notes.contains(&format!("gpusan internal error (in {entry} at crates/inject/src/")), "{what}: {notes}");
        assert!(notes.contains(&format!("GPUSAN_TEST_PANIC at {place}")), "{what}: {notes}");
    }
}

/// A panic while a lock is held (the findings' collector, as a finding is recorded) poisons
/// it; taking it again at exit does not panic: the report is written, with the finding made
/// before the panic and the note, and nothing judged after it (the refused copy the
/// Sanitizer API reports later).
#[test]
fn a_panic_holding_a_lock_keeps_what_was_found_before_it() {
    let o = run_prog("link", Some("report"));
    assert_eq!(o.code, Some(7), "{}{}", o.stdout, o.stderr);
    assert_eq!(o.stdout, native("link"));
    assert_eq!(o.kinds(), ["invalid_free"], "{:#}", o.report);
    let notes = o.report["notes"].to_string();
    assert!(notes.contains("gpusan internal error (in cuMemFree_v2 at crates/inject/src/state.rs:"), "{notes}");
}

/// A panic while the report's call stacks are named at exit (the program's debug
/// information, read by a third party's parser) costs those frames, not the findings.
#[test]
fn a_panic_naming_frames_at_exit_keeps_the_findings() {
    let o = run_prog("link", Some("symbolize"));
    assert_eq!(o.code, Some(7), "{}{}", o.stdout, o.stderr);
    assert_eq!(o.kinds(), ["invalid_free", "invalid_pitch"], "{:#}", o.report);
    assert!(o.report["notes"].to_string().contains("GPUSAN_TEST_PANIC at symbolize"), "{:#}", o.report);
}

/// Every stack in `v` (arrays of frames under a key ending in `_stack`), by function name.
fn stacks(v: &serde_json::Value, out: &mut Vec<Vec<String>>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, v) in m {
                match v.as_array() {
                    Some(frames) if k.ends_with("_stack") => {
                        out.push(frames.iter().map(|f| f["function"].as_str().unwrap_or("?").to_string()).collect())
                    }
                    _ => stacks(v, out),
                }
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|v| stacks(v, out)),
        _ => {}
    }
}

/// The boundary's frames (stand-in, `contain`, `catch_unwind`, handler, bookkeeping) are
/// gpusan's, not the program's: a stack in the report starts where the program called the
/// driver (for cudart's refusals, where the Sanitizer API called gpusan).
#[test]
fn the_programs_stacks_start_at_its_own_frames() {
    let o = run_prog("link", None);
    assert_eq!(o.kinds(), ["invalid_free", "invalid_pitch"], "{:#}", o.report);
    let mut all = Vec::new();
    stacks(&o.report, &mut all);
    assert_eq!(all.len(), 3, "an allocation's, a free's and a refused copy's: {all:#?}");
    for s in &all {
        assert!(matches!(s[0].as_str(), "main" | "fake_runtime_call"), "{all:#?}");
        assert!(s.iter().any(|f| f == "main"), "{all:#?}");
    }
}
