//! The trace format end to end: what is written is read back; a trace cut at any byte gives
//! its whole chunks, then an error at the cut; a changed byte is found (its chunk named);
//! and a fixture written by this version stays byte for byte what it is
//! (`GPUSAN_BLESS=1` rewrites it after a deliberate change of the format).

use gpusan_trace::{Chunk, Config, ErrorKind, Event, KernelInfo, Kind, Meta, Op, Reader, Space, Writer};
use proptest::prelude::*;

fn meta() -> Meta {
    Meta {
        program: "./app".into(),
        device: "NVIDIA H100".into(),
        sms: 132,
        sample_warps: 1,
        sample_launches: String::new(),
        source: "test".into(),
    }
}

/// Writes `events` (a `KernelBegin` among them becomes a kernel named after its number).
fn write(events: &[Event], chunk_events: u32, finish: bool) -> Vec<u8> {
    let mut w = Writer::new(Vec::new(), &meta(), Config { chunk_events }).unwrap();
    for e in events {
        if e.kind == Kind::KernelBegin {
            w.kernel_begin(&info(e.kernel)).unwrap();
        } else {
            w.push(e).unwrap();
        }
    }
    if finish {
        w.finish().unwrap()
    } else {
        // A writer that never finished: what it wrote so far (its last chunk not flushed).
        let mut out = Vec::new();
        let mut w2 = Writer::new(&mut out, &meta(), Config { chunk_events }).unwrap();
        for e in events {
            w2.push(e).unwrap();
        }
        drop(w2);
        out
    }
}

fn info(kernel: u32) -> KernelInfo {
    KernelInfo { kernel, name: format!("kernel_{kernel}"), grid: [kernel + 1, 2, 1], block: [128, 1, 1] }
}

/// Everything a trace gives before its end or its first error.
fn read_all(bytes: &[u8]) -> (Vec<Event>, Vec<KernelInfo>, Option<gpusan_trace::TraceError>) {
    let mut events = Vec::new();
    let mut kernels = Vec::new();
    let mut r = match Reader::new(bytes) {
        Ok(r) => r,
        Err(e) => return (events, kernels, Some(e)),
    };
    let mut chunk = Chunk::default();
    loop {
        match r.next_chunk(&mut chunk) {
            Ok(true) => {
                events.extend_from_slice(&chunk.events);
                kernels.extend(chunk.kernels.iter().cloned());
            }
            Ok(false) => return (events, kernels, None),
            Err(e) => return (events, kernels, Some(e)),
        }
    }
}

fn event() -> impl Strategy<Value = Event> {
    let access =
        (0u32..4, 0u32..132, 0u32..2000, any::<u64>(), 0u64..4096, 0u8..=255, 1u8..=32, 0u32..50, any::<u32>())
            .prop_map(|(kernel, sm, warp, addr, size, op, lanes, alloc, epoch)| Event {
                kind: Kind::Access,
                kernel,
                sm,
                warp,
                addr,
                size,
                op: Op(op),
                lanes,
                alloc,
                epoch,
                count: 0,
            });
    prop_oneof![
        6 => access,
        1 => (0u32..4, 0u32..132, 0u32..100, any::<u64>(), 0u32..50)
            .prop_map(|(k, sm, w, a, id)| Event::load_meta(k, sm, w, a, id)),
        1 => (0u32..4, 0u32..132, 0u32..100, any::<u64>(), 0u32..50)
            .prop_map(|(k, sm, w, a, id)| Event::mem_check(k, sm, w, a, id)),
        1 => (1u32..50, any::<u64>(), any::<u64>()).prop_map(|(id, b, s)| Event::alloc(id, b, s)),
        1 => (1u32..50).prop_map(Event::free),
        1 => (0u32..4).prop_map(|k| Event { kind: Kind::KernelBegin, kernel: k, ..Event::default() }),
        1 => (0u32..4).prop_map(Event::kernel_end),
        1 => (0u32..4, 0u32..132, 0u32..100, any::<u64>()).prop_map(|(k, sm, w, n)| Event::warp_done(k, sm, w, n)),
    ]
}

proptest! {
    #[test]
    fn what_is_written_is_read_back(events in proptest::collection::vec(event(), 0..300), chunk in 1u32..64) {
        let bytes = write(&events, chunk, true);
        let (got, kernels, err) = read_all(&bytes);
        prop_assert!(err.is_none(), "{:?}", err);
        prop_assert_eq!(&got, &events);
        let launched: Vec<KernelInfo> = events.iter().filter(|e| e.kind == Kind::KernelBegin).map(|e| info(e.kernel)).collect();
        prop_assert_eq!(kernels, launched);
        let r = Reader::new(&bytes[..]).unwrap();
        prop_assert_eq!(r.meta(), &meta());
    }
}

