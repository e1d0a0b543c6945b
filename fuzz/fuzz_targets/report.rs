//! Arbitrary bytes → the readers `gpusan run` merges its processes' reports with: a
//! process's document and its events file. A damaged or hostile report must not panic the
//! merge or the text and JSON printed from it. The body is `gpusan_runtime::fuzz::reports`;
//! crates/runtime/tests/fuzz_regressions.rs replays every saved input through it.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| gpusan_runtime::fuzz::reports(data));
