//! What a finding says to a user, as snapshots of the text report (insta): host frames
//! named by function and file:line from the program's debug information, with module and
//! offset for `addr2line`; the CUDA runtime's frames folded into one line; a kernel's
//! finding at its source line. The instrumented PTX location and gpusan's counters are
//! shown only with `--verbose` (the JSON report always has them).
//!
//! The program (tests/fake_cuda/readable_prog.c) is built with `-g` against the fake driver
//! and a fake CUDA runtime (tests/fake_cuda/cudart.c, `libcudart.so.13`).

mod fake_driver;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

fn dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = fake_driver::build("readable", &[]);
        let src = fake_driver::sources();
        let cudart = dir.join("libcudart.so.13");
        fake_driver::run(
            Command::new("cc")
                .args(["-shared", "-fPIC", "-O0", "-Wl,-soname,libcudart.so.13", "-o"])
                .args([&cudart, &src.join("cudart.c")])
                .arg("-L")
                .arg(&dir)
                .arg("-lcuda"),
        );
        fake_driver::run(
            Command::new("cc")
                .args(["-g", "-O0", "-o"])
                .args([&dir.join("readable_prog"), &src.join("readable_prog.c"), &cudart])
                .arg("-L")
                .arg(&dir)
                .args(["-lcuda", "-ldl"])
                .arg(format!("-Wl,-rpath,{}", dir.display())),
        );
        // A library by the name of Triton's (`triton/_C/libtriton.so`).
        std::fs::write(dir.join("triton.c"), "int triton_loaded = 1;\n").unwrap();
        fake_driver::run(
            Command::new("cc").args(["-shared", "-fPIC", "-o"]).args([dir.join("libtriton.so"), dir.join("triton.c")]),
        );
        dir
    })
}

fn run(scenario: &str, options: &[&str]) -> fake_driver::Outcome {
    run_env(scenario, options, &[])
}

fn run_env(scenario: &str, options: &[&str], env: &[(&str, &Path)]) -> fake_driver::Outcome {
    let d = dir();
    let prog = d.join("readable_prog");
    let cache = d.join("cache");
    let mut env = env.to_vec();
    env.push(("GPUSAN_CACHE_DIR", cache.as_path()));
    let o = fake_driver::gpusan_run(d, options, &[prog.to_str().unwrap(), scenario], &env);
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
    o
}

/// The first finding of the text report, with what differs from run to run or machine to
/// machine replaced: folders, device addresses, offsets in modules, and the C library's
/// frames below `main`.
fn first_finding(stderr: &str) -> String {
    let header = |l: &str| l.starts_with("========= GPUSAN") || l.starts_with("========= NOTE");
    let lines = stderr.lines().skip_while(|l| !l.starts_with("========= ") || header(l));
    let (src, dir) = (fake_driver::sources().display().to_string(), dir().display().to_string());
    let mut out = Vec::new();
    let mut below_main = false;
    for line in lines.take_while(|l| *l != "=========") {
        let frame = line.contains("Host Frame:") || line.contains("in the CUDA runtime)");
        if below_main && frame {
            continue;
        }
        below_main = frame && line.contains("Host Frame: main ");
        out.push(redact_hex(&line.replace(&src, "[SRC]").replace(&dir, "[DIR]")));
    }
    out.join("\n")
}

/// `0x…` numbers as `[HEX]`: allocation addresses and module offsets change between
/// builds and runs.
fn redact_hex(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(i) = rest.find("0x") {
        out.push_str(&rest[..i]);
        let digits = rest[i + 2..].find(|c: char| !c.is_ascii_hexdigit()).unwrap_or(rest.len() - i - 2);
        out.push_str("[HEX]");
        rest = &rest[i + 2 + digits..];
    }
    out.push_str(rest);
    out
}

#[test]
fn a_device_finding_shows_its_source_line_and_the_host_lines_of_launch_and_allocation() {
    let o = run("device", &["--mode", "check"]);
    assert_eq!(o.kinds(), vec!["out_of_bounds_write"], "{:#}", o.report);
    insta::assert_snapshot!("device_out_of_bounds", first_finding(&o.stderr));
}

