//! Lying size fields must not make the parser allocate: measured with an allocator that
//! records each thread's peak of live bytes.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use common::*;
use gpusan_fatbin::{parse, Compression, Entry, MAX_DECOMPRESSED_SIZE};

struct PeakPerThread;

thread_local! {
    static LIVE: Cell<usize> = const { Cell::new(0) };
    static PEAK: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: forwards to `System`; the bookkeeping touches only const-initialised thread locals.
unsafe impl GlobalAlloc for PeakPerThread {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = LIVE.try_with(|live| {
            live.set(live.get() + layout.size());
            let _ = PEAK.try_with(|peak| peak.set(peak.get().max(live.get())));
        });
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let _ = LIVE.try_with(|live| live.set(live.get().saturating_sub(layout.size())));
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: PeakPerThread = PeakPerThread;

/// The most bytes `f` had allocated at once on this thread, beyond what was live before.
fn peak_of<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let before = LIVE.with(Cell::get);
    PEAK.with(|peak| peak.set(before));
    let result = f();
    (result, PEAK.with(Cell::get) - before)
}

const MIB: usize = 1 << 20;

/// The first compressed entry of a fixture, with its uncompressed size set to `claim`.
fn with_claim<'a>(data: &'a [u8], compression: Compression, claim: u64) -> Entry<'a> {
    let fatbins = parse(data).unwrap();
    let mut entry = fatbins[0].entries.iter().find(|e| e.compression == compression).unwrap().clone();
    entry.uncompressed_size = claim;
    entry
}

#[test]
fn a_terabyte_claim_is_refused_without_allocating() {
    for (name, compression) in [("lz4.fatbin", Compression::Lz4), ("sm90.fatbin", Compression::Zstd)] {
        // In the bytes, as a file would have it: the header field at 0x38 of the entry.
        let mut data = fixture(name);
        let fatbins = parse(&data).unwrap();
        let at = fatbins[0].entries.iter().find(|e| e.compression == compression).unwrap().offset as usize + 0x38;
        data[at..at + 8].copy_from_slice(&(1u64 << 40).to_le_bytes());
        let entry = with_claim(&data, compression, 1 << 40);
        assert_eq!(entry.uncompressed_size, 1 << 40, "{name}: the patched field is the uncompressed size");
        let (result, peak) = peak_of(|| entry.contents());
        let err = result.unwrap_err().to_string();
        assert!(err.contains("over the limit"), "{name}: {err}");
        assert!(peak < 4096, "{name}: {peak} bytes allocated to refuse it");
    }
}

#[test]
fn claims_under_the_limit_cost_only_what_the_data_produces() {
    let claim = MAX_DECOMPRESSED_SIZE / 2;
    let data = fixture("lz4.fatbin");
    let (result, peak) = peak_of(|| with_claim(&data, Compression::Lz4, claim).contents());
    assert!(result.unwrap_err().what.contains("more than LZ4 can make"));
    assert!(peak < MIB, "LZ4: {peak} bytes");

    let data = fixture("sm90.fatbin");
    let (result, peak) = peak_of(|| with_claim(&data, Compression::Zstd, claim).contents());
    let err = result.unwrap_err().what;
    assert!(err.starts_with("ZSTD data decompresses to 0x") && err.ends_with("the header says 0x20000000"), "{err}");
    assert!(peak < 4 * MIB, "ZSTD: {peak} bytes");
}

/// A ZSTD frame of `blocks` RLE blocks of 128 KiB each: tiny, expanding to `blocks` * 128 KiB.
fn zstd_bomb(blocks: usize, single_segment_size: Option<u32>) -> Vec<u8> {
    let mut frame = vec![0x28, 0xb5, 0x2f, 0xfd];
    match single_segment_size {
        // Single segment, 4-byte content size: the window is the content size.
        Some(size) => {
            frame.push(0b1010_0000);
            frame.extend(size.to_le_bytes());
        }
        // No content size; a 1 MiB window (exponent 10 above the 1 KiB minimum).
        None => frame.extend([0x00, 10 << 3]),
    }
    for i in 0..blocks {
        let last = u32::from(i + 1 == blocks);
        let header = last | (1 << 1) | ((128 << 10) << 3); // RLE block of 128 KiB
        frame.extend(&header.to_le_bytes()[..3]);
        frame.push(0);
    }
    frame
}

#[test]
fn decompression_bombs_stop_at_the_claim() {
    let original = fixture("sm90.fatbin");
    let fatbins = parse(&original).unwrap();
    let ptx = fatbins[0].entries.iter().find(|e| e.compression == Compression::Zstd).unwrap();
    let (start, len) = (ptx.payload.as_ptr() as usize - original.as_ptr() as usize, ptx.payload.len());
    let mut data = original.clone();
    for (bomb, expect) in [
        (zstd_bomb(128, None), "more than"),        // 16 MiB streamed
        (zstd_bomb(128, Some(16 << 20)), "window"), // a 16 MiB window asked for up front
    ] {
        assert!(bomb.len() <= len, "the bomb fits the payload");
        data[start..start + bomb.len()].copy_from_slice(&bomb);
        let fatbins = parse(&data).unwrap();
        let entry = fatbins[0].entries.iter().find(|e| e.compression == Compression::Zstd).unwrap();
        let (result, peak) = peak_of(|| entry.contents());
        let err = result.unwrap_err().to_string();
        assert!(err.contains(expect), "{err}");
        assert!(peak < 8 * MIB, "{peak} bytes allocated for a {:#x}-byte claim", entry.uncompressed_size);
    }
    // The same frame with an honest claim decodes: the bomb really is one.
    let mut entry = ptx.clone();
    let bomb = zstd_bomb(8, None);
    entry.payload = &bomb;
    entry.uncompressed_size = 8 << 17;
    assert_eq!(entry.contents().unwrap().len(), 1 << 20);
}
