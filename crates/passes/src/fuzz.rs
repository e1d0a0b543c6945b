//! The bodies of the fuzz targets over this crate (`fuzz/fuzz_targets/{check,count,meta,rewrite}.rs`),
//! here so that `tests/fuzz_bodies.rs` replays each saved input (and every fixture) through
//! exactly what the fuzzer ran. Each takes raw bytes and panics on whatever it finds wrong; libFuzzer
//! counts a panic as a crash.
//!
//! The passes run inside the user's process (the injected runtime instruments the modules
//! the program loads), so no input may make them panic, hang or allocate without bound, and
//! whatever they instrument must load: the verifier passed it, and it prints and parses
//! back to itself.

use crate::check::{CheckConfig, CheckWith, Counting, LocalBounds, Reaction};
use crate::count::Count;
use crate::meta::ModuleMeta;
use crate::{instrument, instrument_with_meta, verify, Error, Instrumented, Stage};

/// First byte → the check pass's configuration (bit 0 the reaction, bit 1 counting); the
/// rest, if UTF-8, → `instrument_with_meta`, as `inject/src/routes/passes.rs` instruments a
/// loaded module. The metadata taken beside the module must read back from the text the
/// cache stores it as.
pub fn check(data: &[u8]) {
    let Some((&knobs, rest)) = data.split_first() else { return };
    let Ok(src) = std::str::from_utf8(rest) else { return };
    let config = CheckConfig {
        reaction: if knobs & 1 == 0 { Reaction::Report } else { Reaction::Abort },
        counting: if knobs & 2 == 0 { Counting::Off } else { Counting::Dynamic },
        local_bounds: if knobs & 4 == 0 { LocalBounds::Object } else { LocalBounds::Frame },
    };
    let Some((out, meta)) = refused_or(src, instrument_with_meta(src, &CheckWith(config))) else { return };
    loads(&out);
    assert_eq!(ModuleMeta::from_text(&meta.to_text()).as_ref(), Ok(&meta), "metadata does not read back");
}

/// Bytes, if UTF-8, → the `count` pass through `instrument`. Its output must be refused by
/// the pass (the counter is declared): a module is never instrumented twice.
pub fn count(data: &[u8]) {
    let Ok(src) = std::str::from_utf8(data) else { return };
    let Some(out) = refused_or(src, instrument(src, &Count::default())) else { return };
    loads(&out);
    match instrument(&out.ptx, &Count::default()) {
        Err(Error::Pass { pass: "count", .. }) => {}
        other => panic!("the pass did not refuse its own output: {other:?}"),
    }
}

/// First byte → which of the smaller passes (even: `canary_heap`, odd: `fence`); the rest,
/// if UTF-8, → that pass through `instrument`. What it rewrote must load, and be refused a
/// second time.
pub fn rewrite(data: &[u8]) {
    let Some((&which, rest)) = data.split_first() else { return };
    let Ok(src) = std::str::from_utf8(rest) else { return };
    let pass: &dyn crate::Pass = if which & 1 == 0 { &crate::canary_heap::CanaryHeap } else { &crate::fence::Fence };
    let Some(out) = refused_or(src, instrument(src, pass)) else { return };
    loads(&out);
    // `canary_heap` leaves a module that never calls the heap as it was.
    let rewrote = which & 1 == 1 || !out.report.functions.is_empty();
    match instrument(&out.ptx, pass) {
        Err(Error::Pass { .. }) if rewrote => {}
        Ok(_) if !rewrote => {}
        other => panic!("the pass did not refuse its own output (or refused an unchanged one): {other:?}"),
    }
}

/// Bytes, if UTF-8, → the metadata readers: the cache's text format
/// ([`ModuleMeta::from_text`]) and the item-by-item reader of a module gpusan did not
/// instrument ([`ModuleMeta::of_ptx`]). Whatever either yields must read back from its text.
pub fn meta(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match ModuleMeta::from_text(text) {
        Ok(meta) => {
            let again = ModuleMeta::from_text(&meta.to_text());
            assert_eq!(again.as_ref(), Ok(&meta), "metadata read from text does not read back");
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
    let meta = ModuleMeta::of_ptx(text);
    assert_eq!(ModuleMeta::from_text(&meta.to_text()).as_ref(), Ok(&meta), "metadata of PTX does not read back");
}

/// The result of instrumenting `src`: `None` when the module was refused (its error must
/// format), a panic when the pass's own output failed the verifier (a pass bug).
fn refused_or<T>(src: &str, result: Result<T, Error>) -> Option<T> {
    match result {
        Ok(done) => Some(done),
        Err(e @ Error::Verify { stage: Stage::After(_), .. }) => panic!("{e}\n--- input ---\n{src}"),
        Err(e) => {
            let _ = e.to_string();
            None
        }
    }
}

/// What the driver would get: text that parses, verifies and prints back to itself.
fn loads(out: &Instrumented) {
    let again = gpusan_ptx::parse(&out.ptx)
        .unwrap_or_else(|e| panic!("instrumented PTX does not parse again: {e}\n--- output ---\n{}", out.ptx));
    if let Err(e) = verify(&again) {
        panic!("instrumented PTX, parsed again, fails the verifier: {e}\n--- output ---\n{}", out.ptx);
    }
    assert_eq!(gpusan_ptx::print(&again), out.ptx, "printing the instrumented module is not a fixed point");
}