#[test]
fn a_host_finding_shows_the_programs_frames_and_folds_the_runtimes() {
    let o = run("host", &[]);
    assert_eq!(o.kinds(), vec!["memcpy_out_of_bounds"], "{:#}", o.report);
    insta::assert_snapshot!("host_out_of_bounds", first_finding(&o.stderr));
    // JSON keeps every frame, with module and offset.
    let stack = &o.report["errors"][0]["details"]["call_stack"];
    let cudart = stack.as_array().unwrap().iter().find(|f| f["function"] == "cudaMemcpyToDevice");
    let cudart = cudart.unwrap_or_else(|| panic!("the runtime's frame in JSON: {stack:#}"));
    assert!(cudart["module"].as_str().unwrap().ends_with("/libcudart.so.13"), "{cudart:#}");
    assert!(cudart["offset"].as_str().unwrap().starts_with("0x"), "{cudart:#}");
}

/// The frames' module and offset are what `addr2line -e MODULE OFFSET` takes: the tool of
/// binutils names the same line.
#[test]
fn module_and_offset_give_the_line_to_addr2line() {
    // binutils' addr2line is there wherever `cc` links (its `ld` is binutils').
    let o = run("host", &[]);
    let stack = o.report["errors"][0]["details"]["call_stack"].as_array().unwrap().clone();
    let main = stack.iter().find(|f| f["function"] == "main").unwrap_or_else(|| panic!("{stack:#?}"));
    let out = Command::new("addr2line")
        .args(["-e", main["module"].as_str().unwrap(), main["offset"].as_str().unwrap()])
        .output()
        .unwrap();
    let named = String::from_utf8_lossy(&out.stdout);
    assert_eq!(named.trim(), format!("{}:{}", main["file"].as_str().unwrap(), main["line"]), "{main:#}");
}

#[test]
fn the_ptx_location_and_the_counters_only_with_verbose() {
    let plain = run("device", &["--mode", "check"]);
    let verbose = run("device", &["--mode", "check", "--verbose"]);
    for o in [&plain, &verbose] {
        let d = &o.report["errors"][0]["details"];
        assert_eq!(d["ptx"]["line"], 11, "the JSON always has it: {d:#}");
        assert!(o.report["counters"].as_object().is_some_and(|c| !c.is_empty()), "{:#}", o.report);
    }
    assert!(plain.stderr.contains("at zeta in checked.cu:21\n"), "{}", plain.stderr);
    assert!(!plain.stderr.contains("(PTX "), "{}", plain.stderr);
    assert!(!plain.stderr.contains("COUNTER"), "{}", plain.stderr);
    assert!(verbose.stderr.contains("in checked.cu:21 (PTX "), "{}", verbose.stderr);
    assert!(verbose.stderr.contains("COUNTER device_table_bytes"), "{}", verbose.stderr);
}

/// Without NVIDIA's ptxas, Triton's kernels cannot be checked: said by a program that loaded
/// Triton, and by no other.
#[test]
fn the_triton_note_only_where_triton_was_loaded() {
    let none = Path::new("/nonexistent/ptxas");
    let env: &[(&str, &Path)] = &[("GPUSAN_REAL_PTXAS", none)];
    let plain = run_env("device", &["--mode", "check"], env);
    assert!(!plain.stderr.contains("Triton"), "{}", plain.stderr);
    assert!(!plain.report["notes"].to_string().contains("Triton"), "{:#}", plain.report);
    let triton = run_env("triton", &["--mode", "check"], env);
    let note = "Triton kernels were not checked: NVIDIA's ptxas was not found (set GPUSAN_REAL_PTXAS)";
    assert!(triton.stderr.contains(&format!("========= NOTE: {note}\n")), "{}", triton.stderr);
    assert_eq!(triton.kinds(), vec!["out_of_bounds_write"], "{:#}", triton.report);
}
