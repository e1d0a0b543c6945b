//! A trace's workload characterization (GPUArmor §3: Table 2, Figs. 2-4): allocations and
//! their sizes, the most live at once, and per kernel the accesses by space, the
//! allocations touched and the allocation working set.
//!
//! The working set here: on each SM, the most distinct allocations among any
//! `window` consecutive global accesses (GPUArmor: "the maximal set of simultaneously
//! accessed allocations"); a kernel's is its largest over SMs.

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::Read;

use gpusan_trace::{Kind, Reader, Space, TraceError};
use serde::Serialize;

#[derive(Clone, Debug, Default, Serialize)]
pub struct Kernel {
    pub kernel: u32,
    pub name: String,
    pub global_accesses: u64,
    pub shared_accesses: u64,
    pub local_accesses: u64,
    pub other_accesses: u64,
    pub instructions: u64,
    pub allocations_touched: usize,
    pub working_set: usize,
    pub live_allocations_at_launch: usize,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Characterization {
    pub events: u64,
    pub allocations: u64,
    pub frees: u64,
    pub max_live: usize,
    /// Allocation sizes: smallest, percentiles 25/50/75, largest (bytes).
    pub size_min: u64,
    pub size_p25: u64,
    pub size_median: u64,
    pub size_p75: u64,
    pub size_max: u64,
    pub kernels: Vec<Kernel>,
    /// The window the working sets were measured over.
    pub window: usize,
}

#[derive(Default)]
struct SmWindow {
    recent: VecDeque<u32>,
    counts: HashMap<u32, u32>,
}

impl SmWindow {
    /// Adds an access to `alloc`; the distinct allocations in the window now.
    fn push(&mut self, alloc: u32, window: usize) -> usize {
        self.recent.push_back(alloc);
        *self.counts.entry(alloc).or_default() += 1;
        if self.recent.len() > window {
            if let Some(old) = self.recent.pop_front() {
                if let Some(c) = self.counts.get_mut(&old) {
                    *c -= 1;
                    if *c == 0 {
                        self.counts.remove(&old);
                    }
                }
            }
        }
        self.counts.len()
    }
}

struct Open {
    kernel: Kernel,
    touched: HashSet<u32>,
    windows: HashMap<u32, SmWindow>,
}

/// Characterizes the trace `reader` reads; `window`: accesses per working-set window.
pub fn characterize<R: Read>(reader: &mut Reader<R>, window: usize) -> Result<Characterization, TraceError> {
    let window = window.max(1);
    let mut c = Characterization { window, ..Characterization::default() };
    let mut sizes: Vec<u64> = Vec::new();
    let mut live: HashSet<u32> = HashSet::new();
    let mut open: HashMap<u32, Open> = HashMap::new();
    let mut done: Vec<Kernel> = Vec::new();
    let mut chunk = gpusan_trace::Chunk::default();
    while reader.next_chunk(&mut chunk)? {
        let mut names = chunk.kernels.iter();
        for e in &chunk.events {
            match e.kind {
                Kind::Alloc => {
                    c.allocations += 1;
                    sizes.push(e.size);
                    live.insert(e.alloc);
                    c.max_live = c.max_live.max(live.len());
                }
                Kind::Free => {
                    c.frees += 1;
                    live.remove(&e.alloc);
                }
                Kind::KernelBegin => {
                    let name = names.next().map(|k| k.name.clone()).unwrap_or_default();
                    let kernel =
                        Kernel { kernel: e.kernel, name, live_allocations_at_launch: live.len(), ..Kernel::default() };
                    if let Some(old) =
                        open.insert(e.kernel, Open { kernel, touched: HashSet::new(), windows: HashMap::new() })
                    {
                        done.push(close(old));
                    }
                }
                Kind::KernelEnd => {
                    if let Some(k) = open.remove(&e.kernel) {
                        done.push(close(k));
                    }
                }
                Kind::Access | Kind::WarpDone => {
                    let k = open.entry(e.kernel).or_insert_with(|| Open {
                        kernel: Kernel { kernel: e.kernel, ..Kernel::default() },
                        touched: HashSet::new(),
                        windows: HashMap::new(),
                    });
                    if e.kind == Kind::WarpDone {
                        k.kernel.instructions += e.count;
                        continue;
                    }
                    match e.op.space() {
                        Space::Global => {
                            k.kernel.global_accesses += 1;
                            if e.alloc != 0 {
                                k.touched.insert(e.alloc);
                                let n = k.windows.entry(e.sm).or_default().push(e.alloc, window);
                                k.kernel.working_set = k.kernel.working_set.max(n);
                            }
                        }
                        Space::Shared => k.kernel.shared_accesses += 1,
                        Space::Local => k.kernel.local_accesses += 1,
                        Space::Other => k.kernel.other_accesses += 1,
                    }
                }
                _ => {}
            }
        }
    }
    done.extend(open.into_values().map(close));
    done.sort_by_key(|k| k.kernel);
    c.kernels = done;
    c.events = reader.events();
    sizes.sort_unstable();
    let pick = |q: usize| sizes.get((sizes.len().saturating_sub(1)) * q / 4).copied().unwrap_or(0);
    (c.size_min, c.size_p25, c.size_median, c.size_p75, c.size_max) = (pick(0), pick(1), pick(2), pick(3), pick(4));
    Ok(c)
}

fn close(o: Open) -> Kernel {
    Kernel { allocations_touched: o.touched.len(), ..o.kernel }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpusan_trace::{Access, Event, KernelInfo, Meta, Op, Writer};

    #[test]
    fn a_small_trace_characterized_by_hand() {
        let g = Op::new(Space::Global, Access::Load, 4);
        let s = Op::new(Space::Shared, Access::Store, 4);
        let mut w = Writer::new(Vec::new(), &Meta::default(), Default::default()).unwrap();
        for (id, size) in [(1, 256), (2, 1024), (3, 4096), (4, 1 << 20)] {
            w.push(&Event::alloc(id, u64::from(id) << 32, size)).unwrap();
        }
        w.push(&Event::free(4)).unwrap();
        w.kernel_begin(&KernelInfo { kernel: 0, name: "k".into(), grid: [1, 1, 1], block: [32, 1, 1] }).unwrap();
        // On SM 0: allocations 1, 2, 1, 3 (window 2: {1,2}, {2,1}, {1,3}: 2 at most);
        // on SM 1: 1 only. A shared access, 500 instructions.
        for (sm, id) in [(0, 1), (0, 2), (0, 1), (0, 3), (1, 1)] {
            w.push(&Event::access(0, sm, 0, g, u64::from(id) << 32, 4, id)).unwrap();
        }
        w.push(&Event::access(0, 0, 0, s, 0x10, 4, 0)).unwrap();
        w.push(&Event::warp_done(0, 0, 0, 500)).unwrap();
        w.push(&Event::kernel_end(0)).unwrap();
        let bytes = w.finish().unwrap();
        let c = characterize(&mut Reader::new(&bytes[..]).unwrap(), 2).unwrap();
        assert_eq!((c.allocations, c.frees, c.max_live), (4, 1, 4));
        assert_eq!((c.size_min, c.size_median, c.size_max), (256, 1024, 1 << 20));
        let k = &c.kernels[0];
        assert_eq!((k.global_accesses, k.shared_accesses, k.instructions), (5, 1, 500));
        assert_eq!((k.allocations_touched, k.working_set, k.live_allocations_at_launch), (3, 2, 3));
        assert_eq!(k.name, "k");
    }
}
