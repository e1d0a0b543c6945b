//! First byte → the check pass's configuration, the rest (if UTF-8) → PTX →
//! `instrument_with_meta`, as the injected runtime instruments a module the program loads:
//! never a panic, and whatever it instruments must pass the verifier, print and parse back.
//! The body is `gpusan_passes::fuzz::check`; crates/passes/tests/fuzz_bodies.rs replays
//! every saved input (and every fixture) through it.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| gpusan_passes::fuzz::check(data));
