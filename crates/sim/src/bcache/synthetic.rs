//! The paper's synthetic workload (§V-A): threads, one per core, reading the bounds
//! information of pointers chosen at random, 3 % of the accesses writes; the total number
//! of accesses fixed whatever the number of cores (so each node injects less as the system
//! grows, and the results show the topology's delay, not contention). Each core issues its
//! next access `think` cycles after the last one completed.
//!
//! Pointers: half global (any thread uses them), half each thread's own. A pointer's bounds
//! record is 8 bytes (base and length, 32-bit), eight to a 64-byte block.
//!
//! Also the network's own check: uniform random traffic at a given injection rate, and the
//! average latency it sees (latency against injection rate).

use std::collections::BinaryHeap;

use serde::{Deserialize, Serialize};

use super::mesh::{Mesh, Timing};
use super::model::{Config, Design, Machine, Stats};

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Workload {
    /// What the accesses read: bounds information (3 % writes), or read-only data.
    #[serde(default)]
    pub read_only: bool,
    pub pointers: u32,
    pub accesses: u64,
    pub write_ratio: f64,
    pub think: u64,
    pub seed: u64,
}

impl Default for Workload {
    /// ParallelPointerBench's 2,000 pointers; 2,000 accesses a thread at 16 threads.
    fn default() -> Self {
        Workload { read_only: false, pointers: 2000, accesses: 32_000, write_ratio: 0.03, think: 20, seed: 1 }
    }
}

pub(crate) struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Where pointer `p`'s bounds record lies.
fn record(p: u64) -> u64 {
    0x1000_0000 + p * 8
}

/// Runs `workload` on `design` over a `width` × `height` mesh; the statistics and the
/// cycle the last access completed.
pub fn run(design: Design, config: Config, workload: &Workload) -> (Stats, u64) {
    let mut m = Machine::new(design, config);
    let cores = u64::from(config.width * config.height);
    let mut rng = Rng(workload.seed.max(1));
    let global = u64::from(workload.pointers / 2).max(1);
    let per_thread = (u64::from(workload.pointers) - global) / cores;
    // (next issue cycle, core), earliest first; ties by core.
    let mut ready: BinaryHeap<std::cmp::Reverse<(u64, u32)>> =
        (0..cores as u32).map(|c| std::cmp::Reverse((0, c))).collect();
    let mut left: Vec<u64> =
        (0..cores).map(|c| workload.accesses / cores + u64::from(c < workload.accesses % cores)).collect();
    let mut end = 0;
    while let Some(std::cmp::Reverse((t, core))) = ready.pop() {
        if left[core as usize] == 0 {
            continue;
        }
        left[core as usize] -= 1;
        let p = if per_thread == 0 || rng.below(2) == 0 {
            rng.below(global)
        } else {
            global + u64::from(core) * per_thread + rng.below(per_thread)
        };
        let done = if workload.read_only {
            // The same choice of objects, each a 64-byte block of read-only data.
            m.read_only(core, 0x2000_0000 + p * 64, t)
        } else {
            let write = rng.unit() < workload.write_ratio;
            m.access(core, record(p), write, t)
        };
        end = end.max(done);
        ready.push(std::cmp::Reverse((done + workload.think, core)));
    }
    (m.stats, end)
}

