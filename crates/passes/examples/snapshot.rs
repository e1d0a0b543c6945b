//! Instruments PTX files with every configuration the runtime uses and writes the results
//! to a folder, one file per input and configuration: `scripts/instrument-snapshot.sh`
//! compares two builds of the passes byte for byte with it (a refactoring must not change
//! a single instrumented byte, or must list each difference).
//!
//! `cargo run --release -p gpusan-passes --example snapshot -- OUT_DIR a.ptx b.ptx …`

use std::path::Path;

use gpusan_passes::check::{CheckConfig, CheckWith, Counting, Reaction};
use gpusan_passes::count::Count;
use gpusan_passes::Pass;

fn check_config(name: &str) -> Option<CheckConfig> {
    match name {
        "check" => Some(CheckConfig::default()),
        "check-abort" => Some(CheckConfig { reaction: Reaction::Abort, ..Default::default() }),
        "check-count" => Some(CheckConfig { counting: Counting::Dynamic, ..Default::default() }),
        _ => None,
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let out = args.next().expect("usage: snapshot OUT_DIR FILE.ptx…");
    let out = Path::new(&out);
    std::fs::create_dir_all(out).unwrap();
    let configs: Vec<(&str, Box<dyn Pass>)> = vec![
        ("check", Box::new(CheckWith(check_config("check").unwrap()))),
        ("check-abort", Box::new(CheckWith(check_config("check-abort").unwrap()))),
        ("check-count", Box::new(CheckWith(check_config("check-count").unwrap()))),
        ("count", Box::new(Count::default())),
    ];
    let mut files = 0;
    for input in args {
        let src = std::fs::read_to_string(&input).unwrap_or_else(|e| panic!("{input}: {e}"));
        let stem = Path::new(&input).file_name().unwrap().to_string_lossy().into_owned();
        for (name, pass) in &configs {
            let text = match gpusan_passes::instrument(&src, &**pass) {
                Ok(i) => {
                    let mut t = i.ptx;
                    t.push_str("\n// report\n");
                    for f in &i.report.functions {
                        t.push_str(&format!("// {} sites={} inserted={}\n", f.name, f.sites, f.inserted));
                    }
                    if let Some(config) = check_config(name) {
                        let mut m = gpusan_ptx::parse(&src).unwrap();
                        let r = gpusan_passes::check::run_with(&mut m, Some(&src), &config).unwrap();
                        t.push_str(&format!("// {r:?}\n"));
                    }
                    t
                }
                Err(e) => format!("ERROR: {e}\n"),
            };
            std::fs::write(out.join(format!("{stem}.{name}")), text).unwrap();
            files += 1;
        }
    }
    eprintln!("snapshot: {files} files in {}", out.display());
}
