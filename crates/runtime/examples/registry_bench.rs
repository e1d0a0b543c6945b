//! Cost of the registry on the paths the runtime adds to every `cudaMalloc`/`cudaFree` and
//! copy: insert, free (quarantine eviction included) and lookup, with 20k and 1M allocations
//! live, from 1 and 8 threads; call-site capture; device table refresh.
//!
//! `cargo run --release -p gpusan-runtime --example registry_bench [--quick]`

use std::hint::black_box;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use gpusan_runtime::registry::*;

const PREFILL_BASE: u64 = 0x7f00_0000_0000;
const STRIDE: u64 = 8192;

fn new_alloc(base: u64) -> NewAlloc {
    NewAlloc { base, size: 4096, kind: AllocKind::Device, device: 0, context: 1, site: SiteId::UNKNOWN }
}

/// Runs `work(thread)` on `threads` threads released together; from the first start to the
/// last end, as the workers saw it (the spawning thread may be scheduled late).
fn parallel(threads: u64, work: impl Fn(u64) + Sync) -> Duration {
    let barrier = Barrier::new(threads as usize);
    let spans: Vec<(Instant, Instant)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (barrier, work) = (&barrier, &work);
                s.spawn(move || {
                    barrier.wait();
                    let start = Instant::now();
                    work(t);
                    (start, Instant::now())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("worker")).collect()
    });
    let first = spans.iter().map(|s| s.0).min();
    let last = spans.iter().map(|s| s.1).max();
    first.zip(last).map_or(Duration::ZERO, |(a, b)| b - a)
}

fn row(what: &str, live: u64, threads: u64, ops_per_thread: u64, wall: Duration) {
    let per_op = wall.as_nanos() as f64 / ops_per_thread as f64;
    let total = (threads * ops_per_thread) as f64 / wall.as_secs_f64() / 1e6;
    println!("{what:<8} {live:>9} {threads:>7} {per_op:>12.0} {total:>12.2}");
}

fn registry_paths(live: u64, threads: u64, ops: u64) {
    const ROUNDS: u64 = 3;
    let r = Arc::new(Registry::default());
    for i in 0..live {
        r.insert(new_alloc(PREFILL_BASE + i * STRIDE)).expect("prefill");
    }
    let per_thread = ops / threads;
    // Each round in fresh addresses, so no insert lands on quarantined memory.
    let own = |round: u64, t: u64, i: u64| 0x1_0000_0000_0000 + (round << 44) + (t << 36) + i * STRIDE;
    let best = |times: Vec<Duration>| times.into_iter().min().unwrap_or_default();
    let (mut ins, mut look, mut free) = (vec![], vec![], vec![]);
    for round in 0..ROUNDS {
        ins.push(parallel(threads, |t| {
            for i in 0..per_thread {
                black_box(r.insert(new_alloc(own(round, t, i))).ok());
            }
        }));
        look.push(parallel(threads, |t| {
            let mut rng = 0x9e37_79b9_7f4a_7c15 ^ (t + 1) ^ (round << 8);
            for _ in 0..per_thread {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                black_box(r.lookup(PREFILL_BASE + (rng % live) * STRIDE + (rng >> 52)));
            }
        }));
        free.push(parallel(threads, |t| {
            for i in 0..per_thread {
                black_box(r.free(own(round, t, i), FreeApi::Free, SiteId::UNKNOWN));
            }
        }));
    }
    row("insert", live, threads, per_thread, best(ins));
    row("lookup", live, threads, per_thread, best(look));
    row("free", live, threads, per_thread, best(free));
}

#[inline(never)]
fn recurse(depth: u32, f: &dyn Fn()) {
    if depth == 0 {
        f()
    } else {
        recurse(depth - 1, f);
        black_box(depth);
    }
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let ops = if quick { 20_000 } else { 200_000 };
    println!("{:<8} {:>9} {:>7} {:>12} {:>12}", "op", "live", "threads", "ns/op/thread", "Mops/s total");
    for live in [20_000, if quick { 100_000 } else { 1_000_000 }] {
        for threads in [1, 8] {
            registry_paths(live, threads, ops);
        }
    }

    println!("\ncapture_site(0), 16 frames kept, 20 frames deep:");
    for threads in [1, 2, 8] {
        let n = ops / 10 / threads;
        let wall = parallel(threads, |_| {
            recurse(20, &|| {
                for _ in 0..n {
                    black_box(capture_site(0));
                }
            })
        });
        row("capture", 0, threads, n, wall);
    }
    let site = std::cell::Cell::new(SiteId::UNKNOWN);
    recurse(20, &|| site.set(capture_site(0)));
    for pass in ["first", "again"] {
        let start = Instant::now();
        let frames = symbolize(site.get());
        println!("symbolize ({pass}): {} frames in {:?}", frames.len(), start.elapsed());
    }

    println!("\nDeviceTable::update after one free (rebuild and diff):");
    for live in [20_000, if quick { 100_000 } else { 1_000_000 }] {
        let r = Registry::default();
        for i in 0..live {
            r.insert(new_alloc(PREFILL_BASE + i * STRIDE)).expect("prefill");
        }
        let mut table = DeviceTable::build(&r);
        for i in 0..3 {
            r.free(PREFILL_BASE + (live / 2 + i) * STRIDE, FreeApi::Free, SiteId::UNKNOWN);
            let start = Instant::now();
            let changed = table.update(&r);
            println!(
                "{live:>9} entries: {:?}, changed {changed:?}, {} device bytes",
                start.elapsed(),
                table.device_bytes()
            );
        }
    }
    let before = resident_bytes();
    let r = Registry::default();
    let n = if quick { 100_000 } else { 1_000_000 };
    for i in 0..n {
        r.insert(new_alloc(PREFILL_BASE + i * STRIDE)).expect("prefill");
    }
    let per_entry = resident_bytes().saturating_sub(before) as f64 / n as f64;
    println!("\nhost memory: {per_entry:.0} resident bytes per registry entry at {n} entries");
    println!("(size_of::<Allocation>() = {} + 8-byte key + B-tree slack)", std::mem::size_of::<Allocation>());
}

/// Resident set size, from /proc (Linux).
fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    statm.split_whitespace().nth(1).and_then(|p| p.parse::<u64>().ok()).unwrap_or(0) * 4096
}
