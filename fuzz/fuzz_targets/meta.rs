//! Bytes, if UTF-8, → the module metadata readers (the cache's text format, and the reader
//! of PTX gpusan did not instrument): never a panic, and what they read must read back.
//! The body is `gpusan_passes::fuzz::meta`; crates/passes/tests/fuzz_bodies.rs replays
//! every saved input (and every fixture) through it.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| gpusan_passes::fuzz::meta(data));
