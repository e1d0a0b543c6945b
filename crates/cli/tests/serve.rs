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

/// The manager's log line announcing a tenant: its partition's base and size.
fn partition_of(log: &str) -> Option<(u64, u64)> {
    let line = log.lines().find(|l| l.contains("started: partition of"))?;
    let mib: u64 = line.split("partition of ").nth(1)?.split(' ').next()?.parse().ok()?;
    let base = u64::from_str_radix(line.split(" at 0x").nth(1)?.trim(), 16).ok()?;
    Some((base, mib << 20))
}

/// A manager on the fake driver and `tenant.c` built against it, in a folder of their own.
struct Fixture {
    dir: tempfile::TempDir,
    tenant: PathBuf,
    socket: PathBuf,
    log: PathBuf,
    manager: std::process::Child,
}

impl Fixture {
    /// `FAKE_CUDA_LOADED` for the manager: where the fake driver writes the last module it
    /// loaded.
    fn start() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let lib = fake_driver(dir.path());
        let _ = std::os::unix::fs::symlink(&lib, dir.path().join("libcuda.so"));
        let tenant = dir.path().join("tenant");
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fake_cuda/tenant.c");
        let out = Command::new("cc")
            .arg("-o")
            .arg(&tenant)
            .arg(&src)
            .arg(format!("-L{}", dir.path().display()))
            .arg(format!("-Wl,-rpath,{}", dir.path().display()))
            .args(["-lcuda", "-ldl"])
            .output()
            .unwrap();
        assert!(out.status.success(), "cc: {}", String::from_utf8_lossy(&out.stderr));
        let socket = dir.path().join("serve.sock");
        let log = dir.path().join("manager.log");
        let manager = gpusan()
            .args(["serve", "--driver"])
            .arg(&lib)
            .arg("--socket")
            .arg(&socket)
            .env("FAKE_CUDA_LOADED", dir.path().join("loaded.ptx"))
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while !gpusan().args(["serve", "--status", "--socket"]).arg(&socket).output().unwrap().status.success() {
            assert!(Instant::now() < deadline, "no manager");
            std::thread::sleep(Duration::from_millis(50));
        }
        Fixture { dir, tenant, socket, log, manager }
    }

    /// Stops the manager: its folder and log.
    fn stop(mut self) -> (tempfile::TempDir, String) {
        let _ = self.manager.kill();
        let _ = self.manager.wait();
        let log = std::fs::read_to_string(&self.log).unwrap();
        let dir = tempfile::tempdir().unwrap();
        (std::mem::replace(&mut self.dir, dir), log)
    }
}

impl Drop for Fixture {
    /// A test that fails midway must not leave its manager running (holding the test's
    /// output open).
    fn drop(&mut self) {
        let _ = self.manager.kill();
        let _ = self.manager.wait();
    }
}

#[test]
fn a_driver_api_program_runs_as_a_fenced_tenant_in_its_partition() {
    let f = Fixture::start();
    let (tenant, socket) = (f.tenant.clone(), f.socket.clone());
    let report = f.dir.path().join("report.json");
    let loaded = f.dir.path().join("loaded.ptx");
    let run = gpusan()
        .args(["run", "--mode", "fence", "--fence-memory-log2", "26", "--server"])
        .arg(&socket)
        .arg("--report-json")
        .arg(&report)
        .arg("--")
        .arg(&tenant)
        // nvcc's fatbin (cubin and compressed PTX): its PTX is what the manager fences.
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../fatbin/tests/fixtures/sm90.fatbin"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout).into_owned();
    let (_dir, log) = f.stop();
    assert!(stdout.contains("tenant ok"), "{stdout}\n{}\nmanager: {log}", String::from_utf8_lossy(&run.stderr));
    let (base, size) = partition_of(&log).unwrap_or_else(|| panic!("{log}"));
    assert_eq!(size, 1 << 26);
    let pointer = stdout.split("pointer 0x").nth(1).and_then(|s| s.split(' ').next()).unwrap();
    let pointer = u64::from_str_radix(pointer, 16).unwrap();
    assert!((base..base + size).contains(&pointer), "{pointer:#x} outside {base:#x}+{size:#x}");
    assert!(!stdout.contains("past=0"), "a copy past the allocation went through: {stdout}");
    // The device as a tenant sees it: the manager's GPU, its partition as its memory.
    assert!(stdout.contains("cc=9 name=gpusan fake GPU version=13000 total=67108864 free<total=1 same=1"), "{stdout}");
    assert!(stdout.contains("stream query=0 elapsed>=0=1 copied=1 set=1"), "{stdout}");
    assert!(stdout.contains("fatbin module ok"), "{stdout}");
    assert!(std::fs::read_to_string(&loaded).unwrap().contains("__gpusan_fence"), "the driver got an unfenced module");
    assert!(log.contains("left (disconnected)"), "{log}");
    assert!(log.contains("gave a segment of 8 MiB for its copies"), "copies did not go through a segment: {log}");
    let report = std::fs::read_to_string(&report).unwrap();
    assert!(report.contains("a tenant of `gpusan serve`"), "{report}");
    assert!(!stdout.contains("hostalloc=0"), "an unforwarded call reached a driver: {stdout}");
    assert!(report.contains("does not serve") && report.contains("cuMemHostAlloc"), "{report}");
}

