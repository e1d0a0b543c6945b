//! `gpusan serve` as an operator starts it, on the fake driver: it listens, `--status`
//! shows its tenants, and a second manager on a live socket is refused.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn fake_driver(dir: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fake_cuda/libcuda.c");
    let lib = dir.join("libcuda.so.1");
    let out = Command::new("cc")
        .args(["-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o"])
        .arg(&lib)
        .arg(&src)
        .output()
        .expect("a C compiler (cc)");
    assert!(out.status.success(), "cc: {}", String::from_utf8_lossy(&out.stderr));
    lib
}

fn gpusan() -> Command {
    Command::new(env!("CARGO_BIN_EXE_gpusan"))
}

#[test]
fn a_manager_listens_and_its_status_lists_no_tenant_yet() {
    let dir = tempfile::tempdir().unwrap();
    let lib = fake_driver(dir.path());
    let socket = dir.path().join("serve.sock");
    let mut manager = gpusan()
        .args(["serve", "--driver"])
        .arg(&lib)
        .arg("--socket")
        .arg(&socket)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        let out = gpusan().args(["serve", "--status", "--socket"]).arg(&socket).output().unwrap();
        if out.status.success() {
            break String::from_utf8(out.stdout).unwrap();
        }
        assert!(Instant::now() < deadline, "no manager answered: {}", String::from_utf8_lossy(&out.stderr));
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.starts_with("0 tenant(s) at"), "{status}");
    // The socket is live: a second manager does not take it over.
    let second = gpusan().args(["serve", "--driver"]).arg(&lib).arg("--socket").arg(&socket).output().unwrap();
    assert!(!second.status.success());
    assert!(String::from_utf8_lossy(&second.stderr).contains("cannot listen at"), "{second:?}");
    manager.kill().unwrap();
    manager.wait().unwrap();
}

#[test]
fn status_without_a_manager_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let out = gpusan().args(["serve", "--status", "--socket"]).arg(dir.path().join("none.sock")).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no manager at"), "{out:?}");
}
