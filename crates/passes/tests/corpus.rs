//! `count` over the whole corpus (nvcc at -O3, -lineinfo and -G, and Triton): the input
//! verifies, the output verifies, the pass touched exactly the counted instructions and
//! nothing else, and the pinned ptxas assembles every output.

mod common;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use gpusan_passes::count::{self, Count};
use gpusan_ptx::ast::{Item, Operand, Statement};
use gpusan_ptx::semantics::{memory_accesses, Space};

/// Fewer files than this means the corpus was not generated; passing on it would prove nothing.
const MIN_CORPUS: usize = 150;

/// ptxas runs on two threads: the machines this runs on have two cores.
const PTXAS_THREADS: usize = 2;

fn counted(stmts: &[Statement]) -> u64 {
    stmts
        .iter()
        .map(|s| match s {
            Statement::Inst(i) => {
                memory_accesses(i).iter().any(|a| matches!(a.space, Space::Global | Space::Generic)) as u64
            }
            Statement::Block(b) => counted(b),
            _ => 0,
        })
        .sum()
}

/// Removes what `count` inserts, checking each increment sits right before a counted
/// instruction with the same guard; returns how many were removed.
fn strip_increments(stmts: &mut Vec<Statement>, symbol: &str, problems: &mut Vec<String>) -> u64 {
    let mut removed = 0;
    let mut out = Vec::with_capacity(stmts.len());
    let mut pending: Option<gpusan_ptx::ast::Instruction> = None;
    for mut s in stmts.drain(..) {
        if let Statement::Block(b) = &mut s {
            removed += strip_increments(b, symbol, problems);
        }
        if let Some(inc) = pending.take() {
            match &s {
                Statement::Inst(i) if count::is_counted(i) && i.guard == inc.guard => {}
                other => problems.push(format!("increment not followed by its access: {other:?}")),
            }
        }
        let is_increment = matches!(&s, Statement::Inst(i) if i.opcode == "red"
            && i.modifiers == "global.add.u64"
            && matches!(i.operands.first(), Some(Operand::Address { base: Some(b), .. }) if *b == symbol));
        if is_increment {
            let Statement::Inst(i) = s else { unreachable!() };
            pending = Some(i);
            removed += 1;
        } else {
            out.push(s);
        }
    }
    if pending.is_some() {
        problems.push("increment at the end of a block".into());
    }
    *stmts = out;
    removed
}

fn check_one(path: &Path) -> Result<(), String> {
    let src = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let shown = path.display().to_string();
    let out = gpusan_passes::instrument(&src, &Count::default()).map_err(|e| e.with_path(&shown).to_string())?;
    let original = gpusan_ptx::parse(&src).map_err(|e| e.to_string())?;
    let want_sites: u64 = original
        .items
        .iter()
        .filter_map(|i| match i {
            Item::Function(f) => f.body.as_deref().map(counted),
            _ => None,
        })
        .sum();
    if out.report.total_sites() != want_sites {
        return Err(format!("{shown}: {} sites reported, {want_sites} counted instructions", out.report.total_sites()));
    }

    // Take the increments and the counter out again: what is left must print as the
    // original does, so the pass changed nothing else.
    let mut back = gpusan_ptx::parse(&out.ptx).map_err(|e| format!("{shown}: output does not parse:\n{e}"))?;
    let symbol = count::DEFAULT_COUNTER_SYMBOL;
    let before = back.items.len();
    back.items.retain(|i| !matches!(i, Item::Var(v) if v.name == symbol));
    if back.items.len() + 1 != before {
        return Err(format!("{shown}: the counter is declared {} times", before - back.items.len()));
    }
    let mut problems = Vec::new();
    let mut removed = 0;
    for item in &mut back.items {
        if let Item::Function(f) = item {
            if let Some(body) = &mut f.body {
                removed += strip_increments(body, symbol, &mut problems);
            }
        }
    }
    if let Some(p) = problems.first() {
        return Err(format!("{shown}: {p}"));
    }
    if removed != want_sites {
        return Err(format!("{shown}: {removed} increments in the output, {want_sites} expected"));
    }
    if gpusan_ptx::print(&back) != gpusan_ptx::print(&original) {
        return Err(format!("{shown}: without its increments the output differs from the input"));
    }
    Ok(())
}

