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

const SEPARATOR: &str = "// ---- expected";

fn fixture_paths() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/count");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "ptx"))
        .collect();
    paths.sort();
    assert!(paths.len() >= 10, "expected at least 10 fixtures in {}", dir.display());
    paths
}

/// The input and expected parts of a fixture.
fn split(text: &str) -> (&str, &str) {
    match text.split_once(&format!("{SEPARATOR}\n")) {
        Some((i, e)) => (i, e),
        None => (text, ""),
    }
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
    gpusan_testkit::file_tests(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/count"), 10, render);
}

/// The fixtures are real PTX: ptxas assembles every input and every expected output.
#[test]
fn fixtures_assemble() {
    let ptxas = common::ptxas();
    let work = std::env::temp_dir().join(format!("gpusan-passes-fixtures-{}", std::process::id()));
    std::fs::create_dir_all(&work).unwrap();
    let mut failed = Vec::new();
    for path in fixture_paths() {
        let text = std::fs::read_to_string(&path).unwrap();
        let (input, expected) = split(&text);
        let mut parts = vec![("input", input)];
        if !expected.starts_with("// error:") {
            parts.push(("expected output", expected));
        }
        for (what, ptx) in parts {
            let file = work.join("f.ptx");
            std::fs::write(&file, ptx).unwrap();
            if let Err(e) = common::assemble(&ptxas, &file, &work.join("f.cubin")) {
                failed.push(format!("{} ({what}):\n{e}", path.display()));
            }
        }
    }
    let _ = std::fs::remove_dir_all(&work);
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}
