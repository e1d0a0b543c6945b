//! Bytes, if UTF-8, → the `count` pass through `instrument`: never a panic; whatever it
//! instruments must pass the verifier, print and parse back, and be refused a second time.
//! The body is `gpusan_passes::fuzz::count`; crates/passes/tests/fuzz_bodies.rs replays
//! every saved input (and every fixture) through it.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| gpusan_passes::fuzz::count(data));
