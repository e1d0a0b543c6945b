//! The README's first command, `scripts/demo.sh`, on a machine without a GPU (this one, CI):
//! it builds examples/planted/overflow.cu with the pinned nvcc, instruments the kernel's PTX
//! with gpusan's check pass and assembles the result, then shows the finding of a recorded
//! run through `gpusan report show`, saying that it is recorded, or says plainly that no
//! recorded run is present. The recorded report here is one a fake-driver run just wrote
//! (the real one comes from the H100: bench/reliability/demo_example.sh).

mod fake_driver;

use std::path::{Path, PathBuf};
use std::process::Command;

/// `scripts/demo.sh` as if on a machine without a GPU, with this build's gpusan, showing
/// `recorded`; its exit code and its standard output and error, merged as a terminal shows
/// them.
fn demo(work: &Path, recorded: &Path) -> (Option<i32>, String) {
    let root = gpusan_testkit::repo_root();
    let out = Command::new("bash")
        .args(["-c", "exec \"$0\" 2>&1"])
        .arg(root.join("scripts/demo.sh"))
        .env("GPUSAN", env!("CARGO_BIN_EXE_gpusan"))
        .env("GPUSAN_DEMO_GPU", "0")
        .env("GPUSAN_DEMO_WORK", work)
        .env("GPUSAN_DEMO_RECORDED", recorded)
        .env_remove("NVCC")
        .output()
        .unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
}

fn work(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("gpusan-demo-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The number in the check pass's `N sites instrumented by `check`` line.
fn sites(text: &str) -> u64 {
    let line = text.lines().find(|l| l.contains("sites instrumented by `check`")).unwrap_or_else(|| panic!("{text}"));
    line.split_whitespace().nth(1).and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("{line}"))
}

/// Without a recorded run the demo still builds and instruments the example, then says that
/// no recorded run is present, and shows no report.
#[test]
fn without_a_gpu_the_demo_instruments_the_example_and_says_no_run_is_recorded() {
    let dir = work("none");
    let (code, text) = demo(&dir.join("work"), &dir.join("absent.report.json"));
    assert_eq!(code, Some(0), "{text}");
    assert!(dir.join("work/overflow").is_file(), "the example was built: {text}");
    // `scale` has one global load and one global store: both checked.
    assert_eq!(sites(&text), 2, "{text}");
    assert!(dir.join("work/overflow.checked.cubin").is_file(), "the instrumented PTX assembled: {text}");
    assert!(text.contains("no recorded run is present"), "{text}");
    assert!(!text.contains("ERROR SUMMARY") && !text.contains("NOT from this machine"), "{text}");
}

/// With a recorded report the demo renders it with gpusan's own text renderer (what
/// `gpusan report show` prints), under a line saying that it is recorded, and where.
#[test]
fn without_a_gpu_the_demo_shows_the_recorded_run_as_recorded() {
    let fake = fake_driver::build("demo", &[("prog", "prog.c")]);
    let prog = fake.join("prog");
    let o = fake_driver::gpusan_run(&fake, &[], &[prog.to_str().unwrap(), "link", "checked_kernel"], &[]);
    assert_eq!(o.report["summary"]["total"], 1, "{:#}", o.report);
    let dir = work("recorded");
    let recorded = dir.join("run.report.json");
    std::fs::write(&recorded, serde_json::to_string_pretty(&o.report).unwrap()).unwrap();
    std::fs::write(dir.join("run.about"), "on the fake driver of crates/cli/tests/demo.rs").unwrap();

    let (code, text) = demo(&dir.join("work"), &recorded);
    assert_eq!(code, Some(0), "{text}");
    assert_eq!(sites(&text), 2, "{text}");
    assert!(text.contains("NOT from this machine"), "{text}");
    assert!(text.contains("recorded on the fake driver of crates/cli/tests/demo.rs"), "{text}");
    let shown = Command::new(env!("CARGO_BIN_EXE_gpusan")).args(["report", "show"]).arg(&recorded).output().unwrap();
    let shown = String::from_utf8(shown.stdout).unwrap();
    assert!(shown.contains("Out-of-bounds __global__ write") && shown.contains("ERROR SUMMARY: 1 error"), "{shown}");
    assert!(text.ends_with(&shown), "the demo ends with the rendered report:\n{text}");
    assert!(text.find("NOT from this machine") < text.find("========= GPUSAN"), "said before it is shown:\n{text}");
}

/// A recording committed beside the example (`examples/planted/*.report.json`, from
/// bench/reliability/demo_example.sh on a GPU) is a run of this example: it renders, says
/// where it was recorded (its `.about`), and its finding is the planted write, in `scale`
/// at the marked line, by thread 256. (None is committed until the H100 has run the case.)
#[test]
fn every_committed_recording_is_a_run_of_the_example() {
    let dir = gpusan_testkit::repo_root().join("examples/planted");
    let src = std::fs::read_to_string(dir.join("overflow.cu")).unwrap();
    let line = 1 + src.lines().position(|l| l.contains("the write gpusan reports")).expect("the marked line") as u64;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let Some(stem) = path.to_str().and_then(|p| p.strip_suffix(".report.json")) else { continue };
        assert!(Path::new(&format!("{stem}.about")).is_file(), "{}: no .about beside it", path.display());
        let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        fake_driver::schema::assert_matches_schema(&doc);
        let d = &doc["errors"][0]["details"];
        assert_eq!(doc["summary"]["by_kind"], serde_json::json!({"out_of_bounds_write": 1}), "{}", path.display());
        assert!(d["kernel"].as_str().unwrap_or_default().starts_with("scale("), "{d:#}");
        assert!(d["source"]["file"].as_str().unwrap_or_default().ends_with("overflow.cu"), "{d:#}");
        assert_eq!(
            (d["source"]["line"].as_u64(), &d["block"], &d["thread"]),
            (Some(line), &serde_json::json!([2, 0, 0]), &serde_json::json!([0, 0, 0]))
        );
        let shown = Command::new(env!("CARGO_BIN_EXE_gpusan")).args(["report", "show"]).arg(&path).output().unwrap();
        let shown = String::from_utf8(shown.stdout).unwrap();
        assert!(shown.contains(&format!("overflow.cu:{line}")) && shown.contains("ERROR SUMMARY: 1 error"), "{shown}");
    }
}
