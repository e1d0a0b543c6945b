//! Bytes → a `gpusan-trace` trace read chunk by chunk, characterized and simulated
//! (`gpusan sim`): a damaged or hostile trace gives a located error, never a crash, a hang
//! or unbounded memory. The body is `gpusan_sim::fuzz::trace`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| gpusan_sim::fuzz::trace(data));
