//! `gpusan ptx …` as users run it: the real binary on real files.

use std::process::{Command, Output};

fn gpusan(args: &[&str], stdin: Option<&str>) -> Output {
    use std::io::Write;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gpusan"));
    cmd.args(args).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
    cmd.stdin(if stdin.is_some() { std::process::Stdio::piped() } else { std::process::Stdio::null() });
    let mut child = cmd.spawn().expect("run gpusan");
    if let Some(input) = stdin {
        child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    }
    child.wait_with_output().unwrap()
}

const KERNEL: &str = ".version 9.0\n.target sm_90\n.address_size 64\n\n\
.visible .entry k(\n\t.param .u64 k_param_0\n)\n{\n\t.reg .pred %p<2>;\n\t.reg .b32 %r<4>;\n\t.reg .b64 %rd<4>;\n\
\t.shared .align 4 .b8 s[64];\n\
\tld.param.u64 %rd1, [k_param_0];\n\tcvta.to.global.u64 %rd2, %rd1;\n\tmov.u32 %r1, %tid.x;\n\
\tsetp.gt.u32 %p1, %r1, 15;\n\t@%p1 bra $L__BB0_2;\n\
\tld.global.u32 %r2, [%rd2];\n\tld.global.v2.u32 {%r2, %r3}, [%rd2+8];\n\tst.global.u32 [%rd2+4], %r2;\n\
\tatom.shared.add.u32 %r3, [s], 1;\n\
$L__BB0_2:\n\tret;\n}\n";

fn write_tmp(name: &str, text: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("gpusan-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn fmt_prints_what_the_library_prints() {
    let out = gpusan(&["ptx", "fmt", "-"], Some(KERNEL));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let want = gpusan_ptx::print(&gpusan_ptx::parse(KERNEL).unwrap());
    assert_eq!(String::from_utf8(out.stdout).unwrap(), want);
}

#[test]
fn fmt_writes_an_output_file() {
    let input = write_tmp("in.ptx", KERNEL);
    let output = input.with_file_name("out.ptx");
    let out = gpusan(&["ptx", "fmt", input.to_str().unwrap(), "-o", output.to_str().unwrap()], None);
    assert!(out.status.success());
    let printed = std::fs::read_to_string(&output).unwrap();
    assert_eq!(printed, gpusan_ptx::print(&gpusan_ptx::parse(KERNEL).unwrap()));
}

#[test]
fn malformed_input_fails_with_its_location() {
    let bad = KERNEL.replace("\tret;", "\tret");
    let input = write_tmp("bad.ptx", &bad);
    let out = gpusan(&["ptx", "fmt", input.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("bad.ptx:24:1: expected an operand or `;` ending the instruction, found `}`"), "{err}");
}

#[test]
fn missing_file_is_a_clear_error() {
    let out = gpusan(&["ptx", "stats", "/nonexistent/x.ptx"], None);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("reading /nonexistent/x.ptx"));
}

#[test]
fn stats_counts_accesses_per_space() {
    let input = write_tmp("k.ptx", KERNEL);
    let out = gpusan(&["ptx", "stats", "--json", input.to_str().unwrap()], None);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let k = &v[0];
    assert_eq!(k["name"], "k");
    assert_eq!(k["kernel"], true);
    assert_eq!(k["instructions"], 10);
    assert_eq!(k["spaces"]["global"]["loads"], 2);
    assert_eq!(k["spaces"]["global"]["stores"], 1);
    assert_eq!(k["spaces"]["shared"]["atomics"], 1);
    assert_eq!(k["spaces"]["param"]["loads"], 1);
}

#[test]
fn stats_table_has_totals() {
    let input = write_tmp("t.ptx", KERNEL);
    let out = gpusan(&["ptx", "stats", input.to_str().unwrap()], None);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("1 kernels, 0 functions, 10 instructions"), "{text}");
}

