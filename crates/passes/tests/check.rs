//! File tests of the `check` pass, laid out like those of `count`: each
//! `fixtures/check/*.ptx` is an input module, a `// ---- expected` line, then what
//! `instrument` makes of it: the report as `//` comments and the printed module, or
//! `// error:` and the message. `BLESS=1 cargo test -p gpusan-passes --test check`
//! rewrites the expected parts.

mod common;

use std::fmt::Write;
use std::path::{Path, PathBuf};

use gpusan_passes::check::{self, Check};

const SEPARATOR: &str = "// ---- expected";

fn fixture_paths() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/check");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "ptx"))
        .collect();
    paths.sort();
    assert!(!paths.is_empty(), "no fixtures in {}", dir.display());
    paths
}

/// The input and expected parts of a fixture.
fn split(text: &str) -> (&str, &str) {
    match text.split_once(&format!("{SEPARATOR}\n")) {
        Some((i, e)) => (i, e),
        None => (text, ""),
    }
}

fn render(input: &str) -> String {
    // The detailed report, from the same run `instrument` makes.
    let details = gpusan_ptx::parse(input).ok().and_then(|mut m| check::run(&mut m, Some(input)).ok());
    match gpusan_passes::instrument(input, &Check) {
        Ok(out) => {
            let mut s = String::new();
            for f in details.iter().flat_map(|d| &d.functions) {
                let _ = writeln!(
                    s,
                    "// {} (function {}): {} checked, {} roots; unchecked: {} multi-root, {} no root, \
                     {} unknown width, {} other",
                    f.name, f.index, f.checked, f.roots, f.multi_root, f.no_root, f.unknown_width, f.other
                );
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
    let bless = std::env::var_os("BLESS").is_some_and(|v| v == "1");
    let mut failed = Vec::new();
    for path in fixture_paths() {
        let text = std::fs::read_to_string(&path).unwrap();
        let (input, expected) = split(&text);
        let actual = render(input);
        if actual == expected {
            continue;
        }
        if bless {
            std::fs::write(&path, format!("{}\n\n{SEPARATOR}\n{actual}", input.trim_end())).unwrap();
        } else {
            failed.push(format!("{}:\n--- expected\n{expected}--- actual\n{actual}", path.display()));
        }
    }
    assert!(failed.is_empty(), "{} fixtures differ (BLESS=1 to accept):\n{}", failed.len(), failed.join("\n"));
}

/// The fixtures are real PTX: ptxas assembles every input and every expected output.
#[test]
fn fixtures_assemble() {
    let ptxas = common::ptxas();
    let work = std::env::temp_dir().join(format!("gpusan-check-fixtures-{}", std::process::id()));
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
