//! File tests of the `check` pass, laid out like those of `count`: each
//! `fixtures/check/*.ptx` is an input module, a `// ---- expected` line, then what
//! `instrument` makes of it: the report as `//` comments and the printed module, or
//! `// error:` and the message. `BLESS=1 cargo test -p gpusan-passes --test check`
//! rewrites the expected parts. An input line `// check-reaction: abort` instruments with
//! that [`Reaction`].

mod common;

use std::fmt::Write;
use std::path::{Path, PathBuf};

use gpusan_passes::check::{self, CheckConfig, CheckWith, Reaction};

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/check")
}

fn render(input: &str) -> String {
    let reaction = input
        .lines()
        .find_map(|l| l.strip_prefix("// check-reaction: "))
        .map(|r| Reaction::from_name(r.trim()).expect("a reaction name"))
        .unwrap_or_default();
    let config = CheckConfig { reaction };
    // The detailed report, from the same run `instrument` makes.
    let details = gpusan_ptx::parse(input).ok().and_then(|mut m| check::run_with(&mut m, Some(input), &config).ok());
    match gpusan_passes::instrument(input, &CheckWith(config)) {
        Ok(out) => {
            let mut s = String::new();
            for f in details.iter().flat_map(|d| &d.functions) {
                let _ = writeln!(
                    s,
                    "// {} (function {}): {} checked, {} roots; unchecked: {} multi-root, {} no root, \
                     {} unknown width, {} other",
                    f.name, f.index, f.checked, f.roots, f.multi_root, f.no_root, f.unknown_width, f.other
                );
                if f.shared + f.local > 0 {
                    let _ = writeln!(s, "//   checked against variables: {} shared, {} local", f.shared, f.local);
                }
                if f.scope > 0 {
                    let _ = writeln!(s, "//   checked for use after scope: {}", f.scope);
                }
                let _ = writeln!(
                    s,
                    "// optimized: {} checks on a fast path behind {} group checks, {} roots looked up per block",
                    f.grouped, f.group_checks, f.block_roots
                );
                if f.loops_versioned > 0 {
                    let _ = writeln!(
                        s,
                        "//   {} loops in two versions, {} accesses checked once by their range",
                        f.loops_versioned, f.loop_hoisted
                    );
                }
                if f.spans > 0 || f.static_in_bounds > 0 {
                    let _ = writeln!(
                        s,
                        "//   {} runs in two versions, {} on-chip accesses in bounds by their constant address",
                        f.spans, f.static_in_bounds
                    );
                }
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
