//! Synthetic traces shaped like GPUArmor's workloads (§3): a number of live allocations, a
//! small working set per kernel, a root-pointer lookup per warp and allocation it uses, a
//! check per access, some allocations freed and made again between kernels. For tests,
//! for the simulator's own speed, and for sweeps before real traces exist; never cited as
//! a workload's result.

use std::io::Write;

use gpusan_trace::{Access, Config as WriterConfig, Event, KernelInfo, Meta, Op, Space, Writer};
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shape {
    /// Allocations live at the start.
    pub allocations: u32,
    pub kernels: u32,
    pub sms: u32,
    pub warps_per_kernel: u32,
    /// Global accesses per warp.
    pub accesses_per_warp: u32,
    /// Allocations a kernel's warps use, chosen from the live ones.
    pub working_set: u32,
    /// Allocations freed and made again between two kernels.
    pub churn: u32,
    pub seed: u64,
}

impl Default for Shape {
    fn default() -> Self {
        Shape {
            allocations: 1000,
            kernels: 20,
            sms: 132,
            warps_per_kernel: 2048,
            accesses_per_warp: 16,
            working_set: 6,
            churn: 10,
            seed: 1,
        }
    }
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u32) -> u32 {
        (self.next() % u64::from(n.max(1))) as u32
    }
}

/// Writes the trace `shape` describes to `out`; the events written.
pub fn write<W: Write>(shape: &Shape, out: W) -> std::io::Result<u64> {
    let meta = Meta {
        program: format!("synthetic {shape:?}"),
        sms: shape.sms,
        sample_warps: 1,
        source: "gpusan sim synth".into(),
        ..Meta::default()
    };
    let mut w = Writer::new(out, &meta, WriterConfig::default())?;
    let mut rng = Rng(shape.seed.max(1));
    let mut next_id = 1u32;
    let mut next_base = 0x7f00_0000_0000u64;
    // (id, base, size) of the live allocations.
    let mut live: Vec<(u32, u64, u64)> = Vec::new();
    let mut make = |w: &mut Writer<W>, rng: &mut Rng, live: &mut Vec<(u32, u64, u64)>| -> std::io::Result<()> {
        let size = 256u64 << rng.below(16);
        live.push((next_id, next_base, size));
        w.push(&Event::alloc(next_id, next_base, size))?;
        next_id += 1;
        next_base += size.next_multiple_of(512);
        Ok(())
    };
    for _ in 0..shape.allocations {
        make(&mut w, &mut rng, &mut live)?;
    }
    let load = Op::new(Space::Global, Access::Load, 4);
    for k in 0..shape.kernels {
        w.kernel_begin(&KernelInfo {
            kernel: k,
            name: format!("synthetic_{k}"),
            grid: [shape.warps_per_kernel, 1, 1],
            block: [32, 1, 1],
        })?;
        let set: Vec<(u32, u64, u64)> =
            (0..shape.working_set.max(1)).map(|_| live[rng.below(live.len() as u32) as usize]).collect();
        for warp in 0..shape.warps_per_kernel {
            let sm = warp % shape.sms.max(1);
            // Each warp uses two of the kernel's allocations: a lookup for each root pointer.
            let roots = [set[rng.below(set.len() as u32) as usize], set[rng.below(set.len() as u32) as usize]];
            for &(id, base, _) in &roots {
                w.push(&Event::load_meta(k, sm, warp, base, id))?;
            }
            for i in 0..shape.accesses_per_warp {
                let (id, base, size) = roots[(i % 2) as usize];
                let addr = base + (u64::from(warp) * 128 + u64::from(i) * 4) % size;
                w.push(&Event::mem_check(k, sm, warp, addr, id))?;
                w.push(&Event::access(k, sm, warp, load, addr, 128, id))?;
            }
            // Global accesses are about 6 % of a warp's instructions (GPUArmor Fig. 2).
            w.push(&Event::warp_done(k, sm, warp, u64::from(shape.accesses_per_warp) * 16))?;
        }
        w.push(&Event::kernel_end(k))?;
        for _ in 0..shape.churn.min(live.len() as u32) {
            let i = rng.below(live.len() as u32) as usize;
            let (id, _, _) = live.swap_remove(i);
            w.push(&Event::free(id))?;
            make(&mut w, &mut rng, &mut live)?;
        }
    }
    let events = w.events();
    w.finish()?;
    Ok(events)
}
