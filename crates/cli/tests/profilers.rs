//! A CUDA profiler (CUPTI, as torch.profiler and Nsight use it) may record no kernels while
//! gpusan's Compute Sanitizer API is on (seen on the H100: torch.profiler's count under
//! `gpusan run` was 0): a run whose process switched a profiler on says so; one that only
//! loaded CUPTI (PyTorch loads it at import) or none says nothing. With the fake driver and
//! Compute Sanitizer library, a stand-in for `libcupti.so` and one for Kineto (a library
//! linked against it, loaded with RTLD_LOCAL as Python loads PyTorch's).

mod fake_driver;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

fn dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = fake_driver::build("profilers", &[("profiler_prog", "profiler_prog.c")]);
        let sanitizer = d.join("sanitizer");
        std::fs::create_dir_all(&sanitizer).unwrap();
        fake_driver::run(
            std::process::Command::new("cc")
                .args(["-shared", "-fPIC", "-o"])
                .args([sanitizer.join("libsanitizer-public.so"), fake_driver::sources().join("libsanitizer.c")]),
        );
        let cupti = d.join("cupti.c");
        std::fs::write(&cupti, "int cuptiActivityEnable(int kind) { return 40 + kind; }\n").unwrap();
        fake_driver::run(
            std::process::Command::new("cc")
                .args(["-shared", "-fPIC", "-Wl,-soname,libcupti.so.13", "-o"])
                .args([d.join("libcupti.so.13"), cupti]),
        );
        let kineto = d.join("kineto.c");
        std::fs::write(
            &kineto,
            "int cuptiActivityEnable(int);\nint start_profiler(void) { return cuptiActivityEnable(3); }\n",
        )
        .unwrap();
        fake_driver::run(
            std::process::Command::new("cc")
                .args(["-shared", "-fPIC", "-o"])
                .arg(d.join("libkineto.so"))
                .arg(kineto)
                .arg(format!("-Wl,-rpath,{}", d.display()))
                .arg(d.join("libcupti.so.13")),
        );
        d
    })
}

fn run(args: &[&str]) -> fake_driver::Outcome {
    let d = dir();
    let prog = d.join("profiler_prog");
    let kineto = d.join("libkineto.so");
    let mut program = vec![prog.to_str().unwrap()];
    if !args.is_empty() {
        program.push(kineto.to_str().unwrap());
        program.extend(args.iter().filter(|a| **a != "load"));
    }
    let sanitizer = d.join("sanitizer/libsanitizer-public.so");
    let cache = d.join("cache");
    let env = [("GPUSAN_SANITIZER_LIB", sanitizer.as_path()), ("GPUSAN_CACHE_DIR", cache.as_path())];
    fake_driver::gpusan_run(d, &["--mode", "api"], &program, &env)
}

const SAID: &str = "may record no kernels while gpusan's Compute Sanitizer API is on";

/// The profiler's call reaches CUPTI (43 is the stand-in's answer) and the note is there.
#[test]
fn a_profiler_switched_on_under_the_compute_sanitizer_api_is_said_to_record_nothing() {
    let o = run(&["start"]);
    assert!(o.stdout.contains("profiler loaded=1 started=43 rc=0"), "{}{}", o.stdout, o.stderr);
    let notes = o.report["notes"].to_string();
    assert!(notes.contains(SAID), "{notes}");
    assert!(o.stderr.contains("CUPTI"), "{}", o.stderr);
}

#[test]
fn cupti_loaded_but_never_switched_on_gets_no_note() {
    let o = run(&["load"]);
    assert!(o.stdout.contains("profiler loaded=1 started=-1 rc=0"), "{}{}", o.stdout, o.stderr);
    assert!(!o.report["notes"].to_string().contains(SAID), "{:#}", o.report);
}

#[test]
fn no_profiler_no_note() {
    let o = run(&[]);
    assert!(o.stdout.contains("profiler loaded=0 started=-1 rc=0"), "{}{}", o.stdout, o.stderr);
    assert!(!o.report["notes"].to_string().contains(SAID), "{:#}", o.report);
}
