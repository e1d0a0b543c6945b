//! Inputs the fuzz targets over this crate once broke it with
//! (tests/fixtures/fuzz-regressions/<target>/), each replayed through its target's own body
//! (`gpusan_runtime::fuzz`); and what the merge must make of the counts they carry.

use std::path::Path;

use gpusan_runtime::report::{Collector, CollectorConfig, Document};

fn fixture(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fuzz-regressions/report").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Replays every input saved for `target` through `body`; an empty folder is a mistake.
fn replay(target: &str, body: fn(&[u8])) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fuzz-regressions").join(target);
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        if std::panic::catch_unwind(|| body(&bytes)).is_err() {
            panic!("{} panics the fuzz target {target}", path.display());
        }
        n += 1;
    }
    assert!(n > 0, "no regression inputs in {}", dir.display());
}

#[test]
fn every_saved_report_input_behaves() {
    replay("report", gpusan_runtime::fuzz::reports);
}

/// A damaged process report claiming counts near 2^64 used to overflow the merge: a panic
/// in a debug build and, in release, totals wrapped around to small numbers — a run with
/// errors could read "0 errors". Counts saturate instead.
#[test]
fn merged_counts_saturate() {
    let damaged = Document::from_json(&fixture("summary-total-overflow.json")).unwrap();
    let mut run = Collector::new(CollectorConfig::default()).finish("check", Vec::new(), |_| Vec::new());
    run.merge(damaged.clone());
    run.merge(damaged);
    let s = &run.summary;
    assert_eq!((s.total, s.unique, s.not_stored, s.leaked_bytes), (u64::MAX, u64::MAX, u64::MAX, u64::MAX));
    assert_eq!(s.by_kind.values().copied().collect::<Vec<_>>(), [u64::MAX]);
    assert_eq!(run.counters["__gpusan_count"], u64::MAX);
    assert_eq!(run.unchecked_modules["machine code only"], u64::MAX);
    assert_eq!(run.cuda_processes, u64::MAX);
    assert!(run.to_text().contains("ERROR SUMMARY: 18446744073709551615 errors"), "{}", run.to_text());

    let counted = Document::from_json(&fixture("check-counts-overflow.json")).unwrap();
    let mut run = counted.clone();
    run.merge(counted);
    let c = run.check_counts.clone().unwrap();
    assert_eq!((c.accesses, c.checks, c.modules), (2, u64::MAX, u64::MAX));
    assert!(run.to_text().contains("CHECK COUNTS: 2 accesses"), "{}", run.to_text());

    let leaks = Document::from_json(&fixture("leaks-sum-overflow.json")).unwrap().to_text();
    assert!(leaks.contains("LEAK SUMMARY: 18446744073709551615 bytes in 18446744073709551615 allocations"), "{leaks}");
}
