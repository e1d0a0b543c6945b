//! File tests of the `count` pass, as ZLUDA keeps its pass tests and Cranelift its file
//! tests: each `fixtures/count/*.ptx` is an input module, a `// ---- expected` line, then
//! what `instrument` makes of it: the report as `//` comments and the printed module, or
//! `// error:` and the message. An input line `// config: counter_symbol = NAME` sets
//! [`Config::counter_symbol`]. `BLESS=1 cargo test -p gpusan-passes --test count`
//! rewrites the expected parts.

mod common;

use std::fmt::Write;
use std::path::{Path, PathBuf};

use gpusan_passes::count::{Config, Count};

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/count")
}

fn config(input: &str) -> Config {
    let mut config = Config::default();
    for line in input.lines() {
        if let Some(v) = line.trim().strip_prefix("// config: counter_symbol =") {
            config.counter_symbol = v.trim().to_string();
        }
    }
    config
}

fn render(input: &str) -> String {
    match gpusan_passes::instrument(input, &Count::new(config(input))) {
        Ok(out) => {
            let mut s = String::new();
            for f in &out.report.functions {
                let _ = writeln!(s, "// {}: {} counted", f.name, f.sites);
            }
            s.push_str(out.ptx.trim_end());
            s.push('\n');
            s
        }
        Err(e) => e.to_string().lines().map(|l| format!("// error: {l}\n")).collect(),
    }
}

#[test]
fn fixtures() {
    gpusan_testkit::file_tests(&fixture_dir(), 10, render);
}

/// The fixtures are real PTX: ptxas assembles every input and every expected output.
#[test]
fn fixtures_assemble() {
    gpusan_testkit::assemble_file_tests(&fixture_dir());
}
