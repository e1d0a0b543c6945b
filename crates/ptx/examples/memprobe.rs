//! Where the front-end's memory goes: input, syntax tree, printed output, counted by a
//! wrapping allocator. `cargo run --release -p gpusan-ptx --example memprobe -- FILE`
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
struct Counting;
static CUR: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
static N: AtomicUsize = AtomicUsize::new(0);
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let c = CUR.fetch_add(l.size(), Relaxed) + l.size();
        PEAK.fetch_max(c, Relaxed);
        N.fetch_add(1, Relaxed);
        System.alloc(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        CUR.fetch_sub(l.size(), Relaxed);
        System.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        if n > l.size() {
            let c = CUR.fetch_add(n - l.size(), Relaxed) + n - l.size();
            PEAK.fetch_max(c, Relaxed);
        } else {
            CUR.fetch_sub(l.size() - n, Relaxed);
        }
        System.realloc(p, l, n)
    }
}
#[global_allocator]
static A: Counting = Counting;
fn mb(x: usize) -> f64 {
    x as f64 / 1e6
}
fn main() {
    use gpusan_ptx::ast::*;
    println!(
        "Operand {} Instruction {} Statement {} Guard {} Loc {} VarDeclBox {} SmallVec {}",
        std::mem::size_of::<Operand>(),
        std::mem::size_of::<Instruction>(),
        std::mem::size_of::<Statement>(),
        std::mem::size_of::<Option<Guard>>(),
        std::mem::size_of::<Loc>(),
        std::mem::size_of::<Box<VarDecl>>(),
        std::mem::size_of::<smallvec::SmallVec<[Operand; 3]>>()
    );
    let s = std::fs::read_to_string(std::env::args().nth(1).unwrap()).unwrap();
    let base = CUR.load(Relaxed);
    let m = gpusan_ptx::parse(&s).unwrap();
    println!(
        "input {:.0} MB; ast {:.0} MB live, parse peak {:.0} MB, {} allocations",
        mb(base),
        mb(CUR.load(Relaxed) - base),
        mb(PEAK.load(Relaxed)),
        N.load(Relaxed)
    );
    let out = gpusan_ptx::print(&m);
    println!(
        "after print: live {:.0} MB, peak {:.0} MB (output {:.0} MB)",
        mb(CUR.load(Relaxed)),
        mb(PEAK.load(Relaxed)),
        mb(out.capacity())
    );
}
