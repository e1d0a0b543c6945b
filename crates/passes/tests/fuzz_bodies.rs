//! The fuzz targets' bodies (`gpusan_passes::fuzz`, run by fuzz/fuzz_targets/{check,count,meta}.rs)
//! on the inputs of the hand-written fixtures, which are also the fuzzers' seeds: every configuration of
//! the check pass on every check fixture, the count pass on every count fixture, the
//! metadata readers on all of them. A seed that fails would stop CI's fuzzing at its first
//! input; here it fails with the fixture's name. Inputs a fuzzer once broke a body with go
//! in tests/fixtures/fuzz-regressions/<target>/, replayed here too.

use std::path::{Path, PathBuf};

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries {
        let p = e.unwrap().path();
        if p.is_dir() {
            files(&p, out);
        } else {
            out.push(p);
        }
    }
}

fn fixtures(sub: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    files(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(sub), &mut out);
    out.sort();
    out
}

/// A fixture's input: what comes before `// ---- expected` and the output the test expects.
fn input(path: &Path) -> Vec<u8> {
    let text = std::fs::read_to_string(path).unwrap();
    text.split("// ---- expected\n").next().unwrap_or_default().as_bytes().to_vec()
}

/// A fuzz target's body.
type Body = fn(&[u8]);

fn run(path: &Path, input: &[u8], body: Body) {
    if std::panic::catch_unwind(|| body(input)).is_err() {
        panic!("{} fails its fuzz target", path.display());
    }
}

#[test]
fn check_fixtures_in_every_configuration() {
    let paths: Vec<PathBuf> =
        fixtures("check").into_iter().filter(|p| p.extension().is_some_and(|e| e == "ptx")).collect();
    assert!(paths.len() > 20, "{} check fixtures", paths.len());
    for path in &paths {
        let src = input(path);
        for knobs in 0..4u8 {
            run(path, &[&[knobs][..], &src].concat(), gpusan_passes::fuzz::check);
        }
    }
}

#[test]
fn count_fixtures() {
    let paths = fixtures("count");
    assert!(paths.len() > 5, "{} count fixtures", paths.len());
    for path in &paths {
        run(path, &input(path), gpusan_passes::fuzz::count);
    }
}

/// The smaller passes (`canary_heap`, `fence`) on every count fixture (plain kernels) and
/// check fixture.
#[test]
fn rewrites_of_every_fixture() {
    for path in fixtures("check").iter().chain(&fixtures("count")) {
        for which in [0u8, 1] {
            let mut data = vec![which];
            data.extend_from_slice(&input(path));
            run(path, &data, gpusan_passes::fuzz::rewrite);
        }
    }
}

#[test]
fn metadata_of_every_fixture() {
    for path in fixtures("check").iter().chain(&fixtures("count")) {
        run(path, &input(path), gpusan_passes::fuzz::meta);
    }
}

#[test]
fn saved_fuzz_inputs() {
    let targets: [(&str, Body); 4] = [
        ("check", gpusan_passes::fuzz::check),
        ("count", gpusan_passes::fuzz::count),
        ("meta", gpusan_passes::fuzz::meta),
        ("rewrite", gpusan_passes::fuzz::rewrite),
    ];
    for (target, body) in targets {
        for path in fixtures(&format!("fuzz-regressions/{target}")) {
            run(&path, &std::fs::read(&path).unwrap(), body);
        }
    }
}
