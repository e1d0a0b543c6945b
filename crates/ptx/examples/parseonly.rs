//! Parses a file and nothing else, for profilers:
//! `valgrind --tool=callgrind target/release/examples/parseonly FILE`.
fn main() {
    let path = std::env::args().nth(1).expect("usage: parseonly FILE");
    let src = std::fs::read_to_string(path).unwrap();
    std::hint::black_box(gpusan_ptx::parse(&src).unwrap());
}
