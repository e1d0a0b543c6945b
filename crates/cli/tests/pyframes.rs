//! Python frames in findings: under a Python interpreter, a site's stack starts with the
//! Python frames that led to the call (file, line, function of the user's script), then
//! the native ones; read only on a thread that holds the GIL (C extensions called with it
//! held, `ctypes.PyDLL`), never taken (`ctypes.CDLL` releases it: then no Python frames,
//! and the finding is still made). With the fake driver (tests/fake_cuda/pyext.c).

mod fake_driver;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The script's lines that matter are found by their comment, so the test names them.
const SCRIPT: &str = r#"
class Model:
    def build(self):
        return ext.ext_alloc(1024)  # ALLOC

    def step(self, a):
        return ext.ext_copy(a, 1028)  # COPY

def train():
    m = Model()
    a = m.build()
    m.step(a)  # STEP
    ext.ext_free(a)

train()  # TRAIN
"#;

fn dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| fake_driver::build("pyframes", &[]))
}

fn run(scenario: &str) -> (fake_driver::Outcome, String) {
    let d = dir();
    let script = format!("{}{SCRIPT}", fake_driver::PYTHON_PROLOGUE);
    let mut program = fake_driver::python_ext(d, "train_fake.py", &script);
    let file = program[1].clone();
    program.push(scenario.into());
    let program: Vec<&str> = program.iter().map(String::as_str).collect();
    (fake_driver::gpusan_run(d, &["--mode", "api"], &program, &[]), file)
}

/// The line of the script marked `# MARK`.
fn line_of(mark: &str) -> u64 {
    let script = format!("{}{SCRIPT}", fake_driver::PYTHON_PROLOGUE);
    script.lines().position(|l| l.ends_with(&format!("# {mark}"))).unwrap() as u64 + 1
}

fn python_frames(stack: &serde_json::Value, file: &str) -> Vec<(String, u64)> {
    // A stack is its frames in JSON.
    let frames = stack.as_array().cloned().unwrap_or_default();
    frames
        .iter()
        .take_while(|f| f["file"] == file)
        .map(|f| (f["function"].as_str().unwrap_or("").to_string(), f["line"].as_u64().unwrap_or(0)))
        .collect()
}

#[test]
fn a_finding_names_the_python_lines_that_led_to_the_call_then_the_native_frames() {
    let (o, file) = run("frames");
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
    assert_eq!(o.kinds(), vec!["memcpy_out_of_bounds"], "{:#}", o.report);
    let details = &o.report["errors"][0]["details"];
    let called = python_frames(&details["call_stack"], &file);
    let want = [("Model.step", line_of("COPY")), ("train", line_of("STEP")), ("<module>", line_of("TRAIN"))];
    let want: Vec<(String, u64)> = want.iter().map(|(f, l)| (f.to_string(), *l)).collect();
    assert_eq!(called, want, "{:#}", details["call_stack"]);
    // The native frames follow (the extension's, the interpreter's).
    let frames = details["call_stack"].as_array().unwrap();
    assert!(frames.len() > want.len(), "{:#}", details["call_stack"]);
    assert!(frames[want.len()..].iter().all(|f| f["file"] != file.as_str()), "{:#}", details["call_stack"]);
    // Where the buffer was allocated, too.
    let allocated = python_frames(&details["nearest"]["allocation"]["alloc_stack"], &file);
    assert_eq!(allocated.first(), Some(&("Model.build".to_string(), line_of("ALLOC"))), "{:#}", details);
    let text = format!("Python Frame: Model.step at {file}:{}\n", line_of("COPY"));
    assert!(o.stderr.contains(&text), "{}", o.stderr);
}

#[test]
fn a_call_made_with_the_gil_released_has_no_python_frames_and_is_still_found() {
    let (o, file) = run("frames_nogil");
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
    assert_eq!(o.kinds(), vec!["memcpy_out_of_bounds"], "{:#}", o.report);
    let stack = &o.report["errors"][0]["details"]["call_stack"];
    let frames = stack.as_array().unwrap();
    assert!(!frames.is_empty() && frames.iter().all(|f| f["file"] != file.as_str()), "{stack:#}");
    assert!(!o.stderr.contains("Python Frame"), "{}", o.stderr);
}