fn sample(n: u32) -> Vec<Event> {
    (0..n)
        .map(|i| match i % 5 {
            0 => Event::alloc(i + 1, 0x7f00_0000_0000 + u64::from(i) * 4096, 4000),
            1 => Event::load_meta(0, i % 132, i, 0x7f00_0000_0000 + u64::from(i) * 4096, i),
            2 => Event::access(
                0,
                i % 132,
                i,
                Op::new(Space::Global, gpusan_trace::Access::Load, 4),
                0x7f00_0000_0000 + u64::from(i),
                128,
                i,
            ),
            3 => Event::mem_check(0, i % 132, i, 0x7f00_0000_0000 + u64::from(i), i),
            _ => Event::free(i),
        })
        .collect()
}

#[test]
fn a_trace_cut_at_any_byte_gives_its_whole_chunks_then_an_error_at_the_cut() {
    let events = sample(40);
    let bytes = write(&events, 8, true);
    for cut in 0..bytes.len() {
        let (got, _, err) = read_all(&bytes[..cut]);
        let err = err.unwrap_or_else(|| panic!("cut at {cut}: no error"));
        assert!(err.offset <= cut as u64, "cut at {cut}: error placed at {}", err.offset);
        assert_eq!(got.len() % 8, 0, "cut at {cut}: a partial chunk was delivered");
        assert_eq!(&got[..], &events[..got.len()], "cut at {cut}");
        let whole_header = cut >= 16 + serde_json::to_vec(&meta()).unwrap().len();
        if whole_header {
            assert!(matches!(err.kind, ErrorKind::Truncated(_)), "cut at {cut}: {err}");
        }
    }
}

#[test]
fn a_writer_that_never_finished_leaves_its_chunks_readable_and_says_so() {
    let events = sample(20);
    let bytes = write(&events, 8, false);
    let (got, _, err) = read_all(&bytes);
    assert_eq!(got, events[..16], "the two whole chunks");
    let err = err.unwrap();
    assert!(err.to_string().contains("no end record"), "{err}");
}

#[test]
fn a_changed_byte_is_found_and_its_chunk_named() {
    let events = sample(40);
    let bytes = write(&events, 8, true);
    let header = 16 + serde_json::to_vec(&meta()).unwrap().len();
    let mut chunk_starts = Vec::new();
    let mut at = header;
    while &bytes[at..at + 4] == b"CHNK" {
        chunk_starts.push(at);
        let packed = u32::from_le_bytes(bytes[at + 12..at + 16].try_into().unwrap()) as usize;
        at += 20 + packed;
    }
    assert_eq!(chunk_starts.len(), 5);
    for i in header..bytes.len() {
        let mut bad = bytes.clone();
        bad[i] ^= 0x20;
        let (got, _, err) = read_all(&bad);
        let err = err.unwrap_or_else(|| panic!("byte {i} changed: not found"));
        if let Some(k) = chunk_starts.iter().rposition(|&s| s <= i).filter(|&k| i >= chunk_starts[k] + 4) {
            // Inside chunk k's header or payload: chunks before it delivered whole, and it named.
            if i < at {
                assert_eq!(err.chunk, Some(k as u32), "byte {i}: {err}");
                assert_eq!(got.len(), 8 * k, "byte {i}: {err}");
            }
        }
    }
}

#[test]
fn other_files_and_other_versions_are_refused_at_their_first_bytes() {
    let err = Reader::new(&b"ELF\x7fnot a trace at all"[..]).err().unwrap();
    assert!(matches!(err.kind, ErrorKind::NotATrace) && err.offset == 0, "{err}");
    let mut bytes = write(&sample(3), 8, true);
    bytes[8] = 9;
    let err = Reader::new(&bytes[..]).err().unwrap();
    assert!(matches!(err.kind, ErrorKind::Version(9)) && err.offset == 8, "{err}");
    let mut bytes = write(&sample(3), 8, true);
    bytes.push(0);
    let (_, _, err) = read_all(&bytes);
    assert!(matches!(err.unwrap().kind, ErrorKind::TrailingBytes));
}

#[test]
fn the_fixture_is_what_this_version_writes() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sample.gstrace");
    let mut events = sample(12);
    events.insert(0, Event { kind: Kind::KernelBegin, kernel: 0, ..Event::default() });
    events.push(Event::warp_done(0, 5, 7, 123_456));
    events.push(Event::kernel_end(0));
    let bytes = write(&events, 8, true);
    if std::env::var_os("GPUSAN_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &bytes).unwrap();
    }
    let fixture = std::fs::read(&path).expect("tests/fixtures/sample.gstrace (GPUSAN_BLESS=1 writes it)");
    assert_eq!(fixture, bytes, "the format changed: bump VERSION, then bless");
    let (got, kernels, err) = read_all(&fixture);
    assert!(err.is_none());
    assert_eq!(got.len(), 15);
    assert_eq!(kernels, vec![info(0)]);
    assert_eq!(got[14], Event::kernel_end(0));
    assert_eq!(got[13].count, 123_456);
}
