//! Inputs the fuzzers once broke the front-end with (tests/fixtures/fuzz-regressions/):
//! each must parse or fail cleanly, and whatever parses must print to a fixed point.

use std::path::Path;

#[test]
fn every_saved_fuzz_input_behaves() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fuzz-regressions");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        let Ok(src) = std::str::from_utf8(&bytes) else { continue };
        n += 1;
        let Ok(m) = gpusan_ptx::parse(src) else { continue };
        let once = gpusan_ptx::print(&m);
        let again =
            gpusan_ptx::parse(&once).unwrap_or_else(|e| panic!("{}: printed text does not parse: {e}", path.display()));
        assert_eq!(gpusan_ptx::print(&again), once, "{}: printing is not a fixed point", path.display());
    }
    assert!(n > 0, "no regression inputs in {}", dir.display());
}
