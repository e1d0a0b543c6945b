//! The doors through which PTX reaches the GPU besides a module load (issue 13): NVRTC
//! (CuPy, cuda.core, PyTorch's jiterator) and the driver's linker (numba-cuda), with the fake
//! driver and a fake NVRTC (tests/fake_cuda/libnvrtc.c: a program's "source" is PTX; real
//! architectures give a cubin and no PTX, as NVRTC 12+ does).
//!
//! What must hold: a kernel that arrives through either door is instrumented and its
//! findings named (kernel, PTX and source line) as for a module load; a program that asks
//! NVRTC for a cubin gets one built from the instrumented PTX, and the same cubin, loaded by
//! a later run from the program's own cache, is checked too; whatever fails on the way
//! leaves the program its own code, running, and the report says why it was not checked.

mod fake_driver;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use fake_driver::Outcome;

fn dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = fake_driver::build("doors", &[]);
        let src = fake_driver::sources();
        fake_driver::run(
            Command::new("cc")
                .args(["-shared", "-fPIC", "-Wl,-soname,libnvrtc.so.13", "-o"])
                .args([&d.join("libnvrtc.so.13"), &src.join("libnvrtc.c")]),
        );
        let _ = std::os::unix::fs::symlink(d.join("libnvrtc.so.13"), d.join("libnvrtc.so"));
        fake_driver::run(
            Command::new("cc")
                .args(["-shared", "-fPIC", "-Wl,-soname,libnvJitLink.so.13", "-o"])
                .args([&d.join("libnvJitLink.so.13"), &src.join("libnvjitlink.c")]),
        );
        fake_driver::run(
            Command::new("cc")
                .arg("-o")
                .args([&d.join("doors_prog"), &src.join("doors_prog.c")])
                .arg("-L")
                .arg(&d)
                .args(["-lcuda", "-lnvrtc", "-ldl"])
                .arg(format!("-Wl,-rpath,{}", d.display())),
        );
        fake_driver::run(
            Command::new("cc")
                .args(["-DNVRTC_LOADED_LATE", "-o"])
                .args([&d.join("doors_prog_late"), &src.join("doors_prog.c")])
                .arg("-L")
                .arg(&d)
                .args(["-lcuda", "-ldl"])
                .arg(format!("-Wl,-rpath,{}", d.display())),
        );
        d
    })
}

/// One run's files: the fake's logs, and a cache folder (fresh unless shared by name).
struct Files {
    cache: PathBuf,
    loaded: PathBuf,
    linked: PathBuf,
    nvrtc: PathBuf,
    kept: PathBuf,
}

fn files(tag: &str) -> Files {
    let d = dir().join(tag);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    Files {
        cache: d.join("cache"),
        loaded: d.join("loaded.txt"),
        linked: d.join("linked.txt"),
        nvrtc: d.join("nvrtc.txt"),
        kept: d.join("kept.cubin"),
    }
}

