//! The front-end's central promise: for every PTX of the corpus, printing the parsed
//! module gives PTX that the pinned ptxas assembles to the same machine code, and
//! printing is a fixed point (`print∘parse∘print∘parse == print∘parse`).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

/// Fewer files than this means the corpus was not generated; passing on it would prove nothing.
const MIN_CORPUS: usize = 40 * 2;

#[test]
fn corpus_is_present() {
    let n = common::corpus_files().len();
    assert!(n >= MIN_CORPUS, "only {n} PTX files in tests/corpus: run scripts/build-corpus.sh");
}

#[test]
fn printing_is_stable() {
    let mut failures = Vec::new();
    for path in common::corpus_files() {
        let src = std::fs::read_to_string(&path).unwrap();
        let once = match gpusan_ptx::parse(&src) {
            Ok(m) => gpusan_ptx::print(&m),
            Err(e) => {
                failures.push(format!("{}", e.with_path(path.display().to_string())));
                continue;
            }
        };
        match gpusan_ptx::parse(&once) {
            Ok(m) if gpusan_ptx::print(&m) == once => {}
            Ok(_) => failures.push(format!("{}: printing twice differs from printing once", path.display())),
            Err(e) => failures.push(format!("printed {} does not parse:\n{e}", path.display())),
        }
    }
    assert!(failures.is_empty(), "{} files failed:\n{}", failures.len(), failures.join("\n"));
}

/// Assembles `ptx` for the target its `.target` names and returns the disassembly.
fn sass(bin: &Path, ptx: &Path, out_dir: &Path) -> Result<String, String> {
    let cubin = out_dir.join("k.cubin");
    common::assemble(&bin.join("ptxas"), ptx, &cubin).map_err(|e| format!("ptxas {}: {e}", ptx.display()))?;
    let out = Command::new(bin.join("cuobjdump")).arg("-sass").arg(&cubin).output().map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!("cuobjdump: {}", String::from_utf8_lossy(&out.stderr)));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn check_one(bin: &Path, path: &Path, work: &Path) -> Result<(), String> {
    let src = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let module = gpusan_ptx::parse(&src).map_err(|e| e.with_path(path.display().to_string()).to_string())?;
    let (a, b) = (work.join("orig"), work.join("printed"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    let printed = b.join("k.ptx");
    std::fs::write(&printed, gpusan_ptx::print(&module)).unwrap();
    let want = sass(bin, path, &a)?;
    let got = sass(bin, &printed, &b)?;
    if want != got {
        let line = want.lines().zip(got.lines()).position(|(x, y)| x != y).unwrap_or(0);
        return Err(format!(
            "{}: machine code differs after printing (first difference at disassembly line {}):\n  want: {}\n  got:  {}",
            path.display(),
            line + 1,
            want.lines().nth(line).unwrap_or(""),
            got.lines().nth(line).unwrap_or("")
        ));
    }
    Ok(())
}

#[test]
fn printed_ptx_assembles_to_identical_machine_code() {
    let bin = common::cuda_bin();
    let files = common::corpus_files();
    assert!(files.len() >= MIN_CORPUS, "corpus missing: run scripts/build-corpus.sh");
    let work = std::env::temp_dir().join(format!("gpusan-roundtrip-{}", std::process::id()));
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get()).min(8);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let failures = std::sync::Mutex::new(Vec::<String>::new());
    std::thread::scope(|s| {
        for w in 0..workers {
            let (bin, files, work, next, failures) = (&bin, &files, &work, &next, &failures);
            s.spawn(move || loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(path) = files.get(i) else { break };
                let dir: PathBuf = work.join(w.to_string());
                if let Err(e) = check_one(bin, path, &dir) {
                    failures.lock().unwrap().push(e);
                }
            });
        }
    });
    let _ = std::fs::remove_dir_all(&work);
    let failures = failures.into_inner().unwrap();
    assert!(failures.is_empty(), "{} of {} files failed:\n{}", failures.len(), files.len(), failures.join("\n"));
}