#[test]
fn cfg_dumps_each_function() {
    let input = write_tmp("c.ptx", KERNEL);
    let out = gpusan(&["ptx", "cfg", input.to_str().unwrap()], None);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("function k\n"), "{text}");
    assert!(text.contains("$L__BB0_2"), "{text}");
    let out = gpusan(&["ptx", "cfg", "--function", "nope", input.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn instrument_applies_the_count_pass() {
    let input = write_tmp("i.ptx", KERNEL);
    let out = gpusan(&["ptx", "instrument", "--pass", "count", input.to_str().unwrap()], None);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let ptx = String::from_utf8(out.stdout).unwrap();
    // Three global accesses in the kernel (two loads, one store); shared and param untouched.
    assert_eq!(ptx.matches("red.global.add.u64").count(), 3, "{ptx}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("3 sites instrumented by `count`"));
    assert!(gpusan_ptx::parse(&ptx).is_ok());
    let out = gpusan(&["ptx", "instrument", "--pass", "nope", input.to_str().unwrap()], None);
    assert!(!out.status.success());
}

/// A parse error past column 65,535 (a minified module) is a located error in every
/// command that parses, not a panic: formatting widths that large overflow `std::fmt`.
#[test]
fn an_error_far_along_a_long_line_is_reported_not_a_panic() {
    let wide = KERNEL.replace("\tret;", &format!("\t{}ret #;", " ".repeat(70_000)));
    let input = write_tmp("wide.ptx", &wide);
    for cmd in [&["ptx", "fmt"][..], &["ptx", "stats"], &["instrument"]] {
        let out = gpusan(&[cmd, &[input.to_str().unwrap()]].concat(), None);
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(1), "{cmd:?}: {err}");
        assert!(err.contains("wide.ptx:23:70006: expected an operand"), "{cmd:?}: {err}");
        assert!(err.lines().all(|l| l.chars().count() < 400), "{cmd:?}: the snippet is not cut:\n{err}");
    }
}

/// Control bytes of a hostile file never reach the terminal raw, in the message or the
/// snippet, whichever command shows them.
#[test]
fn control_bytes_of_the_input_are_escaped_in_errors() {
    let hostile = KERNEL.replace("\tret;", "\t\u{1b}]0;owned\u{7}\u{1b}[31m \"\u{1b}[2J\" \u{202e}ret;");
    let input = write_tmp("ctl.ptx", &hostile);
    for cmd in [&["ptx", "fmt"][..], &["ptx", "stats"], &["instrument"]] {
        let out = gpusan(&[cmd, &[input.to_str().unwrap()]].concat(), None);
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(1), "{cmd:?}: {err}");
        assert!(!err.contains('\u{1b}') && !err.contains('\u{7}') && !err.contains('\u{202e}'), "{cmd:?}: {err:?}");
        assert!(err.contains("\\u{1b}"), "{cmd:?}: {err}");
    }
}

/// Bytes that are not text are refused at their byte offset, line and column.
#[test]
fn bytes_that_are_not_utf8_are_refused_at_their_offset() {
    let dir = std::env::temp_dir().join(format!("gpusan-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let input = dir.join("binary.ptx");
    let mut bytes = KERNEL.as_bytes().to_vec();
    let at = KERNEL.find("ret;").unwrap();
    bytes[at] = 0xff;
    std::fs::write(&input, &bytes).unwrap();
    for cmd in [&["ptx", "fmt"][..], &["instrument"]] {
        let out = gpusan(&[cmd, &[input.to_str().unwrap()]].concat(), None);
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(1), "{cmd:?}: {err}");
        assert!(err.contains(&format!("binary.ptx:23:2: byte {at} is not UTF-8 text")), "{cmd:?}: {err}");
    }
}

/// `.reg .b64 %rd<100000000>;` (a 100-byte file) once took `instrument` past 20 s and
/// 4 GB: a count over the limit is a located error, and one at the limit costs what the
/// registers the body uses cost.
#[test]
fn huge_register_counts_are_refused_or_cost_only_what_is_used() {
    let over = KERNEL.replace(".reg .b64 %rd<4>;", ".reg .b64 %rd<100000000>;");
    let input = write_tmp("over.ptx", &over);
    let out = gpusan(&["instrument", input.to_str().unwrap()], None);
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("over.ptx:11:16: register count 100000000 is over the limit"), "{err}");
    let at = KERNEL.replace(".reg .b64 %rd<4>;", &format!(".reg .b64 %rd<{}>;", gpusan_ptx::MAX_REGISTER_COUNT));
    let input = write_tmp("at.ptx", &at);
    let started = std::time::Instant::now();
    let out = gpusan(&["instrument", input.to_str().unwrap()], None);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(started.elapsed() < std::time::Duration::from_secs(5), "{:?}", started.elapsed());
}
