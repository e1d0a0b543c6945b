//! Stage tests of the `check` pass: each `fixtures/check/<stage>/*.ptx` is an input module,
//! a `// ---- expected` line, then the pass's report and what the stage planned for each
//! function (`check::run_explained`), the plan's sections the stage is about and nothing
//! of the instrumented text. `BLESS=1 cargo test -p gpusan-passes --test check_stages`
//! rewrites the expected parts. An input line `// check-reaction: abort` or
//! `// check-count: dynamic` instruments with that configuration; `// check-code: LINE`
//! asserts that the instrumented module has that line (what the code made of the plan must
//! do, where the plan alone does not say it).
//!
//! The instrumented module of every fixture is also verified and assembled by the pinned
//! ptxas: a plan that looks right but makes broken code fails here too.

mod common;

use std::fmt::Write;
use std::path::{Path, PathBuf};

use gpusan_passes::check::{self, CheckConfig, CheckReport};

/// Each stage's folder, and the sections of the plan its fixtures show.
const STAGES: &[(&str, &[&str])] = &[
    ("roots", &["sites", "roots"]),
    ("shadows", &["sites", "roots", "shadows"]),
    ("groups", &["sites", "groups"]),
    ("spans", &["groups", "spans"]),
    ("loops", &["roots", "loops"]),
    ("block", &["roots", "block"]),
    ("onchip", &["sites", "groups"]),
    ("heap", &["roots", "heap"]),
];

fn stage_dir(stage: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/check").join(stage)
}

fn config_of(input: &str) -> CheckConfig {
    common::check_config_of(input)
}

/// The report's counts, as `tests/check.rs` prints them.
fn report_lines(report: &CheckReport) -> String {
    let mut s = String::new();
    for f in &report.functions {
        let _ = writeln!(
            s,
            "// {} (function {}): {} checked ({} carried), {} roots; unchecked: {} multi-root, {} no root, \
             {} unknown width, {} other",
            f.name, f.index, f.checked, f.carried, f.roots, f.multi_root, f.no_root, f.unknown_width, f.other
        );
        let _ = writeln!(
            s,
            "//   {} shared, {} local, {} scope ({} in bounds statically); {} grouped behind {} group checks, \
             {} block roots, {} spans, {} loops ({} accesses), {} heap calls",
            f.shared,
            f.local,
            f.scope,
            f.static_in_bounds,
            f.grouped,
            f.group_checks,
            f.block_roots,
            f.spans,
            f.loops_versioned,
            f.loop_hoisted,
            f.heap_calls
        );
    }
    s
}

/// The plan's lines of `sections` only (and the lines naming the functions).
fn sections(plans: &str, sections: &[&str]) -> String {
    let mut out = String::new();
    let mut keep = false;
    for line in plans.lines() {
        if line.starts_with("function ") {
            keep = true;
            out.push_str(line);
            out.push('\n');
            continue;
        }
        if let Some(name) = line.strip_prefix("  ").and_then(|l| l.strip_suffix(':')).filter(|n| !n.starts_with(' ')) {
            keep = sections.contains(&name);
        }
        if keep {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// The lines of the input's `// check-code: LINE` comments that the instrumented module
/// lacks (whitespace aside): what a stage fixture asserts of the code made from its plan.
fn missing_code(input: &str, module: &gpusan_ptx::Module) -> String {
    let squeeze = |l: &str| l.split_whitespace().collect::<Vec<_>>().join(" ");
    let printed: std::collections::HashSet<String> = gpusan_ptx::print(module).lines().map(squeeze).collect();
    let mut out = String::new();
    for want in input.lines().filter_map(|l| l.strip_prefix("// check-code: ")) {
        if !printed.contains(&squeeze(want)) {
            let _ = writeln!(out, "// missing from the instrumented module: {want}");
        }
    }
    out
}

fn render(input: &str, stage: &[&str]) -> String {
    let config = config_of(input);
    let mut module = match gpusan_ptx::parse(input) {
        Ok(m) => m,
        Err(e) => return format!("// error: {e}\n"),
    };
    match check::run_explained(&mut module, Some(input), &config) {
        Ok((report, plans)) => {
            if let Err(e) = gpusan_passes::verify(&module) {
                return format!("// error: the instrumented module does not verify: {e}\n");
            }
            report_lines(&report) + &sections(&plans, stage) + &missing_code(input, &module)
        }
        Err(e) => e.to_string().lines().map(|l| format!("// error: {l}\n")).collect(),
    }
}

#[test]
fn stage_plans() {
    for (stage, shown) in STAGES {
        gpusan_testkit::file_tests(&stage_dir(stage), 1, |input| render(input, shown));
    }
}

/// The instrumented module of every stage fixture assembles (the plans are of real code).
#[test]
fn stage_fixtures_assemble() {
    let ptxas = gpusan_testkit::ptxas();
    let work = std::env::temp_dir().join(format!("gpusan-stages-{}", std::process::id()));
    std::fs::create_dir_all(&work).unwrap();
    let mut failed = Vec::new();
    let mut assembled = 0;
    for (stage, _) in STAGES {
        let mut paths: Vec<_> = std::fs::read_dir(stage_dir(stage)).unwrap().map(|e| e.unwrap().path()).collect();
        paths.sort();
        for path in paths.iter().filter(|p| p.extension().is_some_and(|e| e == "ptx")) {
            let text = std::fs::read_to_string(path).unwrap();
            let input = text.split(gpusan_testkit::SEPARATOR).next().unwrap();
            let config = config_of(input);
            let Ok(out) = gpusan_passes::instrument(input, &check::CheckWith(config)) else { continue };
            let file = work.join("f.ptx");
            for (what, ptx) in [("input", input), ("instrumented", out.ptx.as_str())] {
                std::fs::write(&file, ptx).unwrap();
                match gpusan_testkit::assemble(&ptxas, &file, &work.join("f.cubin")) {
                    Ok(_) => assembled += 1,
                    Err(e) => failed.push(format!("{} ({what}):\n{e}", path.display())),
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&work);
    assert!(failed.is_empty(), "{}", failed.join("\n"));
    assert!(assembled >= 2 * STAGES.len(), "only {assembled} modules assembled");
}