#[test]
fn fence_mode_needs_a_server_and_a_server_needs_fence_mode() {
    let out = gpusan().args(["run", "--mode", "fence", "--", "true"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("--mode fence needs --server"), "{out:?}");
    let out = gpusan().args(["run", "--server", "/tmp/x.sock", "--", "true"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("--server is for --mode fence"), "{out:?}");
}

/// A program that finds the driver with dlopen and dlsym (as Triton and cuda-python do) gets
/// the forwarding functions too, also for the driver functions gpusan does not stand in for
/// (`cuCtxGetCurrent`).
#[test]
fn a_program_finding_the_driver_by_dlsym_is_forwarded_too() {
    let f = Fixture::start();
    let run = gpusan()
        .args(["run", "--mode", "fence", "--fence-memory-log2", "25", "--server"])
        .arg(&f.socket)
        .arg("--")
        .arg(&f.tenant)
        .arg("dlsym")
        .env("LD_LIBRARY_PATH", f.dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout).into_owned();
    let (_dir, log) = f.stop();
    assert!(
        stdout.contains("total=33554432 ctx=1"),
        "{stdout}\n{}\nmanager: {log}",
        String::from_utf8_lossy(&run.stderr)
    );
    let (base, size) = partition_of(&log).unwrap_or_else(|| panic!("{log}"));
    let pointer = stdout.split("pointer 0x").nth(1).and_then(|s| s.split(' ').next()).unwrap();
    let pointer = u64::from_str_radix(pointer, 16).unwrap();
    assert!((base..base + size).contains(&pointer), "{pointer:#x} outside {base:#x}+{size:#x}");
}

/// The pass-through stand-ins that exist for fenced tenants are handed out by the doors only
/// in a tenant: elsewhere a program that finds `cuEventRecord` by dlsym gets the driver's
/// own (no stand-in frame on a call gpusan does nothing with), while `cuMemAlloc_v2`, which
/// gpusan watches, is gpusan's in every mode.
#[test]
fn tenant_only_stand_ins_are_handed_out_only_to_tenants() {
    let f = Fixture::start();
    let lookup = |args: &[&str]| {
        let out = gpusan()
            .arg("run")
            .args(args)
            .arg("--")
            .arg(&f.tenant)
            .arg("lookup")
            .env("LD_LIBRARY_PATH", f.dir.path())
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let api = lookup(&["--mode", "api"]);
    assert!(api.contains("cuEventRecord from libcuda.so.1"), "{api}");
    assert!(api.contains("cuMemAlloc_v2 from libgpusan_inject.so"), "{api}");
    let server = f.socket.to_string_lossy().into_owned();
    let fenced = lookup(&["--mode", "fence", "--server", &server]);
    assert!(!fenced.contains("cuEventRecord from libcuda.so.1"), "a tenant got the real driver's: {fenced}");
    f.stop();
}

/// A tenant's launches sent back to back are queued on its side and written together; the
/// queue still reaches the manager while the program makes no further call (it sleeps after
/// its launches): the manager's status counts every launch before the program's next call,
/// and the program then finishes right.
#[test]
fn launches_queued_by_a_tenant_reach_the_manager_while_it_makes_no_call() {
    use std::io::BufRead;
    let f = Fixture::start();
    let mut run = gpusan()
        .args(["run", "--mode", "fence", "--server"])
        .arg(&f.socket)
        .arg("--")
        .arg(&f.tenant)
        .args(["burst", "200", "4"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(run.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("burst sent") {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "the tenant stopped before its launches");
    }
    // The tenant sleeps 4 s now, calling nothing.
    let deadline = Instant::now() + Duration::from_secs(3);
    let launches = loop {
        let status = gpusan().args(["serve", "--status", "--socket"]).arg(&f.socket).output().unwrap();
        let status = String::from_utf8_lossy(&status.stdout).into_owned();
        let launches = status
            .lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .find(|t| t.get(1) == Some(&"tenant"))
            .and_then(|t| t.get(7).and_then(|n| n.parse::<u64>().ok()));
        if launches == Some(200) || Instant::now() > deadline {
            break (launches, status);
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(launches.0, Some(200), "launches the manager got while the tenant made no call: {}", launches.1);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    assert!(run.wait().unwrap().success(), "{rest}");
    assert!(rest.contains("burst ok"), "{rest}");
}

/// A copy larger than the tenant's shared segment goes through it in pieces, each piece at
/// its own place on the device: 20 MiB in and back, and a part from an offset that is no
/// piece boundary, come back byte for byte.
#[test]
fn copies_larger_than_the_segment_go_through_it_in_pieces() {
    let f = Fixture::start();
    let run = gpusan()
        .args(["run", "--mode", "fence", "--server"])
        .arg(&f.socket)
        .arg("--")
        .arg(&f.tenant)
        .arg("bigcopy")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout).into_owned();
    let (_dir, log) = f.stop();
    assert!(stdout.contains("bigcopy ok"), "{stdout}\n{}\nmanager: {log}", String::from_utf8_lossy(&run.stderr));
    assert!(log.contains("gave a segment of 8 MiB"), "{log}");
}

/// A program's own `cuTensorMapEncodeTiled` reaches the manager, which makes the map on the
/// tenant's memory; its kernel's tensor copy runs with that map, and not with one the
/// program wrote itself.
#[test]
fn a_tenants_tensor_copies_run_with_the_maps_the_manager_made() {
    let f = Fixture::start();
    let run = gpusan()
        .args(["run", "--mode", "fence", "--fence-memory-log2", "26", "--server"])
        .arg(&f.socket)
        .arg("--")
        .arg(&f.tenant)
        .arg("tma")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&run.stderr).into_owned();
    let (_dir, log) = f.stop();
    // 1: CUDA_ERROR_INVALID_VALUE, for the map past the partition and the made-up map's launch.
    assert!(stdout.contains("tma made=ok past=1 forged_sync=1"), "{stdout}\n{stderr}\nmanager: {log}");
    assert!(log.contains("holds no map the manager made"), "{log}");
}
