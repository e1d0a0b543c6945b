//! The bodies of the fuzz targets over this crate's readers (`fuzz/fuzz_targets/report.rs`,
//! `records.rs`), here so that `tests/fuzz_regressions.rs` replays each saved input through
//! exactly what the fuzzer ran. Each panics on whatever it finds wrong; libFuzzer counts
//! that a crash.

use gpusan_abi::record::{self, ERROR_CAPACITY};

use crate::device_abi::{ErrorRecord, SourceLines};
use crate::registry::{AllocKind, FreeApi, NewAlloc, Registry, SiteId};
use crate::report::{Collector, CollectorConfig, Document, Report};

/// Bytes → what `gpusan run` does with each process's files (`cli/src/run.rs`, `collect`):
/// the whole input read as a final document (`Document::from_json`) and merged, twice, as
/// two processes that left it; each line read as an event of an events file (a [`Report`]
/// per line) into a [`Collector`]; the merged run printed as text and JSON. A damaged or
/// hostile file must cost nothing but its own findings: no panic, and a document read must
/// survive its own JSON.
pub fn reports(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let mut run = Collector::new(CollectorConfig::default()).finish("check", Vec::new(), |_| Vec::new());
    if let Ok(doc) = Document::from_json(&text) {
        let back =
            Document::from_json(&doc.to_json()).unwrap_or_else(|e| panic!("a document's JSON does not read back: {e}"));
        assert_eq!(back, doc, "a document read from its own JSON differs");
        let _ = doc.to_text();
        run.merge(doc.clone());
        run.merge(doc);
    }
    // A small cap, so that the inputs reach what happens past it.
    let mut events = Collector::new(CollectorConfig { max_stored: 4 });
    for line in text.lines() {
        if let Ok(r) = serde_json::from_str::<Report>(line) {
            events.push(r);
        }
    }
    run.merge(events.finish("check", Vec::new(), |_| Vec::new()));
    let _ = run.to_text();
    let _ = run.to_json();
}

/// Bytes → what the injected runtime does with a context's error buffer after a
/// synchronization (`inject/src/routes/mirror.rs`, `drain`): the buffer's bytes are the
/// kernels' to write, and a kernel that scribbles over them must not crash the program.
///
/// The input: the count already drained and the header's count (`u32` each), a byte giving
/// up to 4 allocations of 13 bytes each (base `u64`, size `u32`, a byte whose bit 0 frees
/// it) for the registry the records are judged against, then the records as they lie in
/// the buffer. The records stored between the two counts are decoded
/// ([`ErrorRecord::parse_all`]), turned into reports ([`ErrorRecord::to_report`]) and
/// collected; the document must print, and read back from its JSON.
pub fn records(data: &[u8]) {
    let word = |at: usize| data.get(at..at + 4).map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
    let (drained, count) = (word(0), word(4));
    let allocations = data.get(8).map_or(0, |n| usize::from(n % 5));
    let registry = Registry::default();
    let mut at = 9;
    for _ in 0..allocations {
        let Some(a) = data.get(at..at + 13) else { break };
        at += 13;
        // A base as the driver hands them out: non-zero, aligned, below the device-heap tag.
        let base = u64::from_le_bytes([a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]]) & 0x0000_7fff_ffff_fff0 | 0x10;
        let size = u64::from(u32::from_le_bytes([a[8], a[9], a[10], a[11]])) + 1;
        let new = NewAlloc { base, size, kind: AllocKind::Device, device: 0, context: 1, site: SiteId::UNKNOWN };
        if registry.insert(new).is_ok() && a[12] & 1 == 1 {
            registry.free(base, FreeApi::Free, SiteId::UNKNOWN);
        }
    }
    let body = data.get(at..).unwrap_or_default();
    let stored = record::stored_between(drained, count, ERROR_CAPACITY);
    let (start, end) = (stored.start as usize * ErrorRecord::SIZE, stored.end as usize * ErrorRecord::SIZE);
    let bytes = body.get(start.min(body.len())..end.min(body.len())).unwrap_or_default();
    let lines = SourceLines::new(vec![(1, "k.cu".into())], vec![(10, 1, 5), (20, 1, 7), (30, 2, 9)]);
    let mut collector = Collector::new(CollectorConfig { max_stored: 8 });
    for r in ErrorRecord::parse_all(bytes) {
        let report = r.to_report("k", "k.ptx", &lines, &registry);
        let _ = report.to_string();
        collector.push(report);
    }
    let doc = collector.finish("check", Vec::new(), |_| Vec::new());
    let _ = doc.to_text();
    let back =
        Document::from_json(&doc.to_json()).unwrap_or_else(|e| panic!("a document's JSON does not read back: {e}"));
    assert_eq!(back, doc, "a document read from its own JSON differs");
}
