//! One simulation of GPUArmor's metadata path over a trace (§5): per SM, an MLB; one
//! metadata table of live allocations; each LOADMETA and MEMCHECK the trace holds (or,
//! without recompilation, each global access: GPUArmor-HWOnly, §9.2) costed in metadata
//! loads and cycles; frees invalidate every SM's entry.
//!
//! The timing model is deliberately simple, and every constant is a [`Timing`] field:
//! - a LOADMETA that hits costs `mlb_cycles`; one that misses walks the table, one
//!   `load_cycles` per node;
//! - a MEMCHECK costs `check_cycles` (GPUArmor: three), plus one metadata load on a miss;
//! - an SM's own time is its warps' instructions at `ipc` warp instructions a cycle
//!   (`WarpDone` events), and the extra cycles are hidden by a factor `hiding` (1: none
//!   hidden).
//!
//! The estimated slowdown is `Σ(base + extra / hiding) / Σ base` over SMs; a trace without
//! instruction counts gives none.

use gpusan_trace::{Event, Kind, Space};
use serde::{Deserialize, Serialize};

use crate::mlb::{Mlb, Shape};
use crate::table::{Organisation, Table};

/// Which instructions consult the metadata.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// The hardened binary's LOADMETA and MEMCHECK events, where the check pass placed them.
    Compiled,
    /// No recompilation: every global access to a known allocation looks its metadata up
    /// and checks (GPUArmor-HWOnly).
    HwOnly,
    /// The hardened binary's points derived from a trace of accesses alone (the binary
    /// route's traces have no LOADMETA events): a warp's first access to an allocation in a
    /// kernel stands for the LOADMETA of its root pointer, and every global access to a known
    /// allocation for a MEMCHECK. GPU kernels' roots are mostly their pointer parameters,
    /// looked up once per warp; pointers loaded from memory inside loops would need more.
    Derived,
}

/// The timing model's constants (see the module's comment).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Timing {
    pub load_cycles: f64,
    pub check_cycles: f64,
    pub mlb_cycles: f64,
    pub ipc: f64,
    pub hiding: f64,
}

impl Default for Timing {
    /// An L1 hit's latency for a metadata load (the paper finds > 95 % of metadata in L1),
    /// GPUArmor's three-cycle check, a one-cycle buffer, one warp instruction a cycle per
    /// SM, nothing hidden.
    fn default() -> Self {
        Timing { load_cycles: 33.0, check_cycles: 3.0, mlb_cycles: 1.0, ipc: 1.0, hiding: 1.0 }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Config {
    pub mlb: Shape,
    pub org: Organisation,
    pub mode: Mode,
    pub timing: Timing,
}

/// What one simulation counted.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    pub loadmeta: u64,
    pub loadmeta_hits: u64,
    /// LOADMETAs of a root pointer in no live allocation (they return 0).
    pub loadmeta_null: u64,
    pub memcheck: u64,
    pub memcheck_hits: u64,
    /// Metadata loads from memory (table walks and MEMCHECK misses) and their bytes.
    pub metadata_loads: u64,
    pub metadata_bytes: u64,
    /// Buffer entries dropped by frees, over all SMs.
    pub invalidations: u64,
    /// Lookups of allocations the trace never showed allocated (made before it began).
    pub unknown_allocations: u64,
    pub extra_cycles: f64,
    pub instructions: u64,
    /// Hits over lookups (LOADMETA and MEMCHECK together); 0 without lookups.
    pub hit_rate: f64,
    pub est_slowdown: Option<f64>,
    /// Events of an SM numbered past [`MAX_SMS`] (a damaged trace), skipped.
    pub bad_sms: u64,
}

/// SMs a GPU may have, at most (an H100 has 132).
pub const MAX_SMS: u32 = 4096;

/// A simulation in progress.
pub struct Sim {
    config: Config,
    /// [`Mode::Derived`]: the (kernel, warp, allocation) triples looked up so far in the
    /// kernels running.
    looked_up: std::collections::HashSet<(u32, u32, u32)>,
    table: Table,
    mlbs: Vec<Mlb>,
    extra: Vec<f64>,
    instructions: Vec<u64>,
    stats: Stats,
}

impl Sim {
    pub fn new(config: Config) -> Sim {
        Sim {
            config,
            looked_up: Default::default(),
            table: Table::default(),
            mlbs: Vec::new(),
            extra: Vec::new(),
            instructions: Vec::new(),
            stats: Stats::default(),
        }
    }

    /// The SM's index, its buffer made if new. A number past [`MAX_SMS`] (a damaged trace)
    /// is counted and its events skipped.
    fn sm(&mut self, sm: u32) -> Option<usize> {
        if sm >= MAX_SMS {
            self.stats.bad_sms += 1;
            return None;
        }
        let i = sm as usize;
        if i >= self.mlbs.len() {
            self.mlbs.resize_with(i + 1, || Mlb::new(self.config.mlb));
            self.extra.resize(i + 1, 0.0);
            self.instructions.resize(i + 1, 0);
        }
        Some(i)
    }

