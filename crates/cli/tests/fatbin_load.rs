//! A driver-API program that ships its kernel as a fatbin file (`nvcc -fatbin`) and loads it
//! through `cuModuleLoadData` or a sibling, under `gpusan run` with the fake driver
//! (tests/fake_cuda/: `prog link fatbin FILE ENTRY`). The program owns its context: it
//! retains the primary context first and releases it last, which destroys it and unmaps the
//! memory the driver gave for it. Issue 12: on an H100 such a program died with SIGSEGV in
//! `--mode check`, after its last call, when gpusan drained the error buffer of the context
//! it had released.
//!
//! The fatbins are built by the pinned nvcc (and `fatbinary`), one per kind a program may
//! ship; the image lies flush against an unreadable page, so reading past its end faults.
//! Each run must finish as natively, with the kernel instrumented where the fatbin has PTX
//! this GPU (9.0, as the fake driver says) can compile, and listed unchecked, with its
//! reason, where it has none or gpusan cannot read it.

mod fake_driver;

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

const KERNEL: &str = "extern \"C\" __global__ void vadd(const float* a, const float* b, float* c, int n) {\n\
    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) c[i] = a[i] + b[i];\n}\n";

/// The fatbins, by kind: nvcc's options for each.
const KINDS: &[(&str, &[&str])] = &[
    // PTX and SASS for sm_90 (nvcc compresses the PTX with ZSTD by default).
    ("sm90", &["-arch=sm_90"]),
    ("sass", &["-gencode", "arch=compute_90,code=sm_90"]),
    ("ptx", &["-gencode", "arch=compute_90,code=compute_90"]),
    // PTX for an older and a newer architecture than the GPU's: the older is compiled.
    (
        "multi",
        &[
            "-gencode",
            "arch=compute_80,code=[sm_80,compute_80]",
            "-gencode",
            "arch=compute_90,code=sm_90",
            "-gencode",
            "arch=compute_100,code=compute_100",
        ],
    ),
    ("newer", &["-gencode", "arch=compute_100,code=compute_100"]),
    // Every entry compressed: ZSTD; LZ4 for `--compress-mode=speed`.
    ("zstd", &["-arch=sm_90", "-Xfatbin", "-compress-all"]),
    ("lz4", &["-arch=sm_90", "--compress-mode=speed"]),
];

struct Built {
    dir: PathBuf,
    prog: PathBuf,
}

/// Builds the fake driver, the program and every fatbin, once per test process.
fn built() -> &'static Built {
    static BUILT: OnceLock<Built> = OnceLock::new();
    BUILT.get_or_init(|| {
        let dir = fake_driver::build("fatbin-load", &[("prog", "prog.c")]);
        let prog = dir.join("prog");
        let run = fake_driver::run;
        let cu = dir.join("vadd.cu");
        std::fs::write(&cu, KERNEL).unwrap();
        let nvcc = || {
            let mut c = Command::new(gpusan_testkit::cuda_tool("nvcc"));
            c.current_dir(&dir);
            c
        };
        std::thread::scope(|s| {
            for (kind, options) in KINDS {
                let mut cmd = nvcc();
                cmd.arg("-fatbin").args(*options).arg(&cu).arg("-o").arg(dir.join(format!("{kind}.fatbin")));
                s.spawn(move || run(&mut cmd));
            }
            // SASS, and PTX of an ISA newer than the driver's JIT (9.9): `fatbinary` takes
            // what nvcc would refuse to write.
            s.spawn(|| {
                run(nvcc().args(["-cubin", "-arch=sm_90", "-o", "isa.cubin"]).arg(&cu));
                run(nvcc().args(["-ptx", "-arch=sm_90", "-o", "isa.ptx"]).arg(&cu));
                let ptx = std::fs::read_to_string(dir.join("isa.ptx")).unwrap();
                assert!(ptx.contains(".version 9.0\n"), "{ptx}");
                std::fs::write(dir.join("isa.ptx"), ptx.replace(".version 9.0\n", ".version 9.9\n")).unwrap();
                run(Command::new(gpusan_testkit::cuda_tool("fatbinary"))
                    .current_dir(&dir)
                    .args(["--create=isa.fatbin", "-64", "--image3=kind=elf,sm=90,file=isa.cubin"])
                    .arg("--image3=kind=ptx,sm=90,file=isa.ptx"));
            });
        });
        // A file cut short: its header still claims the whole.
        let whole = std::fs::read(dir.join("sm90.fatbin")).unwrap();
        std::fs::write(dir.join("truncated.fatbin"), &whole[..whole.len() / 2]).unwrap();
        Built { dir, prog }
    })
}

/// What one run showed.
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    /// What the driver was asked to load: "<fatbin>" (the original) or the PTX text.
    loaded: String,
    report: serde_json::Value,
}

/// `gpusan run --mode MODE -- prog link fatbin KIND.fatbin ENTRY`.
fn run(mode: &str, kind: &str, entry: &str) -> Run {
    run_with(mode, kind, &[entry])
}

/// `gpusan run --mode MODE -- prog link fatbin KIND.fatbin ARGS…`.
fn run_with(mode: &str, kind: &str, args: &[&str]) -> Run {
    let b = built();
    let tag = format!("{mode}-{kind}-{}", args.join("-"));
    let (json, loaded) = (b.dir.join(format!("{tag}.json")), b.dir.join(format!("{tag}.loaded")));
    let _ = std::fs::remove_file(&loaded);
    let fatbin = b.dir.join(format!("{kind}.fatbin"));
    let out = Command::new(env!("CARGO_BIN_EXE_gpusan"))
        .args(["run", "--mode", mode, "--report-json"])
        .arg(&json)
        .arg("--")
        .arg(&b.prog)
        .args(["link", "fatbin"])
        .arg(&fatbin)
        .args(args)
        .env("GPUSAN_INJECT_LIB", fake_driver::inject_lib())
        .env("LD_LIBRARY_PATH", &b.dir)
        .env("FAKE_CUDA_LOADED", &loaded)
        .env("GPUSAN_CACHE_DIR", b.dir.join(format!("cache-{tag}")))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let report = std::fs::read_to_string(&json).map(|t| serde_json::from_str(&t).unwrap()).unwrap_or_default();
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr,
        loaded: std::fs::read_to_string(&loaded).unwrap_or_default(),
        report,
    }
}