#[test]
fn corpus_instruments_verifies_and_changes_nothing_else() {
    let files = common::corpus_files();
    assert!(files.len() >= MIN_CORPUS, "only {} PTX files in tests/corpus: run scripts/build-corpus.sh", files.len());
    let failures: Vec<String> = files.iter().filter_map(|p| check_one(p).err()).collect();
    assert!(failures.is_empty(), "{} of {} files failed:\n{}", failures.len(), files.len(), failures.join("\n\n"));
}

/// Registers of each kernel before and after instrumentation.
struct Assembled {
    file: String,
    kernels: Vec<(String, u32, u32)>,
}

fn assemble_one(ptxas: &Path, path: &Path, dir: &Path) -> Result<Assembled, String> {
    let shown = path.display().to_string();
    let src = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let out = gpusan_passes::instrument(&src, &Count::default()).map_err(|e| e.with_path(&shown).to_string())?;
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let instrumented = dir.join("instrumented.ptx");
    std::fs::write(&instrumented, &out.ptx).map_err(|e| e.to_string())?;
    let cubin = dir.join("k.cubin");
    let before = common::assemble(ptxas, path, &cubin).map_err(|e| format!("{shown}: the original fails:\n{e}"))?;
    let after = common::assemble(ptxas, &instrumented, &cubin)
        .map_err(|e| format!("{shown}: instrumented with count, it does not assemble:\n{e}"))?;
    let after = common::registers(&after);
    let kernels = common::registers(&before)
        .into_iter()
        .filter_map(|(k, b)| after.iter().find(|(n, _)| *n == k).map(|&(_, a)| (k, b, a)))
        .collect();
    let file = path.file_name().unwrap().to_string_lossy().into_owned();
    Ok(Assembled { file, kernels })
}

#[test]
fn instrumented_corpus_assembles() {
    let ptxas = common::ptxas();
    let files = common::corpus_files();
    assert!(files.len() >= MIN_CORPUS, "only {} PTX files in tests/corpus: run scripts/build-corpus.sh", files.len());
    let work = std::env::temp_dir().join(format!("gpusan-passes-assemble-{}", std::process::id()));
    let next = AtomicUsize::new(0);
    let results = Mutex::new(Vec::new());
    let failures = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for w in 0..PTXAS_THREADS {
            let (ptxas, files, work, next, results, failures) = (&ptxas, &files, &work, &next, &results, &failures);
            s.spawn(move || {
                let dir: PathBuf = work.join(w.to_string());
                while let Some(path) = files.get(next.fetch_add(1, Ordering::Relaxed)) {
                    match assemble_one(ptxas, path, &dir) {
                        Ok(a) => results.lock().unwrap().push(a),
                        Err(e) => failures.lock().unwrap().push(e),
                    }
                }
            });
        }
    });
    let _ = std::fs::remove_dir_all(&work);
    let mut results = results.into_inner().unwrap();
    results.sort_by(|a, b| a.file.cmp(&b.file));

    // Not an assertion: how much the increments cost in registers, for the record.
    let mut kernels = 0;
    let mut grew = 0;
    let mut shrank = 0;
    let mut total_delta = 0i64;
    let mut worst = (0i64, String::new());
    eprintln!("registers per kernel, before -> after count instrumentation (changed ones):");
    for a in &results {
        for (k, before, after) in &a.kernels {
            let d = *after as i64 - *before as i64;
            kernels += 1;
            total_delta += d;
            if d != 0 {
                eprintln!("  {:<36} {:<48} {before:>3} -> {after:>3} ({d:+})", a.file, k);
            }
            if d > 0 {
                grew += 1;
            } else if d < 0 {
                shrank += 1;
            }
            if d > worst.0 {
                worst = (d, format!("{} {k}", a.file));
            }
        }
    }
    eprintln!(
        "{} files assembled; {kernels} kernels: {grew} use more registers, {shrank} fewer, {} the same; \
         mean delta {:+.2}, largest {:+} ({})",
        results.len(),
        kernels - grew - shrank,
        total_delta as f64 / kernels.max(1) as f64,
        worst.0,
        worst.1
    );

    let failures = failures.into_inner().unwrap();
    assert!(failures.is_empty(), "{} of {} files failed:\n{}", failures.len(), files.len(), failures.join("\n\n"));
}
