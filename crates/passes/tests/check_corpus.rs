//! `check` over the whole corpus (nvcc at -O3, -lineinfo and -G, and Triton): every module
//! instruments, its output verifies (inside `instrument`) and the pinned ptxas assembles it.
//! The checked and unchecked accesses are printed for the record.

mod common;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use gpusan_passes::check::{self, Check};

/// Fewer files than this means the corpus was not generated; passing on it would prove nothing.
const MIN_CORPUS: usize = 150;

/// ptxas runs on two threads: the machines this runs on have two cores.
const PTXAS_THREADS: usize = 2;

#[derive(Default)]
struct Totals {
    checked: u64,
    shared: u64,
    local: u64,
    multi_root: u64,
    carried: u64,
    no_root: u64,
    unknown_width: u64,
    other: u64,
    grouped: u64,
    group_checks: u64,
    roots: u64,
    block_roots: u64,
}

fn assemble_one(ptxas: &Path, path: &Path, dir: &Path, totals: &Mutex<Totals>) -> Result<(), String> {
    let shown = path.display().to_string();
    let src = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let out = gpusan_passes::instrument(&src, &Check).map_err(|e| e.with_path(&shown).to_string())?;
    let mut module = gpusan_ptx::parse(&src).map_err(|e| e.to_string())?;
    let details = check::run(&mut module, Some(&src)).map_err(|e| e.to_string())?;
    if gpusan_ptx::print(&module) != out.ptx {
        return Err(format!("{shown}: check::run and instrument disagree"));
    }
    {
        let mut t = totals.lock().unwrap();
        for f in &details.functions {
            t.checked += f.checked as u64;
            t.shared += f.shared as u64;
            t.local += f.local as u64;
            t.multi_root += f.multi_root as u64;
            t.carried += f.carried as u64;
            t.no_root += f.no_root as u64;
            t.unknown_width += f.unknown_width as u64;
            t.other += f.other as u64;
            t.grouped += f.grouped as u64;
            t.group_checks += f.group_checks as u64;
            t.roots += f.roots as u64;
            t.block_roots += f.block_roots as u64;
        }
    }
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let instrumented = dir.join("instrumented.ptx");
    std::fs::write(&instrumented, &out.ptx).map_err(|e| e.to_string())?;
    common::assemble(ptxas, &instrumented, &dir.join("k.cubin"))
        .map_err(|e| format!("{shown}: instrumented with check, it does not assemble:\n{e}"))?;
    Ok(())
}

#[test]
fn check_instrumented_corpus_assembles() {
    let ptxas = common::ptxas();
    let files = common::corpus_files();
    assert!(files.len() >= MIN_CORPUS, "only {} PTX files in tests/corpus: run scripts/build-corpus.sh", files.len());
    let work = std::env::temp_dir().join(format!("gpusan-check-assemble-{}", std::process::id()));
    let next = AtomicUsize::new(0);
    let totals = Mutex::new(Totals::default());
    let failures = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for w in 0..PTXAS_THREADS {
            let (ptxas, files, work, next, totals, failures) = (&ptxas, &files, &work, &next, &totals, &failures);
            s.spawn(move || {
                let dir: PathBuf = work.join(w.to_string());
                while let Some(path) = files.get(next.fetch_add(1, Ordering::Relaxed)) {
                    if let Err(e) = assemble_one(ptxas, path, &dir, totals) {
                        failures.lock().unwrap().push(e);
                    }
                }
            });
        }
    });
    let _ = std::fs::remove_dir_all(&work);
    let t = totals.into_inner().unwrap();
    eprintln!(
        "{} files: {} global/generic accesses checked against the table ({} of them with several roots, through \
         shadows), {} shared and {} local against their variables; unchecked: {} multi-root, {} no root, {} unknown \
         width, {} other spaces or prefetches",
        files.len(),
        t.checked,
        t.carried,
        t.shared,
        t.local,
        t.multi_root,
        t.no_root,
        t.unknown_width,
        t.other
    );
    eprintln!(
        "optimizations: {} of {} checks on a group's fast path ({} group checks), {} of {} roots looked up once per block",
        t.grouped, t.checked, t.group_checks, t.block_roots, t.roots
    );
    let failures = failures.into_inner().unwrap();
    assert!(failures.is_empty(), "{} of {} files failed:\n{}", failures.len(), files.len(), failures.join("\n\n"));
}
