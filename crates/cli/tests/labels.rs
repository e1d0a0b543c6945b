//! Test marks (`gpusan_set_label`): findings name what the program said it was doing when
//! they were made, a pytest test id say (the report's `label`, "during: …" in text). A
//! kernel's record left unread when the label changes belongs to the label it ran under:
//! the label's change reads it first. With the fake driver, driven from Python through
//! ctypes as the pytest plugin drives it (tests/fake_cuda/pyext.c).

mod fake_driver;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

const SCRIPT: &str = r#"
a = ext.ext_alloc(1024)
print("kernel", set_label(b"tests/test_k.py::test_kernel"))
print("launch", ext.ext_launch_store(a + 1024 + 4))
print("copy", set_label(b"tests/test_k.py::test_copy"))
ext.ext_copy(a, 1028)
print("cleared", set_label(None))
ext.ext_copy(a, 1032)
ext.ext_free(a)
"#;

fn dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| fake_driver::build("labels", &[]))
}

fn run(mode: &str) -> fake_driver::Outcome {
    let d = dir();
    let script = format!("{}{SCRIPT}", fake_driver::PYTHON_PROLOGUE);
    let mut program = fake_driver::python_ext(d, "labels.py", &script);
    program.push("labels".into());
    let program: Vec<&str> = program.iter().map(String::as_str).collect();
    let cache = d.join(format!("cache-{mode}"));
    fake_driver::gpusan_run(d, &["--mode", mode], &program, &[("GPUSAN_CACHE_DIR", cache.as_path())])
}

fn labelled<'a>(o: &'a fake_driver::Outcome, kind: &str) -> Vec<(&'a str, &'a serde_json::Value)> {
    o.report["errors"]
        .as_array()
        .map(|e| e.iter().filter(|e| e["kind"] == kind).map(|e| (e["label"].as_str().unwrap_or(""), e)).collect())
        .unwrap_or_default()
}

#[test]
fn each_finding_names_the_label_it_was_made_under_and_a_pending_kernel_record_its_own() {
    let o = run("check");
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
    assert!(o.stdout.contains("kernel 0\nlaunch 0\ncopy 0\ncleared 0\n"), "{}{}", o.stdout, o.stderr);
    // Launched under test_kernel, never synchronized by the program: read when the label
    // changed, so it is test_kernel's, not test_copy's (nor unlabelled, read at exit).
    let kernel = labelled(&o, "out_of_bounds_write");
    assert_eq!(kernel.len(), 1, "{:#}", o.report);
    assert_eq!(kernel[0].0, "tests/test_k.py::test_kernel", "{:#}", o.report);
    let copies = labelled(&o, "memcpy_out_of_bounds");
    let labels: Vec<&str> = copies.iter().map(|(l, _)| *l).collect();
    assert_eq!(labels, ["tests/test_k.py::test_copy", ""], "{:#}", o.report);
    assert!(copies[1].1.get("label").is_none(), "a cleared label is no field: {:#}", copies[1].1);
    assert!(o.stderr.contains("during: tests/test_k.py::test_kernel\n"), "{}", o.stderr);
    assert!(o.stderr.contains("during: tests/test_k.py::test_copy\n"), "{}", o.stderr);
}

#[test]
fn in_api_mode_labels_mark_the_host_findings() {
    // api mode: kernels run unchecked, so nothing is drained; the host findings are labelled.
    let o = run("api");
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
    assert!(o.stdout.contains("kernel 0\nlaunch 0\ncopy 0\ncleared 0\n"), "{}{}", o.stdout, o.stderr);
    assert_eq!(o.count("out_of_bounds_write"), 0, "{:#}", o.report);
    let labels: Vec<&str> = labelled(&o, "memcpy_out_of_bounds").iter().map(|(l, _)| *l).collect();
    assert_eq!(labels, ["tests/test_k.py::test_copy", ""], "{:#}", o.report);
}