    pub fn event(&mut self, e: &Event) {
        match e.kind {
            Kind::LoadMeta if self.config.mode == Mode::Compiled => {
                let Some(sm) = self.sm(e.sm) else { return };
                self.load_meta(sm, e.alloc, e.addr);
            }
            Kind::MemCheck if self.config.mode == Mode::Compiled => {
                let Some(sm) = self.sm(e.sm) else { return };
                self.mem_check(sm, e.alloc);
            }
            Kind::Access if self.config.mode == Mode::HwOnly && e.alloc != 0 && e.op.space() == Space::Global => {
                let Some(sm) = self.sm(e.sm) else { return };
                // The hardware looks up the address's metadata, then checks: one lookup and
                // one check per access.
                self.load_meta(sm, e.alloc, e.addr);
                self.stats.memcheck += 1;
                self.stats.memcheck_hits += 1;
                self.extra[sm] += self.config.timing.check_cycles;
            }
            Kind::Access if self.config.mode == Mode::Derived && e.alloc != 0 && e.op.space() == Space::Global => {
                let Some(sm) = self.sm(e.sm) else { return };
                if self.looked_up.insert((e.kernel, e.warp, e.alloc)) {
                    self.load_meta(sm, e.alloc, e.addr);
                }
                self.mem_check(sm, e.alloc);
            }
            Kind::KernelEnd if self.config.mode == Mode::Derived => self.looked_up.retain(|&(k, _, _)| k != e.kernel),
            Kind::Alloc => self.table.alloc(e.alloc, e.addr),
            Kind::Free => {
                self.table.free(e.alloc);
                for m in &mut self.mlbs {
                    if m.invalidate(e.alloc) {
                        self.stats.invalidations += 1;
                    }
                }
            }
            Kind::WarpDone => {
                let Some(sm) = self.sm(e.sm) else { return };
                self.instructions[sm] = self.instructions[sm].saturating_add(e.count);
            }
            _ => {}
        }
    }

    fn load_meta(&mut self, sm: usize, alloc: u32, addr: u64) {
        let t = self.config.timing;
        self.stats.loadmeta += 1;
        let live = alloc != 0 && self.table.is_live(alloc);
        if alloc != 0 && !live {
            self.stats.unknown_allocations += 1;
        }
        if alloc == 0 {
            self.stats.loadmeta_null += 1;
        }
        // A root pointer in no allocation matches no entry's range.
        if alloc != 0 && self.mlbs[sm].access(alloc) {
            self.stats.loadmeta_hits += 1;
            self.extra[sm] += t.mlb_cycles;
            return;
        }
        let org = self.config.org;
        let loads =
            if live || alloc == 0 { self.table.loads(org, alloc, addr) } else { self.table.loads(org, 0, addr) };
        self.stats.metadata_loads += u64::from(loads);
        self.stats.metadata_bytes += u64::from(loads) * org.node_bytes();
        self.extra[sm] += f64::from(loads) * t.load_cycles;
    }

    fn mem_check(&mut self, sm: usize, alloc: u32) {
        let t = self.config.timing;
        self.stats.memcheck += 1;
        self.extra[sm] += t.check_cycles;
        if alloc == 0 {
            return;
        }
        if self.mlbs[sm].access(alloc) {
            self.stats.memcheck_hits += 1;
        } else {
            // The entry is at the location LOADMETA returned: one load of its 16 bytes.
            self.stats.metadata_loads += 1;
            self.stats.metadata_bytes += 16;
            self.extra[sm] += t.load_cycles;
        }
    }