fn run(f: &Files, mode: &str, door: &str, scenario: &str) -> Outcome {
    for log in [&f.loaded, &f.linked, &f.nvrtc] {
        let _ = std::fs::remove_file(log);
    }
    // The `default` door: NVRTC loaded by the program only when it opens it.
    let prog = dir().join(if door == "default" { "doors_prog_late" } else { "doors_prog" });
    let o = fake_driver::gpusan_run(
        dir(),
        &["--mode", mode],
        &[prog.to_str().unwrap(), door, scenario, f.kept.to_str().unwrap()],
        &[
            ("GPUSAN_CACHE_DIR", &f.cache),
            ("FAKE_CUDA_LOADED", &f.loaded),
            ("FAKE_CUDA_LINKED", &f.linked),
            ("FAKE_NVRTC_LOG", &f.nvrtc),
        ],
    );
    assert!(o.stdout.contains(&format!("{scenario} done rc=0")), "{scenario}: {}{}", o.stdout, o.stderr);
    o
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

/// The finding kernel `zeta` of `checked_ptx` makes, named from its module's metadata.
fn assert_zeta_found(o: &Outcome, what: &str) {
    assert_eq!(o.kinds(), vec!["out_of_bounds_write"], "{what}: {:#}", o.report);
    let d = &o.report["errors"][0]["details"];
    assert_eq!(d["kernel"], "zeta", "{what}: {d:#}");
    assert_eq!(d["ptx"]["line"], 11, "{what}: {d:#}");
    assert_eq!(d["source"], serde_json::json!({"file": "checked.cu", "line": 21}), "{what}: {d:#}");
}

fn unchecked(o: &Outcome) -> Vec<String> {
    o.report["unchecked_modules"].as_object().map(|m| m.keys().cloned().collect()).unwrap_or_default()
}

#[test]
fn a_cubin_asked_of_nvrtc_is_built_from_the_instrumented_ptx() {
    for door in ["link", "dlsym", "default"] {
        let f = files(&format!("cubin-{door}"));
        let o = run(&f, "check", door, "nvrtc-cubin");
        // The instrumented PTX in the cubin's place: the driver compiles each kernel once.
        assert!(o.stdout.contains("cubin: PTX instrumented"), "{door}: not gpusan's cubin: {}", o.stdout);
        assert!(o.stdout.contains("instrumented kernel ran"), "{door}: {}", o.stdout);
        assert_zeta_found(&o, door);
        let compiled = read(&f.nvrtc);
        assert_eq!(compiled.trim(), "-arch=compute_90 -lineinfo", "{door}: one compilation, virtual");
        assert_eq!(read(&f.linked), "", "{door}: nothing linked");
        // Loaded: the instrumented PTX, as handed out.
        let loaded = read(&f.loaded);
        assert!(loaded.starts_with(".version") && loaded.contains("__gpusan_errors"), "{door}: loaded {loaded}");
        assert!(unchecked(&o).is_empty(), "{door}: {:#}", o.report);

        // Without a pass, NVRTC does what the program asked and nothing more.
        let f = files(&format!("cubin-api-{door}"));
        let o = run(&f, "api", door, "nvrtc-cubin");
        assert!(o.stdout.contains("cubin: FAKE-NVRTC"), "{door}: {}", o.stdout);
        assert_eq!(read(&f.nvrtc).trim(), "-arch=sm_90 -lineinfo");
        assert!(o.kinds().is_empty(), "{:#}", o.report);
    }
}

#[test]
fn a_cubin_the_program_kept_is_checked_on_the_next_run() {
    let f = files("kept");
    let first = run(&f, "check", "link", "nvrtc-cubin");
    assert_zeta_found(&first, "first run");
    // A new process loads the cubin kept from the first (CuPy's on-disk cache).
    let o = run(&f, "check", "link", "load-cubin");
    assert!(o.stdout.contains("cubin: PTX instrumented"), "{}", o.stdout);
    assert_zeta_found(&o, "cached run");
    assert!(read(&f.nvrtc).is_empty(), "nothing compiled on the cached run");
    let loaded = read(&f.loaded);
    assert!(loaded.starts_with(".version") && loaded.contains("__gpusan_errors"), "loaded {loaded}");
}

#[test]
fn ptx_asked_of_nvrtc_is_handed_out_instrumented_and_loaded_as_it_is() {
    let f = files("ptx");
    let o = run(&f, "check", "dlsym", "nvrtc-ptx");
    assert!(o.stdout.contains("ptx instrumented: yes"), "{}", o.stdout);
    assert_zeta_found(&o, "nvrtc ptx");
    assert_eq!(read(&f.loaded).matches("__gpusan_errors;").count(), 1, "instrumented twice?");
    assert!(unchecked(&o).is_empty(), "{:#}", o.report);
}

#[test]
fn when_nvrtc_or_the_pass_fails_the_program_gets_its_own_cubin_and_the_report_says_why() {
    let f = files("virtual-fails");
    let o = run(&f, "check", "link", "nvrtc-virtual-fails");
    assert!(o.stdout.contains("cubin: FAKE-NVRTC"), "{}", o.stdout);
    let lines: Vec<String> = read(&f.nvrtc).lines().map(|l| l.trim().to_string()).collect();
    assert_eq!(lines, ["-arch=compute_90 -lineinfo", "-arch=sm_90 -lineinfo"], "compiled again as asked");
    assert!(o.kinds().is_empty(), "{:#}", o.report);
    let why = unchecked(&o);
    assert!(
        why.iter().any(|w| w.starts_with("NVRTC could not compile the program for a virtual architecture")),
        "{why:?}"
    );

    let f = files("refused");
    let o = run(&f, "check", "dlsym", "nvrtc-refused");
    assert!(o.stdout.contains("cubin: FAKE-NVRTC"), "{}", o.stdout);
    assert!(o.kinds().is_empty(), "{:#}", o.report);
    let why = unchecked(&o);
    assert!(why.iter().any(|w| w.starts_with("NVRTC cubin not instrumented: not instrumented")), "{why:?}");
}

#[test]
fn ptx_given_to_the_linker_is_instrumented_and_the_linked_cubin_checked() {
    for scenario in ["link", "link-file"] {
        let f = files(scenario);
        let o = run(&f, "check", "link", scenario);
        assert!(o.stdout.contains("cubin: FAKE-LINKED"), "{scenario}: {}", o.stdout);
        let linked = read(&f.linked);
        let weak = linked.lines().any(|l| l.starts_with(".weak .global") && l.contains("__gpusan_errors"));
        assert!(weak, "{scenario}: ABI not weak: {linked}");
        assert_zeta_found(&o, scenario);
        assert!(unchecked(&o).is_empty(), "{scenario}: {:#}", o.report);
    }
    let f = files("link-api");
    let o = run(&f, "api", "link", "link");
    assert!(!read(&f.linked).contains("__gpusan"), "api mode instruments nothing");
    assert!(o.kinds().is_empty(), "{:#}", o.report);
}

#[test]
fn instrumented_ptx_the_linker_refuses_is_linked_as_given_and_reported_unchecked() {
    let f = files("link-refused");
    let o = run(&f, "check", "link", "link-refused");
    assert!(!read(&f.linked).contains("__gpusan"), "{}", read(&f.linked));
    assert!(o.kinds().is_empty(), "{:#}", o.report);
    let why = unchecked(&o);
    assert!(
        why.iter().any(|w| w == "linked code not instrumented: instrumented PTX refused by the linker (error 218)"),
        "{why:?}"
    );
}

#[test]
fn the_programs_kernel_caches_are_gpusans_own_in_modes_that_instrument() {
    let f = files("caches");
    let env = |mode: &str, theirs: Option<&str>| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_gpusan"));
        cmd.args(["run", "--mode", mode, "--", "env"])
            .env("GPUSAN_INJECT_LIB", fake_driver::inject_lib())
            .env("GPUSAN_CACHE_DIR", &f.cache)
            .env_remove("CUPY_CACHE_DIR")
            .env_remove("GPUSAN_PROGRAM_CACHES");
        if let Some(t) = theirs {
            cmd.env("CUPY_CACHE_DIR", t);
        }
        let out = cmd.output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let var = |out: &str, k: &str| out.lines().find_map(|l| l.strip_prefix(&format!("{k}=")).map(str::to_string));
    let out = env("check", None);
    let cupy = var(&out, "CUPY_CACHE_DIR").expect("CUPY_CACHE_DIR set");
    let programs = f.cache.join("programs");
    assert!(cupy.starts_with(programs.to_str().unwrap()) && cupy.ends_with("-check/cupy"), "{cupy}");
    for k in ["NUMBA_CACHE_DIR", "PYTORCH_KERNEL_CACHE_PATH"] {
        assert!(var(&out, k).is_some_and(|v| v.starts_with(programs.to_str().unwrap())), "{k}: {out}");
    }
    let count = env("count", None);
    assert_ne!(var(&count, "CUPY_CACHE_DIR"), Some(cupy), "one folder per mode");
    let theirs = env("check", Some("/their/cupy"));
    assert!(var(&theirs, "CUPY_CACHE_DIR").is_some_and(|v| v.starts_with("/their/cupy/gpusan-")), "{theirs}");
    assert_eq!(var(&env("api", None), "CUPY_CACHE_DIR"), None, "api mode leaves them");
}

#[test]
fn ptx_given_to_nvjitlink_is_instrumented_whichever_version_names_its_functions() {
    let f = files("nvjitlink");
    let o = run(&f, "check", "default", "nvjitlink");
    assert!(o.stdout.contains("cubin: FAKE-LINKED"), "{}", o.stdout);
    let linked = read(&f.linked);
    assert!(linked.lines().any(|l| l.starts_with(".weak .global") && l.contains("__gpusan_errors")), "{linked}");
    assert_zeta_found(&o, "nvjitlink");
    assert!(unchecked(&o).is_empty(), "{:#}", o.report);
}

#[test]
fn lto_ir_given_to_nvjitlink_is_followed_through_a_link_as_ptx() {
    let f = files("nvjitlink-lto");
    let o = run(&f, "check", "default", "nvjitlink-lto");
    // The cubin the program got: gpusan's, linked by the driver from the instrumented PTX.
    assert!(o.stdout.contains("cubin: FAKE-LINKED"), "{}", o.stdout);
    // Both links: the program's, as it asked, and gpusan's of the instrumented PTX.
    let linked = read(&f.linked);
    assert!(linked.contains("LTOIR:") && linked.contains("__gpusan_errors"), "{linked}");
    // gpusan's link at -O0: the instrumented PTX it kept is loaded in the cubin's place.
    assert!(linked.contains("#O0\n"), "{linked}");
    assert_zeta_found(&o, "nvjitlink lto");
    assert!(unchecked(&o).is_empty(), "{:#}", o.report);

    // Without a pass, the program's LTO link is its own.
    let f = files("nvjitlink-lto-api");
    let o = run(&f, "api", "default", "nvjitlink-lto");
    assert!(read(&f.linked).contains("LTOIR:"), "{}", read(&f.linked));
    assert!(o.kinds().is_empty(), "{:#}", o.report);
}

#[test]
fn modules_and_libraries_loaded_from_files_are_instrumented() {
    for scenario in ["module-file", "library-file"] {
        let f = files(scenario);
        let o = run(&f, "check", "link", scenario);
        let loaded = read(&f.loaded);
        assert!(loaded.contains("__gpusan_errors"), "{scenario}: loaded {loaded}");
        assert_zeta_found(&o, scenario);
        let o = run(&f, "api", "link", scenario);
        assert!(!read(&f.loaded).contains("__gpusan"), "{scenario}: api mode loads the file as it is");
        assert!(o.kinds().is_empty(), "{:#}", o.report);
    }
}
