//! Writes a kernel of N basic blocks in one long chain (`cargo run --release -p
//! gpusan-passes --example chain -- 50000 > chain.ptx`): each block a guarded branch
//! around a global load and store through fresh registers, the shape of long
//! straight-line code with many branches. It sizes the passes' time and memory on
//! large kernels (`gpusan instrument chain.ptx`, `gpusan ptx speed chain.ptx`): both
//! must grow linearly with N.

fn main() {
    let blocks: usize = std::env::args().nth(1).and_then(|n| n.parse().ok()).unwrap_or(10_000);
    print!("{}", gpusan_testkit::chain_kernel(blocks));
}
