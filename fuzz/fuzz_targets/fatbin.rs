//! Arbitrary bytes → every parser path of gpusan-fatbin (containers, entries,
//! decompression, host ELF sections, registration wrappers, cubins). The runtime parses
//! whatever a program registers, so none of it may panic or allocate without bound.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    gpusan_fatbin::fuzz_parse(data);
});
