//! End-to-end file tests of the `check` pass, laid out like those of `count`: each
//! `fixtures/check/*.ptx` (a handful, one per main shape of the output; the stages have
//! their own, `tests/check_stages.rs`) is an input module, a `// ---- expected` line, then what
//! `instrument` makes of it: the report as `//` comments and the printed module, or
//! `// error:` and the message. `BLESS=1 cargo test -p gpusan-passes --test check`
//! rewrites the expected parts. An input line `// check-reaction: abort` instruments with
//! that [`Reaction`]; `// check-count: dynamic` with [`Counting::Dynamic`] (the counters of
//! `check/counting.rs`).

mod common;

use std::fmt::Write;
use std::path::{Path, PathBuf};

use gpusan_passes::check::{self, CheckConfig, CheckWith, Counting};

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/check")
}

fn render(input: &str) -> String {
    let config = common::check_config_of(input);
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
    gpusan_testkit::file_tests(&fixture_dir(), 6, render);
}

/// The fixtures are real PTX: ptxas assembles every input and every expected output.
#[test]
fn fixtures_assemble() {
    gpusan_testkit::assemble_file_tests(&fixture_dir());
}

/// The whole-module fixtures and those of the stages (`tests/check_stages.rs`).
fn all_fixtures() -> Vec<PathBuf> {
    let mut paths = Vec::new();
    let mut dirs = vec![fixture_dir()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "ptx") {
                paths.push(path);
            }
        }
    }
    paths.sort();
    paths
}

/// A counting build is the plain build plus the counters: with every line the counters add
/// taken out, the instrumented text of each fixture is exactly the plain one, so counting
/// cannot change a verdict. Each counting build also assembles.
#[test]
fn counting_adds_only_counters() {
    let ptxas = gpusan_testkit::ptxas();
    let tmp = std::env::temp_dir().join(format!("gpusan-count-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    // The counters' own registers are `%__gs_n_…`.
    let counter_line = |l: &str| {
        l.contains("%__gs_n_")
            || l.contains("[__gpusan_n_")
            || gpusan_abi::COUNTER_SYMBOLS.iter().any(|s| l.starts_with(".visible .global") && l.contains(s))
    };
    let mut counted = 0;
    for path in all_fixtures() {
        let text = std::fs::read_to_string(&path).unwrap();
        let input = text.split("// ---- expected").next().unwrap();
        let plain = CheckConfig { counting: Counting::Off, ..CheckConfig::default() };
        let Ok(plain) = gpusan_passes::instrument(input, &CheckWith(plain)) else { continue };
        let dynamic = CheckConfig { counting: Counting::Dynamic, ..CheckConfig::default() };
        let with = gpusan_passes::instrument(input, &CheckWith(dynamic)).unwrap().ptx;
        let stripped: Vec<&str> = with.lines().filter(|l| !counter_line(l)).collect();
        let want: Vec<&str> = plain.ptx.lines().collect();
        // Declarations of the counters leave an empty line behind each.
        let squeeze =
            |v: Vec<&str>| v.into_iter().filter(|l| !l.trim().is_empty()).map(str::to_string).collect::<Vec<_>>();
        let (got, want) = (squeeze(stripped), squeeze(want));
        if let Some(k) = (0..got.len().max(want.len())).find(|&k| got.get(k) != want.get(k)) {
            panic!("{}: line {k} differs: {:?} vs {:?}", path.display(), got.get(k), want.get(k));
        }
        if with.contains("red.global.add.u64") {
            counted += 1;
            let ptx = tmp.join(path.file_name().unwrap());
            std::fs::write(&ptx, &with).unwrap();
            gpusan_testkit::assemble(&ptxas, &ptx, &ptx.with_extension("cubin"))
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        }
    }
    let _ = std::fs::remove_dir_all(&tmp);
    assert!(counted >= 10, "only {counted} fixtures got counters");
}

/// Records name their function by the number `gpusan_abi::function_numbers` gives it (by
/// sorted name, not module order), which is how the runtime names the kernel of a record:
/// the report says so, and so does each function's record writer.
#[test]
fn functions_are_numbered_as_the_abi_numbers_them() {
    let mut src = String::from(".version 9.0\n.target sm_90\n.address_size 64\n");
    let names = ["zeta", "_Z4axpyPfi", "alpha", "Beta", "k10", "k2"];
    for n in names {
        src.push_str(&format!(
            ".visible .entry {n}(.param .u64 p)\n{{\n\t.reg .b64 %rd<2>;\n\tld.param.u64 %rd1, [p];\n\
             \tst.global.u32 [%rd1], 0;\n\tret;\n}}\n"
        ));
    }
    let numbers = gpusan_abi::function_numbers(&names);
    assert_eq!(numbers, [5, 1, 2, 0, 3, 4], "byte order: upper case and `_` first");
    let mut module = gpusan_ptx::parse(&src).unwrap();
    let report = check::run_with(&mut module, Some(&src), &CheckConfig::default()).unwrap();
    let by_pass: Vec<(&str, u32)> = report.functions.iter().map(|f| (f.name.as_str(), f.index)).collect();
    let by_abi: Vec<(&str, u32)> = names.into_iter().zip(numbers.iter().copied()).collect();
    assert_eq!(by_pass, by_abi);
    let out = gpusan_passes::instrument(&src, &CheckWith(CheckConfig::default())).unwrap().ptx;
    for (name, number) in by_abi {
        let body = out.split(".visible .entry ").find(|f| f.starts_with(&format!("{name}("))).unwrap();
        let writes = format!("\tor.b32 \t%__gs_k, %__gs_k, {number};\n");
        assert!(body.contains(&writes), "{name}'s records do not carry function number {number}:\n{body}");
    }
}
