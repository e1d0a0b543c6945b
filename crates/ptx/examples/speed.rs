//! Quick parse/print timing on one file: `cargo run --release --example speed -- FILE`.
//! The full benchmark (with memory) is bench/ptx-frontend.sh.
fn main() {
    let path = std::env::args().nth(1).expect("usage: speed FILE");
    let src = std::fs::read_to_string(&path).unwrap();
    let mb = src.len() as f64 / 1e6;
    for _ in 0..3 {
        let t = std::time::Instant::now();
        let m = gpusan_ptx::parse(&src).unwrap();
        let tp = t.elapsed().as_secs_f64();
        let t = std::time::Instant::now();
        let out = gpusan_ptx::print(&m);
        let tq = t.elapsed().as_secs_f64();
        println!(
            "parse {:.0} MB/s, print {:.0} MB/s, both {:.0} MB/s ({} bytes out)",
            mb / tp,
            mb / tq,
            mb / (tp + tq),
            out.len()
        );
    }
}