/// What a load must have become.
enum Expect {
    /// Instrumented (by the mode's pass), from the PTX for this target.
    Checked(&'static str),
    /// The original handed to the driver, listed unchecked for a reason containing this.
    Unchecked(&'static str),
}

/// The ways `run` went wrong, empty when it went as `expect` says.
fn judge(r: &Run, expect: &Expect) -> Vec<String> {
    let mut wrong = Vec::new();
    if r.code != Some(0) || !r.stdout.contains("link fatbin done rc=0") {
        wrong.push(format!("the program did not finish as natively (exit {:?})", r.code));
    }
    if r.report["summary"]["total"] != 0 {
        wrong.push("errors were reported".into());
    }
    let unchecked = r.report["unchecked_modules"].as_object().cloned().unwrap_or_default();
    match expect {
        Expect::Checked(target) => {
            let ptx = &r.loaded;
            if !(ptx.contains(gpusan_abi::SYMBOL_PREFIX) && ptx.contains(&format!(".target {target}"))) {
                wrong.push(format!("not loaded instrumented, from the PTX for {target}"));
            }
            if !unchecked.is_empty() {
                wrong.push("listed unchecked".into());
            }
        }
        Expect::Unchecked(why) => {
            if r.loaded != "<fatbin>" {
                wrong.push("the driver did not get the original fatbin".into());
            }
            if !unchecked.iter().any(|(reason, n)| reason.contains(why) && *n == 1) {
                wrong.push(format!("not listed unchecked for `{why}`"));
            }
        }
    }
    wrong
}

fn check_all(cases: &[(&str, &str, &str, Expect)]) {
    let mut failures = Vec::new();
    for (mode, kind, entry, expect) in cases {
        let r = run(mode, kind, entry);
        let wrong = judge(&r, expect);
        if !wrong.is_empty() {
            failures.push(format!(
                "--mode {mode}, {kind}.fatbin through {entry}: {}\nstdout: {}\nstderr: {}\nreport: {:#}\n",
                wrong.join("; "),
                r.stdout,
                r.stderr,
                r.report["unchecked_modules"]
            ));
        }
    }
    assert!(failures.is_empty(), "{} of {} runs wrong:\n{}", failures.len(), cases.len(), failures.join("\n"));
}

/// Each kind of fatbin through `cuModuleLoadData` in check mode.
#[test]
fn every_kind_of_fatbin_file_loads_and_runs_in_check_mode() {
    use Expect::*;
    check_all(&[
        ("check", "sm90", "data", Checked("sm_90")),
        ("check", "ptx", "data", Checked("sm_90")),
        ("check", "multi", "data", Checked("sm_80")),
        ("check", "zstd", "data", Checked("sm_90")),
        ("check", "lz4", "data", Checked("sm_90")),
        ("check", "sass", "data", Unchecked("no PTX for this GPU (machine code only)")),
        ("check", "newer", "data", Unchecked("no PTX this GPU can compile: its oldest is for compute_100")),
        ("check", "isa", "data", Unchecked(".version 9.9 is newer than PTX ISA 9.0")),
    ]);
}

/// The same image through the other entry points that take one without a length.
#[test]
fn every_entry_point_that_takes_a_fatbin_loads_it_in_check_mode() {
    use Expect::*;
    check_all(&[
        ("check", "sm90", "dataex", Checked("sm_90")),
        ("check", "sm90", "fatbinary", Checked("sm_90")),
        ("check", "sm90", "library", Checked("sm_90")),
        ("check", "sass", "library", Unchecked("no PTX for this GPU (machine code only)")),
    ]);
}

/// A file cut short still has its whole header, which claims bytes past the end of the
/// image: gpusan must not read them, and hands the image over as it is.
#[test]
fn a_truncated_fatbin_goes_to_the_driver_untouched_and_is_listed_unchecked() {
    use Expect::*;
    let why = "not all of them are readable";
    check_all(&[
        ("check", "truncated", "data", Unchecked(why)),
        ("count", "truncated", "data", Unchecked(why)),
        ("count", "sm90", "data", Checked("sm_90")),
        ("check", "truncated", "library", Unchecked(why)),
    ]);
    // `api` mode reads no image: the program alone decides.
    let r = run("api", "truncated", "data");
    assert_eq!((r.code, r.loaded.as_str()), (Some(0), "<fatbin>"), "{}{}", r.stdout, r.stderr);
}

/// The program gives its context back, which destroys it and unmaps its error buffer:
/// gpusan must read nothing of it afterwards (the crash of issue 12 was a drain at exit),
/// whether the last release or a reset ended it, and a new context the driver gives the
/// same handle is set up afresh, not taken for the old one. What the tables held still
/// reaches the report.
#[test]
fn a_context_the_program_ended_is_not_read_after_it_is_gone() {
    for teardown in ["release", "reset", "again"] {
        let r = run_with("check", "ptx", &["data", teardown]);
        assert_eq!(judge(&r, &Expect::Checked("sm_90")), Vec::<String>::new(), "{teardown}: {}{}", r.stdout, r.stderr);
        assert!(r.report["counters"]["device_table_bytes"].as_u64() > Some(0), "{teardown}: {:#}", r.report);
    }
}
