//! The check-overhead workloads (`bench/workloads/*.cu`) as the GPU benchmark will run them:
//! each compiles with the pinned nvcc (`-O3 -arch=sm_90 -lineinfo`), its PTX instruments
//! with `check` (the output verifies inside `instrument`) and the pinned ptxas assembles
//! the result, with every global access of every kernel checked. A workload that fails
//! here would fail only on the GPU machine, late and with less to go on.
//!
//! The third-party programs (`bench/third-party.sh`, never committed) are compiled the same
//! way when they have been prepared in `bench/work/third_party/`.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use gpusan_passes::check::{self, Check};

/// The workload set the benchmark's targets name: fewer files means some went missing.
const MIN_WORKLOADS: usize = 8;

/// nvcc and ptxas run on two threads: the machines this runs on have two cores.
const THREADS: usize = 2;

const NVCC_FLAGS: [&str; 3] = ["-O3", "-arch=sm_90", "-lineinfo"];

struct Job {
    name: String,
    /// nvcc arguments besides the flags and the output.
    args: Vec<String>,
    cwd: PathBuf,
    /// Our own workloads must have every global access checked; the third-party programs
    /// are recorded, not held to that.
    all_checked: bool,
}

fn workloads() -> Vec<Job> {
    let root = common::repo_root();
    let dir = root.join("bench/workloads");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "cu"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| Job {
            name: p.file_stem().unwrap().to_string_lossy().into_owned(),
            args: vec![p.display().to_string()],
            cwd: root.clone(),
            all_checked: true,
        })
        .collect()
}

/// The programs prepared in `bench/work/third_party/`, if any: each folder's `nvcc.args`
/// (one argument per line, written by `bench/third-party.sh` next to its manifest.json).
fn third_party() -> Vec<Job> {
    let root = common::repo_root();
    let dir = root.join("bench/work/third_party");
    let Ok(entries) = std::fs::read_dir(&dir) else { return Vec::new() };
    let mut jobs: Vec<Job> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter_map(|d| {
            let text = std::fs::read_to_string(d.join("nvcc.args")).ok()?;
            let args = text
                .lines()
                .filter(|l| !l.is_empty())
                .map(|a| a.replace("@REPO@", &root.display().to_string()))
                .collect();
            Some(Job { name: d.file_name()?.to_string_lossy().into_owned(), args, cwd: d, all_checked: false })
        })
        .collect();
    jobs.sort_by(|a, b| a.name.cmp(&b.name));
    jobs
}

/// Compiles, instruments and assembles one job; returns a line for the record.
fn one(job: &Job, nvcc: &Path, ptxas: &Path, work: &Path) -> Result<String, String> {
    let ptx_path = work.join(format!("{}.ptx", job.name));
    let out = Command::new(nvcc)
        .args(NVCC_FLAGS)
        .arg("-ptx")
        .args(&job.args)
        .arg("-o")
        .arg(&ptx_path)
        .current_dir(&job.cwd)
        .output()
        .map_err(|e| format!("{}: running nvcc: {e}", job.name))?;
    if !out.status.success() {
        return Err(format!("{}: nvcc failed:\n{}", job.name, String::from_utf8_lossy(&out.stderr)));
    }
    let src = std::fs::read_to_string(&ptx_path).map_err(|e| e.to_string())?;
    let instrumented =
        gpusan_passes::instrument(&src, &Check).map_err(|e| format!("{}: {}", job.name, e.with_path(&job.name)))?;
    let mut module = gpusan_ptx::parse(&src).map_err(|e| e.to_string())?;
    let report = check::run(&mut module, Some(&src)).map_err(|e| e.to_string())?;
    let checked_path = work.join(format!("{}.check.ptx", job.name));
    std::fs::write(&checked_path, &instrumented.ptx).map_err(|e| e.to_string())?;
    common::assemble(ptxas, &checked_path, &work.join(format!("{}.cubin", job.name)))
        .map_err(|e| format!("{}: instrumented with check, it does not assemble:\n{e}", job.name))?;

    let kernels: Vec<_> = report.functions.iter().filter(|f| f.kind == gpusan_ptx::ast::FunctionKind::Entry).collect();
    if kernels.is_empty() {
        return Err(format!("{}: no kernel in the PTX", job.name));
    }
    let checked: u32 = kernels.iter().map(|f| f.checked).sum();
    let missed: Vec<String> = kernels
        .iter()
        .filter(|f| f.multi_root + f.no_root + f.unknown_width > 0)
        .map(|f| {
            format!(
                "{} ({} multi-root, {} no root, {} unknown width)",
                f.name, f.multi_root, f.no_root, f.unknown_width
            )
        })
        .collect();
    if job.all_checked && (checked == 0 || !missed.is_empty()) {
        return Err(format!("{}: global accesses left unchecked: {checked} checked; {missed:?}", job.name));
    }
    Ok(format!(
        "{}: {} kernels, {checked} accesses checked, {} added instructions{}",
        job.name,
        kernels.len(),
        kernels.iter().map(|f| f.inserted).sum::<u32>(),
        if missed.is_empty() { String::new() } else { format!("; unchecked in {missed:?}") }
    ))
}

#[test]
fn workloads_compile_instrument_and_assemble() {
    let nvcc = common::cuda_tool("nvcc");
    let ptxas = common::ptxas();
    let own = workloads();
    assert!(own.len() >= MIN_WORKLOADS, "only {} workloads in bench/workloads", own.len());
    let extra = third_party();
    let jobs: Vec<Job> = own.into_iter().chain(extra).collect();
    let work = std::env::temp_dir().join(format!("gpusan-check-workloads-{}", std::process::id()));
    std::fs::create_dir_all(&work).unwrap();
    let next = AtomicUsize::new(0);
    let results = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| {
                while let Some(job) = jobs.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let r = one(job, &nvcc, &ptxas, &work);
                    results.lock().unwrap().push(r);
                }
            });
        }
    });
    let _ = std::fs::remove_dir_all(&work);
    let results = results.into_inner().unwrap();
    let mut failures = Vec::new();
    for r in results {
        match r {
            Ok(line) => eprintln!("{line}"),
            Err(e) => failures.push(e),
        }
    }
    assert!(failures.is_empty(), "{} of {} workloads failed:\n{}", failures.len(), jobs.len(), failures.join("\n\n"));
}
