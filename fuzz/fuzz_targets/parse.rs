//! Arbitrary bytes → if UTF-8, `gpusan_ptx::parse`. The parser must never panic (an
//! error is fine), and whatever parses must survive a round trip: the printed text must
//! parse again, and printing that must give the same text (print∘parse is idempotent).
//! The streaming API (`Items` + `write_item`) must agree with the whole-module one.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else { return };
    let Ok(module) = gpusan_ptx::parse(src) else {
        // Errors are fine; formatting one must not panic either.
        if let Err(e) = gpusan_ptx::parse(src) {
            let _ = e.to_string();
        }
        return;
    };
    let printed = gpusan_ptx::print(&module);

    // Streaming must produce the same text as printing the whole module.
    let mut streamed = String::new();
    for item in gpusan_ptx::Items::new(src) {
        let item = item.expect("Items failed on a source that parse() accepted");
        gpusan_ptx::printer::write_item(&mut streamed, &item).unwrap();
    }
    assert_eq!(streamed, printed, "Items+write_item differs from parse+print");

    let reparsed = match gpusan_ptx::parse(&printed) {
        Ok(m) => m,
        Err(e) => panic!("printed module does not parse again: {e}\n--- printed ---\n{printed}"),
    };
    let reprinted = gpusan_ptx::print(&reparsed);
    assert_eq!(printed, reprinted, "print(parse(print(parse(src)))) != print(parse(src))");
});
