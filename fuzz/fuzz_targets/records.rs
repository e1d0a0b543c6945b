//! Bytes → a context's error buffer as the injected runtime drains it after a
//! synchronization: the records kernels wrote, decoded, judged against a registry and
//! reported. A kernel that scribbles over the buffer must not crash the program. The body
//! is `gpusan_runtime::fuzz::records`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| gpusan_runtime::fuzz::records(data));