    pub fn finish(mut self) -> Stats {
        let t = self.config.timing;
        let s = &mut self.stats;
        s.extra_cycles = self.extra.iter().sum();
        s.instructions = self.instructions.iter().fold(0u64, |a, &b| a.saturating_add(b));
        let lookups = s.loadmeta + s.memcheck;
        s.hit_rate = if lookups == 0 { 0.0 } else { (s.loadmeta_hits + s.memcheck_hits) as f64 / lookups as f64 };
        let base: f64 = self.instructions.iter().map(|&i| i as f64 / t.ipc).sum();
        s.est_slowdown = (base > 0.0).then(|| {
            let with: f64 = self
                .instructions
                .iter()
                .zip(&self.extra)
                .map(|(&i, &x)| i as f64 / t.ipc + x / t.hiding.max(f64::MIN_POSITIVE))
                .sum();
            with / base
        });
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mlb::Policy;
    use gpusan_trace::{Access, Op};

    fn config(entries: u32, org: Organisation) -> Config {
        Config {
            mlb: Shape { entries, ways: 0, policy: Policy::Lru },
            org,
            mode: Mode::Compiled,
            timing: Timing { load_cycles: 10.0, check_cycles: 3.0, mlb_cycles: 1.0, ipc: 1.0, hiding: 1.0 },
        }
    }

    fn run(config: Config, events: &[Event]) -> Stats {
        let mut s = Sim::new(config);
        for e in events {
            s.event(e);
        }
        s.finish()
    }

    /// Hand-worked: three allocations; on SM 0 a LOADMETA and MEMCHECK of 1, of 2, of 1
    /// again; 1 freed; a LOADMETA of 1's old pointer on SM 0; 1000 instructions on SM 0.
    fn trace() -> Vec<Event> {
        vec![
            Event::alloc(1, 0x1000, 256),
            Event::alloc(2, 0x2000, 256),
            Event::alloc(3, 0x3000, 256),
            Event::load_meta(0, 0, 0, 0x1000, 1),
            Event::mem_check(0, 0, 0, 0x1004, 1),
            Event::load_meta(0, 0, 0, 0x2000, 2),
            Event::mem_check(0, 0, 0, 0x2004, 2),
            Event::load_meta(0, 0, 0, 0x1000, 1),
            Event::mem_check(0, 0, 0, 0x1008, 1),
            Event::free(1),
            Event::load_meta(0, 0, 1, 0x1000, 0),
            Event::warp_done(0, 0, 0, 1000),
        ]
    }

    #[test]
    fn a_two_entry_buffer_over_a_list() {
        let s = run(config(2, Organisation::List), &trace());
        // LOADMETA 1: miss, list 3,2,1 → 3 loads; MEMCHECK 1: hit. LOADMETA 2: miss, 2 loads;
        // MEMCHECK 2: hit. LOADMETA 1: hit; MEMCHECK 1: hit. Free 1: one invalidation.
        // LOADMETA null: the whole list (3, 2): 2 loads.
        assert_eq!((s.loadmeta, s.loadmeta_hits, s.loadmeta_null), (4, 1, 1));
        assert_eq!((s.memcheck, s.memcheck_hits), (3, 3));
        assert_eq!(s.metadata_loads, 3 + 2 + 2);
        assert_eq!(s.metadata_bytes, 7 * 32);
        assert_eq!(s.invalidations, 1);
        // Cycles: 7 loads × 10 + 1 buffer hit + 3 checks × 3.
        assert_eq!(s.extra_cycles, 70.0 + 1.0 + 9.0);
        assert_eq!(s.est_slowdown, Some(1080.0 / 1000.0));
        assert!((s.hit_rate - 4.0 / 7.0).abs() < 1e-12);
    }

    #[test]
    fn without_a_buffer_every_lookup_walks_and_every_check_loads() {
        let s = run(config(0, Organisation::Oracle), &trace());
        assert_eq!((s.loadmeta_hits, s.memcheck_hits), (0, 0));
        // Four walks of one load, three checks of one load.
        assert_eq!(s.metadata_loads, 7);
        assert_eq!(s.metadata_bytes, 4 * 16 + 3 * 16);
    }

    /// Derived: warp 0 touches allocation 1 twice and 2 once, warp 1 touches 1 once: three
    /// lookups (one per warp and allocation), four checks; after the kernel ends, its
    /// lookups are forgotten.
    #[test]
    fn derived_points_look_up_once_per_warp_and_allocation_and_check_every_access() {
        let g = Op::new(Space::Global, Access::Load, 4);
        let mut events = vec![Event::alloc(1, 0x1000, 256), Event::alloc(2, 0x2000, 256)];
        for (warp, id) in [(0, 1), (0, 1), (0, 2), (1, 1)] {
            events.push(Event::access(0, 0, warp, g, 0x1000 * u64::from(id), 128, id));
        }
        let s = run(Config { mode: Mode::Derived, ..config(8, Organisation::List) }, &events);
        assert_eq!((s.loadmeta, s.memcheck), (3, 4));
        events.push(Event::kernel_end(0));
        events.push(Event::access(0, 0, 0, g, 0x1000, 128, 1));
        let s = run(Config { mode: Mode::Derived, ..config(8, Organisation::List) }, &events);
        assert_eq!((s.loadmeta, s.memcheck), (4, 5), "a new launch looks up again");
    }

    #[test]
    fn hw_only_looks_up_every_global_access_to_a_known_allocation() {
        let global = Op::new(Space::Global, Access::Load, 4);
        let shared = Op::new(Space::Shared, Access::Load, 4);
        let events = vec![
            Event::alloc(1, 0x1000, 256),
            Event::access(0, 0, 0, global, 0x1000, 128, 1),
            Event::access(0, 0, 0, global, 0x1080, 128, 1),
            Event::access(0, 0, 0, shared, 0x10, 128, 0),
            Event::access(0, 0, 0, global, 0x9000, 128, 0),
            Event::load_meta(0, 0, 0, 0x1000, 1),
        ];
        let s = run(Config { mode: Mode::HwOnly, ..config(8, Organisation::Bst) }, &events);
        assert_eq!((s.loadmeta, s.loadmeta_hits, s.memcheck), (2, 1, 2), "the trace's own LOADMETA is ignored");
    }
}
