//! Memory of the check pass on large kernels, counted by a global allocator (exact, not
//! timed): it grows linearly with the kernel, and the code the pass generates exists once
//! at its peak. A 50,000-block kernel's instrumented body is some 6 million statements
//! (600 MB): its slow paths were all statements beside the rebuilt body before they went
//! into it (1.4 GB peak RSS), and superlinear plans took 5.8 GB.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use gpusan_ptx::ast::{Item, Statement};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let now = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(now, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// What instrumenting a chain of `blocks` blocks takes.
struct Measured {
    /// Heap bytes at the peak, above what was live before (the source text).
    peak: usize,
    /// Bytes of the instrumented module's statements themselves.
    body: usize,
}

fn instrument_chain(blocks: usize) -> Measured {
    let src = gpusan_testkit::chain_kernel(blocks);
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let (module, report) = gpusan_passes::instrument_tree(&src, &gpusan_passes::check::Check).unwrap();
    let peak = PEAK.load(Ordering::Relaxed) - before;
    assert_eq!(report.total_sites(), 2 * blocks as u64, "a load and a store a block");
    fn count(stmts: &[Statement]) -> usize {
        stmts.iter().map(|s| 1 + if let Statement::Block(b) = s { count(b) } else { 0 }).sum()
    }
    let statements: usize = module
        .items
        .iter()
        .filter_map(|i| match i {
            Item::Function(f) => f.body.as_deref().map(count),
            _ => None,
        })
        .sum();
    Measured { peak, body: statements * std::mem::size_of::<Statement>() }
}

#[test]
fn the_check_pass_holds_its_code_once_and_grows_linearly() {
    let small = instrument_chain(1_000);
    let large = instrument_chain(5_000);
    eprintln!(
        "1,000 blocks: peak {} B, body {} B; 5,000 blocks: peak {} B, body {} B",
        small.peak, small.body, large.peak, large.body
    );
    // Five times the blocks, five times the code: the peak grows with it, with a margin
    // for what is fixed (a quadratic plan or list rebuilt per insertion is 25 times).
    assert!(large.body >= 5 * small.body * 9 / 10, "the output grows with the kernel");
    assert!(
        large.peak <= 5 * small.peak * 5 / 4,
        "peak {} B for 5,000 blocks, {} B for 1,000: more than linear",
        large.peak,
        small.peak
    );
    // Each block's share of the peak: its instrumented statements once, and what the
    // input's tree and the plans hold for it (1.8 times), not the generated code twice
    // (3 times). The difference of the two sizes leaves out what does not grow.
    let ratio = (large.peak - small.peak) as f64 / (large.body - small.body) as f64;
    assert!(ratio < 2.3, "each block adds {ratio:.2} times its instrumented statements' bytes to the peak");
}
