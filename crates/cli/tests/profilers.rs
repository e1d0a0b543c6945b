//! A CUDA profiler (CUPTI, as torch.profiler and Nsight load it) may record no kernels while
//! gpusan's Compute Sanitizer API is on (seen on the H100: torch.profiler's count under
//! `gpusan run` was 0): a run whose process loaded one says so, one that did not says
//! nothing. With the fake driver and Compute Sanitizer library, and an empty stand-in for
//! `libcupti.so`.

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
        let empty = d.join("empty.c");
        std::fs::write(&empty, "int cupti_stand_in;\n").unwrap();
        fake_driver::run(
            std::process::Command::new("cc").args(["-shared", "-fPIC", "-o"]).args([d.join("libcupti.so.13"), empty]),
        );
        d
    })
}

fn run(load_profiler: bool) -> fake_driver::Outcome {
    let d = dir();
    let prog = d.join("profiler_prog");
    let cupti = d.join("libcupti.so.13");
    let mut program = vec![prog.to_str().unwrap()];
    if load_profiler {
        program.push(cupti.to_str().unwrap());
    }
    let sanitizer = d.join("sanitizer/libsanitizer-public.so");
    let cache = d.join("cache");
    let env = [("GPUSAN_SANITIZER_LIB", sanitizer.as_path()), ("GPUSAN_CACHE_DIR", cache.as_path())];
    fake_driver::gpusan_run(d, &["--mode", "api"], &program, &env)
}

const SAID: &str = "may record no kernels while gpusan's Compute Sanitizer API is on";

#[test]
fn a_profiler_loaded_under_the_compute_sanitizer_api_is_said_to_record_nothing() {
    let o = run(true);
    assert!(o.stdout.contains("profiler loaded=1 rc=0"), "{}{}", o.stdout, o.stderr);
    let notes = o.report["notes"].to_string();
    assert!(notes.contains(SAID), "{notes}");
    assert!(o.stderr.contains("CUPTI"), "{}", o.stderr);
}

#[test]
fn no_profiler_no_note() {
    let o = run(false);
    assert!(o.stdout.contains("profiler loaded=0 rc=0"), "{}{}", o.stdout, o.stderr);
    assert!(!o.report["notes"].to_string().contains(SAID), "{:#}", o.report);
}