/// Uniform random traffic: every node injects a message of `flits` flits to a random other
/// node with probability `rate` each cycle, for `cycles` cycles; the average latency,
/// injection to the last flit's arrival, and the messages sent.
pub fn latency_at(
    width: u32,
    height: u32,
    timing: Timing,
    rate: f64,
    flits: u64,
    cycles: u64,
    seed: u64,
) -> (f64, u64) {
    let mut mesh = Mesh::new(width, height, timing);
    let mut rng = Rng(seed.max(1));
    let n = u64::from(mesh.nodes());
    let (mut sum, mut count) = (0u64, 0u64);
    for t in 0..cycles {
        for src in 0..n {
            if rng.unit() < rate {
                let mut dst = rng.below(n - 1);
                if dst >= src {
                    dst += 1;
                }
                let arrived = mesh.send(src as u32, dst as u32, flits, t);
                sum += arrived - t;
                count += 1;
            }
        }
    }
    (sum as f64 / count.max(1) as f64, count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_workload_gives_the_same_result() {
        let w = Workload { accesses: 4000, ..Workload::default() };
        let a = run(Design::BCache, Config::mesh(4, 4), &w);
        let b = run(Design::BCache, Config::mesh(4, 4), &w);
        assert_eq!(a, b);
        assert_eq!(a.0.accesses, 4000);
        let writes = a.0.writes as f64 / 4000.0;
        assert!((0.015..0.05).contains(&writes), "{writes}");
    }

    /// At a low rate the latency is the unloaded one (uniform traffic on a 4×4 mesh: 2.67
    /// hops on average between distinct nodes); it grows as the rate nears the mesh's
    /// capacity.
    #[test]
    fn latency_rises_with_the_injection_rate() {
        let t = Timing::default();
        let (low, sent) = latency_at(4, 4, t, 0.001, 5, 20_000, 3);
        assert!(sent > 100);
        let unloaded = 8.0 / 3.0 * 6.0 + 5.0 + 4.0;
        assert!((low - unloaded).abs() < 2.0, "{low} against {unloaded}");
        let curve: Vec<f64> =
            [0.02, 0.05, 0.1, 0.15, 0.2].iter().map(|&r| latency_at(4, 4, t, r, 5, 5_000, 3).0).collect();
        assert!(curve.windows(2).all(|w| w[1] > w[0]) && curve[0] > low, "{low} {curve:?}");
        assert!(curve[4] > 2.0 * low, "near saturation: {curve:?}");
    }
}

/// A BCache trace: a `gpusan-trace` trace whose [`gpusan_trace::Kind::Access`] events are a
/// core's (`sm`) memory references, in each core's program order: `Space::Other` for bounds
/// information, `Space::Global` for read-only data; a store is a write.
pub mod trace {
    use std::collections::{BinaryHeap, VecDeque};
    use std::io::{Read, Write};

    use gpusan_trace::{Access, Chunk, Event, Meta, Op, Reader, Space, TraceError, Writer};

    use super::{record, Rng, Workload};
    use crate::bcache::model::{Config, Design, Machine, Stats};

    /// Writes `workload` for `cores` cores as a trace; the events written.
    pub fn write<W: Write>(workload: &Workload, cores: u32, out: W) -> std::io::Result<u64> {
        let meta = Meta {
            program: format!("BCache synthetic {workload:?}"),
            sms: cores,
            source: "gpusan sim bcache-synth".into(),
            ..Meta::default()
        };
        let mut w = Writer::new(out, &meta, Default::default())?;
        let mut rng = Rng(workload.seed.max(1));
        let cores64 = u64::from(cores.max(1));
        let global = u64::from(workload.pointers / 2).max(1);
        let per_thread = (u64::from(workload.pointers) - global) / cores64;
        for i in 0..workload.accesses {
            let core = (i % cores64) as u32;
            let p = if per_thread == 0 || rng.below(2) == 0 {
                rng.below(global)
            } else {
                global + u64::from(core) * per_thread + rng.below(per_thread)
            };
            let e = if workload.read_only {
                Event::access(0, core, core, Op::new(Space::Global, Access::Load, 8), 0x2000_0000 + p * 64, 8, 0)
            } else {
                let write = rng.unit() < workload.write_ratio;
                let kind = if write { Access::Store } else { Access::Load };
                Event::access(0, core, core, Op::new(Space::Other, kind, 8), record(p), 8, 0)
            };
            w.push(&e)?;
        }
        let n = w.events();
        w.finish()?;
        Ok(n)
    }

    /// References a core may have read ahead of the others (what bounds memory).
    const WINDOW: usize = 1 << 12;

    /// Runs the trace `reader` reads on `design`: each core issues its next reference
    /// `think` cycles after its last one completed, the cores' references merged in time
    /// order (a heap of the cores' next cycles; each core's references read ahead at most
    /// [`WINDOW`]). The statistics, the last completion, and the events read.
    pub fn replay<R: Read>(
        design: Design,
        config: Config,
        reader: &mut Reader<R>,
        think: u64,
    ) -> Result<(Stats, u64, u64), TraceError> {
        let mut m = Machine::new(design, config);
        let cores = (config.width * config.height) as usize;
        // A reference as queued: its address, and whether it writes and whether it reads
        // read-only data (16 bytes, not an event's 48).
        let mut queues: Vec<VecDeque<(u64, bool, bool)>> = vec![VecDeque::new(); cores];
        let mut ready: BinaryHeap<std::cmp::Reverse<(u64, u32)>> = BinaryHeap::new();
        let mut next = vec![0u64; cores];
        let mut queued = vec![false; cores];
        // Cores with a window's worth read ahead.
        let mut full = 0usize;
        let mut chunk = Chunk::default();
        let mut more = true;
        let (mut end, mut events) = (0u64, 0u64);
        loop {
            // Read ahead until every core has a reference queued, or one core has a window's
            // worth (a trace of fewer cores than the mesh stops there), or the trace ends.
            while more && ready.len() < cores && full == 0 {
                if !reader.next_chunk(&mut chunk)? {
                    more = false;
                    break;
                }
                for e in chunk.events.iter().filter(|e| e.kind == gpusan_trace::Kind::Access) {
                    let c = e.sm as usize % cores;
                    let read_only = e.op.space() == Space::Global;
                    queues[c].push_back((e.addr, e.op.access() != Access::Load, read_only));
                    full += usize::from(queues[c].len() == WINDOW);
                    events += 1;
                    if !queued[c] {
                        queued[c] = true;
                        ready.push(std::cmp::Reverse((next[c], c as u32)));
                    }
                }
            }
            let Some(mut top) = ready.peek_mut() else { break };
            let std::cmp::Reverse((t, c)) = *top;
            let c = c as usize;
            let Some((addr, write, read_only)) = queues[c].pop_front() else {
                queued[c] = false;
                std::collections::binary_heap::PeekMut::pop(top);
                continue;
            };
            full -= usize::from(queues[c].len() == WINDOW - 1);
            let done = if read_only { m.read_only(c as u32, addr, t) } else { m.access(c as u32, addr, write, t) };
            end = end.max(done);
            next[c] = done + think;
            if queues[c].is_empty() {
                // Its next reference is not read yet (or there is none): it waits for the reader.
                queued[c] = false;
                std::collections::binary_heap::PeekMut::pop(top);
            } else {
                // It stays in the heap with its next cycle (one sift, not a pop and a push).
                *top = std::cmp::Reverse((next[c], c as u32));
            }
        }
        Ok((m.stats, end, events))
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        /// A workload written as a trace and replayed gives what the in-memory run gives.
        #[test]
        fn a_replayed_trace_is_the_workload_run_in_memory() {
            for read_only in [false, true] {
                let w = Workload { accesses: 3000, read_only, ..Workload::default() };
                let mut bytes = Vec::new();
                write(&w, 16, &mut bytes).unwrap();
                let (stats, _, events) =
                    replay(Design::BCache, Config::mesh(4, 4), &mut Reader::new(&bytes[..]).unwrap(), w.think).unwrap();
                assert_eq!(events, 3000);
                assert_eq!(stats.accesses, 3000);
                let (direct, _) = super::super::run(Design::BCache, Config::mesh(4, 4), &w);
                assert_eq!(stats.accesses, direct.accesses);
                // Same references per core, same machine: the same misses within noise of
                // the order cores interleave in.
                let (a, b) = (stats.misses as f64, direct.misses as f64);
                assert!((a - b).abs() / b < 0.1, "{a} against {b} (read-only: {read_only})");
            }
        }
    }
}
