//! gpusan's C boundary under `gpusan run`, with the fake driver (tests/fake_cuda/: `prog
//! link SCENARIO`, the sanitizer stand-in): a panic inside gpusan's own code, made on
//! purpose at a named place (`GPUSAN_TEST_PANIC`, debug builds of the library), never
//! reaches the program. Without the boundary such a panic is an abort of the program at
//! the `extern "C"` function it unwinds into (SIGABRT, "panic in a function that cannot
//! unwind"), a report lost or a silent stop. The stand-ins, `dlsym` and `cuGetProcAddress`
//! are `run.rs`'s `a_panic_inside_gpusan_never_reaches_the_program`; these are the other
//! entries and what follows an internal error.

mod fake_driver;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use fake_driver::Outcome;

/// The fake driver, the program, and the sanitizer stand-in in `sanitizer/`.
fn dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = fake_driver::build("boundary", &[("prog", "prog.c")]);
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
