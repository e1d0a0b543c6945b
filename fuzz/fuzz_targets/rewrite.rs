//! First byte → `canary_heap` (even) or `fence` (odd); the rest, if UTF-8, → that pass
//! through `instrument`: never a panic; what it rewrites must pass the verifier, print and
//! parse back, and be refused a second time. The body is `gpusan_passes::fuzz::rewrite`;
//! crates/passes/tests/fuzz_bodies.rs replays every saved input (and every fixture) through it.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| gpusan_passes::fuzz::rewrite(data));
