//! Real programs on the simulated machines: a CPU trace (`crates/cputrace`, a C program's
//! every load and store with the 8-byte values moved, and its allocations) replayed on
//! HardBound, BCache and BCache-3D, with the paper's two schemes, bounds sharing (§III-A)
//! and smart tagging (§III-B) — Figs 9–12 and Table III for programs.
//!
//! **What the trace shows and the hardware would see.** An 8-byte value that points into a
//! live object is a pointer (the hardware's pointer bit). A load of one loads its bounds
//! from `BoundAddr(location)`; a store of one stores them. An access inside an object is a
//! dereference, checked against the bounds of the pointer used.
//!
//! **What the trace cannot show: registers.** Smart tagging skips the check of a pointer
//! that is known safe — initialized (from `malloc`), or checked — until it is modified. A
//! trace sees a thread's pointers only when they come from `malloc` or move through memory;
//! so each thread is taken to hold, per object, the pointer it last obtained, and two rules
//! bound what the registers did:
//! - **stored** (the most a trace can skip): a pointer counts as modified only when the
//!   thread stores it with a value it never obtained (arithmetic that reached memory);
//!   `p[i]` through an unmodified `p` is skipped, as x86's base + index addressing does;
//! - **address** (the least): every dereference at an address other than the last one
//!   through that pointer counts as a modification (`p++` in every loop).
//!
//! The timed runs use the *stored* rule; Table III gives both.
//!
//! **Bounds sharing** changes where a copied pointer's bounds live (a link to the first
//! record, not a record of its own): what it saves is storage (Fig. 12), counted here. The
//! traffic of both designs reads and writes `BoundAddr(location)`, so that Fig. 9 compares
//! the machines on one stream, as the paper does.
//!
//! **Time.** Each thread issues its accesses in order, each after the last one completed,
//! plus `think` cycles; data (everything not read-only when read-only data is simulated) goes
//! through a private L1 data cache with a fixed miss penalty, the same for every design; bounds
//! loads and stores and read-only data go through the design's machine ([`Machine`]). A check
//! costs `check_cycles`. A thread's clock starts at the machine's latest issue when it
//! appears, and catches up to it after it waited (a real-time gap of `gap_us` or more
//! between two of its events: a join, a barrier).

use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::io::Read;

use serde::{Deserialize, Serialize};

use gpusan_trace::{Access, Chunk, Event, Kind, Reader, TraceError};

use super::cache::{Cache, Geometry};
use super::model::{Config, Design, Machine, Stats};
use super::queue::Lanes;

type Map<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<ahash::AHasher>>;

/// `warp` of a CPU trace's access: the program marked the data read-only.
const READ_ONLY: u32 = 1;
/// `epoch` of a CPU trace's allocation: a read-only region, not an object.
const REGION: u32 = 1;

/// Threads a trace may have: a thread's number indexes the replay's tables, so a damaged
/// trace's must not size them.
pub const MAX_THREADS: u32 = 4096;

/// Why a replay stopped.
#[derive(Debug, thiserror::Error)]
pub enum ProgramError {
    #[error(transparent)]
    Trace(#[from] TraceError),
    #[error("thread {tid} in chunk {chunk}: a CPU trace has at most {MAX_THREADS} threads (a damaged trace?)")]
    Thread { tid: u32, chunk: u64 },
}

/// Where a location's bounds record lies (a 16-byte record per 8-byte word, as the paper's
/// 8-byte record per 4-byte word).
pub fn bound_addr(location: u64) -> u64 {
    0x4000_0000_0000_0000 | (location << 1)
}

/// What a replay simulates besides the machine.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Options {
    /// Bounds loads and stores go to the machine (Figs 9 and 11).
    pub bounds: bool,
    /// Read-only data goes to the machine (Figs 10 and 11); else it is data.
    pub read_only: bool,
    /// Smart tagging: a safe pointer's check is skipped and its bounds load deferred.
    pub smart: bool,
    pub think: u64,
    pub data_l1: Geometry,
    pub data_hit_cycles: u64,
    pub data_miss_cycles: u64,
    pub check_cycles: u64,
    pub record_bytes: u64,
    pub link_bytes: u64,
    pub gap_us: u32,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            bounds: true,
            read_only: true,
            smart: false,
            think: 1,
            data_l1: Geometry { bytes: 32 << 10, ways: 4, block: 64 },
            data_hit_cycles: 2,
            data_miss_cycles: 20,
            check_cycles: 1,
            record_bytes: 16,
            link_bytes: 8,
            gap_us: 200,
        }
    }
}

/// Checks by the two rules of the module's comment.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Checks {
    pub total: u64,
    pub skipped_stored: u64,
    pub skipped_address: u64,
}

/// Bytes given to bounds information, without and with sharing.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Storage {
    /// Locations that ever held a pointer.
    pub locations: u64,
    /// Of those, locations whose pointer's bounds were another location's record (copies).
    pub linked: u64,
    pub unshared_bytes: u64,
    pub shared_bytes: u64,
}

/// What a replay counted.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ProgramStats {
    pub threads: u32,
    pub events: u64,
    /// The program's loads and stores (its memory micro-ops).
    pub memory_ops: u64,
    pub read_only_ops: u64,
    pub pointer_loads: u64,
    pub pointer_stores: u64,
    pub bounds_loads: u64,
    /// Pointer loads whose bounds load smart tagging deferred, and of those, the ones loaded
    /// later after all (the pointer was modified, then dereferenced).
    pub bounds_loads_deferred: u64,
    pub bounds_loads_late: u64,
    pub bounds_stores: u64,
    pub checks: Checks,
    pub storage: Storage,
    pub data_l1_misses: u64,
    /// The machine's counts: bounds information and read-only data.
    pub machine: Stats,
    /// The last cycle any thread finished at.
    pub cycles: u64,
    /// Memory micro-ops per cycle: the program's loads and stores over `cycles`.
    pub upc: f64,
}

/// A pointer a thread holds, by the object it points into.
#[derive(Clone, Copy, Debug)]
struct Held {
    offset: u64,
    /// Safe by the stored rule.
    safe: bool,
    /// Safe by the address rule, and the address it was last checked or used at.
    safe_at: Option<u64>,
    /// Where its bounds are to be loaded from, while they are not in the register (smart
    /// tagging deferred the load).
    deferred: Option<u64>,
    /// The record its bounds are in (sharing), once stored.
    record: Option<u64>,
    /// The location it was loaded from, while unmodified: a check marks that location's
    /// pointer safe too (§III-B: the tag is set "after passing the bounds checking").
    from: Option<u64>,
}

#[derive(Clone, Copy, Debug)]
struct Tag {
    safe: bool,
    record: u64,
    /// The pointer it marks: its object and offset.
    target: u32,
    offset: u64,
}

/// What one event asks of the machine.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Work {
    /// A program access: its address, and whether it reads read-only data.
    pub data: Option<(u64, bool)>,
    pub bounds_load: Option<u64>,
    pub bounds_store: Option<u64>,
    pub check: bool,
}

/// A CPU trace's event as the replay keeps it queued: only what the lowering reads, in 32
/// bytes against an [`Event`]'s 48 (the queues hold megabytes of them, filled long before
/// they are replayed).
#[derive(Clone, Copy, Debug, Default)]
struct Step {
    addr: u64,
    /// An access's `count` (the offset its 8-byte value points at); an allocation's size.
    count: u64,
    /// Microseconds (the trace's `kernel`).
    us: u32,
    alloc: u32,
    epoch: u32,
    what: u8,
}

impl Step {
    const ACCESS: u8 = 1;
    const ALLOC: u8 = 2;
    const FREE: u8 = 3;
    const KIND: u8 = 3;
    const STORE: u8 = 4;
    const READ_ONLY: u8 = 8;
    const EIGHT: u8 = 16;

    fn new(e: &Event) -> Step {
        let (kind, count) = match e.kind {
            Kind::Access => (Step::ACCESS, e.count),
            Kind::Alloc => (Step::ALLOC, e.size),
            Kind::Free => (Step::FREE, e.count),
            _ => (0, e.count),
        };
        let what = kind
            | if e.op.access() != Access::Load { Step::STORE } else { 0 }
            | if e.warp & READ_ONLY != 0 { Step::READ_ONLY } else { 0 }
            | if e.size == 8 { Step::EIGHT } else { 0 };
        Step { addr: e.addr, count, us: e.kernel, alloc: e.alloc, epoch: e.epoch, what }
    }

    fn is(&self, flag: u8) -> bool {
        self.what & flag != 0
    }
}

/// The hardware's view of a CPU trace, event by event: pointer tags, what each thread holds,
/// checks and storage. Independent of the machine's timing.
#[derive(Default)]
pub struct Lowering {
    smart: bool,
    objects: Map<u32, (u64, u64)>,
    tags: BTreeMap<u64, Tag>,
    /// Per thread: the pointers it holds.
    held: Vec<Map<u32, Held>>,
    /// Per location that ever held a pointer: whether its bounds are a link.
    locations: Map<u64, bool>,
    pub stats: ProgramStats,
}

impl Lowering {
    pub fn new(smart: bool) -> Lowering {
        Lowering { smart, ..Lowering::default() }
    }

    fn thread(&mut self, tid: u32) -> &mut Map<u32, Held> {
        let t = tid as usize;
        if self.held.len() <= t {
            self.held.resize_with(t + 1, Map::default);
            self.stats.threads = self.held.len() as u32;
        }
        &mut self.held[t]
    }

    /// One event of thread `e.sm`, in its program order; one of a thread at or past
    /// [`MAX_THREADS`] is ignored (the replay refuses such a trace first).
    pub fn event(&mut self, e: &Event) -> Work {
        self.step(e.sm, &Step::new(e))
    }

    /// [`Lowering::event`] for a queued step of thread `tid`.
    fn step(&mut self, tid: u32, e: &Step) -> Work {
        if tid >= MAX_THREADS {
            return Work::default();
        }
        self.stats.events += 1;
        match e.what & Step::KIND {
            Step::ALLOC if e.epoch != REGION => {
                self.objects.insert(e.alloc, (e.addr, e.count));
                // The pointer `malloc` returned: initialized, its bounds set.
                self.thread(tid).insert(
                    e.alloc,
                    Held { offset: 0, safe: true, safe_at: Some(e.addr), deferred: None, record: None, from: None },
                );
                Work::default()
            }
            Step::FREE => {
                if let Some((base, size)) = self.objects.remove(&e.alloc) {
                    let gone: Vec<u64> =
                        self.tags.range(base..base.saturating_add(size.max(1))).map(|(l, _)| *l).collect();
                    for l in gone {
                        self.tags.remove(&l);
                    }
                    for h in &mut self.held {
                        h.remove(&e.alloc);
                    }
                }
                Work::default()
            }
            Step::ACCESS => self.access(tid, e),
            _ => Work::default(),
        }
    }

    fn access(&mut self, tid: u32, e: &Step) -> Work {
        let s = &mut self.stats;
        s.memory_ops += 1;
        let read_only = e.is(Step::READ_ONLY);
        s.read_only_ops += u64::from(read_only);
        let mut work = Work { data: Some((e.addr, read_only)), ..Work::default() };
        let store = e.is(Step::STORE);
        let smart = self.smart;

        // The dereference: checked against the bounds of the thread's pointer into the object.
        if e.alloc != 0 {
            self.stats.checks.total += 1;
            // A pointer the trace never saw the thread obtain (through a register or the
            // stack): not known safe, its bounds taken to be in the register.
            let h = self.thread(tid).entry(e.alloc).or_insert(Held {
                offset: 0,
                safe: false,
                safe_at: None,
                deferred: None,
                record: None,
                from: None,
            });
            let (skip_stored, skip_address) = (h.safe, h.safe_at == Some(e.addr));
            h.safe_at = Some(e.addr);
            let late = if skip_stored && smart { None } else { h.deferred.take() };
            h.safe = true;
            let checked_from = (!skip_stored).then_some(h.from).flatten().map(|l| (l, h.offset));
            self.stats.checks.skipped_stored += u64::from(skip_stored);
            self.stats.checks.skipped_address += u64::from(skip_address);
            if let Some((l, offset)) = checked_from {
                if let Some(t) = self.tags.get_mut(&l).filter(|t| t.target == e.alloc && t.offset == offset) {
                    t.safe = true;
                }
            }
            if !smart || !skip_stored {
                work.check = true;
                // A pointer whose bounds load was deferred loads them now.
                if let Some(b) = late {
                    work.bounds_load = Some(b);
                    self.stats.bounds_loads += 1;
                    self.stats.bounds_loads_late += 1;
                }
            }
        }

        if !e.is(Step::EIGHT) {
            return work;
        }
        let loc = e.addr;
        if e.epoch == 0 {
            // A non-pointer over a pointer: the pointer bit cleared.
            if store {
                self.tags.remove(&loc);
            }
            return work;
        }
        let target = e.epoch;
        if !store {
            self.stats.pointer_loads += 1;
            let tag = self.tags.get(&loc).copied();
            let safe = tag.is_some_and(|t| t.safe);
            let record = tag.map_or(bound_addr(loc), |t| t.record);
            let defer = smart && safe;
            if defer {
                self.stats.bounds_loads_deferred += 1;
            } else {
                self.stats.bounds_loads += 1;
                work.bounds_load = Some(bound_addr(loc));
            }
            let addr = self.objects.get(&target).map_or(0, |(b, _)| b.wrapping_add(e.count));
            self.thread(tid).insert(
                target,
                Held {
                    offset: e.count,
                    safe,
                    safe_at: safe.then_some(addr),
                    deferred: defer.then_some(bound_addr(loc)),
                    record: Some(record),
                    from: Some(loc),
                },
            );
        } else {
            self.stats.pointer_stores += 1;
            self.stats.bounds_stores += 1;
            work.bounds_store = Some(bound_addr(loc));
            let h = self.thread(tid).entry(target).or_insert(Held {
                offset: e.count,
                safe: false,
                safe_at: None,
                deferred: None,
                record: None,
                from: None,
            });
            // A value the thread never obtained: the pointer was modified on the way. A
            // deferred bounds load is needed now, to store the bounds.
            if h.offset != e.count {
                h.offset = e.count;
                h.safe = false;
                h.safe_at = None;
                h.from = None;
            }
            let late = if h.safe { None } else { h.deferred.take() };
            let record = *h.record.get_or_insert(bound_addr(loc));
            let safe = h.safe;
            if let Some(b) = late {
                work.bounds_load = Some(b);
                self.stats.bounds_loads += 1;
                self.stats.bounds_loads_late += 1;
            }
            self.tags.insert(loc, Tag { safe, record, target, offset: e.count });
            let linked = record != bound_addr(loc);
            let known = self.locations.insert(loc, linked).is_some();
            let st = &mut self.stats.storage;
            if !known {
                st.locations += 1;
            }
        }
        work
    }

    /// The counts, storage summed up.
    pub fn finish(mut self, opts: &Options) -> ProgramStats {
        let st = &mut self.stats.storage;
        st.linked = self.locations.values().filter(|l| **l).count() as u64;
        st.unshared_bytes = st.locations * opts.record_bytes;
        st.shared_bytes = (st.locations - st.linked) * opts.record_bytes + st.linked * opts.link_bytes;
        self.stats
    }
}

/// Events queued ahead of a run at most. With the lanes' segments, what bounds a replay's
/// memory: a thread's lane holds what the run furthest behind on that thread has not run,
/// so the lanes hold at most `QUEUED` × 32 bytes per run sharing the reading (and about one
/// run's worth where the runs keep pace, as in our traces), plus a 32 KiB segment per
/// thread.
const QUEUED: usize = 1 << 18;

/// The machine, the data caches and the lowering: one event timed.
struct Timed<'o> {
    opts: &'o Options,
    cores: u32,
    m: Machine,
    data: Vec<Cache>,
    low: Lowering,
    data_misses: u64,
}

impl Timed<'_> {
    /// Thread `t`'s event `e`, issued at `at`: the cycle it is done.
    fn event(&mut self, t: u32, at: u64, e: &Step) -> u64 {
        let opts = self.opts;
        let core = t % self.cores;
        let w = self.low.step(t, e);
        let mut done = at;
        if w.bounds_load.is_none() && w.bounds_store.is_none() && w.data.is_none() {
            return done;
        }
        if let Some(b) = w.bounds_load.filter(|_| opts.bounds) {
            done = self.m.access(core, b, false, done);
        }
        if w.check {
            done += opts.check_cycles;
        }
        if let Some((addr, ro)) = w.data {
            if ro && opts.read_only {
                done = self.m.read_only(core, addr, done);
            } else {
                let c = &mut self.data[core as usize];
                let block = c.block_of(addr);
                if c.lookup(block) {
                    done += opts.data_hit_cycles;
                } else {
                    self.data_misses += 1;
                    c.insert(block);
                    done += opts.data_miss_cycles;
                }
            }
        }
        if let Some(b) = w.bounds_store.filter(|_| opts.bounds) {
            done = self.m.access(core, b, true, done);
        }
        done + opts.think
    }
}

/// How far ahead in its lane a thread's events are fetched into the cache. The lanes hold up
/// to [`QUEUED`] events (megabytes), filled long before they are replayed, and the threads
/// take turns every few events: without it, nearly every event is a cache miss.
const PREFETCH: usize = 4;

fn prefetch(e: Option<&Step>) {
    #[cfg(target_arch = "x86_64")]
    if let Some(e) = e {
        // SAFETY: SSE is part of x86-64; a prefetch is a hint that reads nothing and cannot
        // fault, and the address is a live event's.
        unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>((e as *const Step).cast()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = e;
}

/// A thread of one run: how far it got in the thread's lane and how much of the lane it was
/// fed, its clock, the real time of its last event, whether it ended, whether it is in the
/// heap.
struct Thread {
    next: u64,
    have: u64,
    clock: u64,
    last_us: Option<u32>,
    ended: bool,
    ready: bool,
}

/// One machine's replay of a trace, between chunks: it asks for the next chunk when it
/// must (so that [`replay_all`] can feed several from one reading and each still does what
/// it would alone).
struct Replay<'o> {
    timed: Timed<'o>,
    threads: Vec<Thread>,
    ready: BinaryHeap<std::cmp::Reverse<(u64, u32)>>,
    /// Threads neither ended nor with an event queued: the reader reads on for them.
    starving: usize,
    queued: usize,
    /// [`QUEUED`] (less in tests).
    queue_limit: usize,
    now: u64,
    end: u64,
    /// Chunks remain to be read.
    more: bool,
}

impl<'o> Replay<'o> {
    fn new(design: Design, config: Config, opts: &'o Options, queue_limit: usize) -> Replay<'o> {
        let cores = (config.width * config.height).max(1);
        Replay {
            timed: Timed {
                opts,
                cores,
                m: Machine::new(design, config),
                data: (0..cores).map(|_| Cache::new(opts.data_l1)).collect(),
                low: Lowering::new(opts.smart),
                data_misses: 0,
            },
            threads: Vec::new(),
            ready: BinaryHeap::new(),
            starving: 0,
            queued: 0,
            queue_limit,
            now: 0,
            end: 0,
            more: true,
        }
    }

    /// Whether it waits for the next chunk: until every live thread has an event queued, or
    /// enough are queued.
    fn wants(&self) -> bool {
        self.more && (self.threads.is_empty() || self.queued < self.queue_limit && self.starving > 0)
    }

    /// A chunk's events, queued by thread (in the lanes already; the chunk's threads checked
    /// before).
    fn feed(&mut self, events: &[Event]) {
        for e in events {
            let t = e.sm as usize;
            if self.threads.len() <= t {
                self.starving += t + 1 - self.threads.len();
                self.threads.resize_with(t + 1, || Thread {
                    next: 0,
                    have: 0,
                    clock: u64::MAX,
                    last_us: None,
                    ended: false,
                    ready: false,
                });
            }
            let th = &mut self.threads[t];
            if th.clock == u64::MAX {
                // A new thread starts when it appears.
                th.clock = self.now;
            }
            if e.kind == Kind::WarpDone {
                if !th.ended && th.next == th.have {
                    self.starving -= 1;
                }
                th.ended = true;
                continue;
            }
            if th.next == th.have && !th.ended {
                self.starving -= 1;
            }
            th.have += 1;
            self.queued += 1;
            if !th.ready {
                th.ready = true;
                self.ready.push(std::cmp::Reverse((th.clock, t as u32)));
            }
        }
    }

    /// Replays until it wants the next chunk, or no thread has anything left to run.
    fn run(&mut self, lanes: &Lanes<Step>) {
        let opts = self.timed.opts;
        while !self.wants() {
            let Some(std::cmp::Reverse((_, mut t))) = self.ready.pop() else { return };
            // The thread runs on while it stays the earliest and the reader need not read.
            loop {
                let th = &mut self.threads[t as usize];
                if th.next == th.have {
                    th.ready = false;
                    break;
                }
                let e = *lanes.get(t as usize, th.next).expect("a run's thread was fed what it has");
                th.next += 1;
                prefetch(lanes.get(t as usize, th.next + PREFETCH as u64));
                self.queued -= 1;
                if th.next == th.have && !th.ended {
                    self.starving += 1;
                }
                // A thread that waited (in real time) catches up with the others.
                if th.last_us.is_some_and(|l| e.us.wrapping_sub(l) >= opts.gap_us) {
                    th.clock = th.clock.max(self.now);
                }
                th.last_us = Some(e.us);
                let at = th.clock;
                self.now = self.now.max(at);
                let done = self.timed.event(t, at, &e);
                self.end = self.end.max(done);
                let th = &mut self.threads[t as usize];
                th.clock = done;
                if th.next == th.have {
                    th.ready = false;
                    break;
                }
                if self.wants() {
                    self.ready.push(std::cmp::Reverse((done, t)));
                    break;
                }
                // Another thread is earlier: it takes the heap's top in this one's place
                // (one sift, not a pop and a push).
                if let Some(mut top) = self.ready.peek_mut() {
                    if top.0 < (done, t) {
                        t = std::mem::replace(&mut *top, std::cmp::Reverse((done, t))).0 .1;
                    }
                }
            }
        }
    }

    fn finish(self) -> ProgramStats {
        let t = self.timed;
        let mut stats = t.low.finish(t.opts);
        stats.data_l1_misses = t.data_misses;
        stats.machine = t.m.stats.clone();
        stats.cycles = self.end;
        stats.upc = stats.memory_ops as f64 / self.end.max(1) as f64;
        stats
    }
}

/// Replays a CPU trace on `design`. Threads map to cores by `tid % cores`.
pub fn replay<R: Read>(
    design: Design,
    config: Config,
    opts: &Options,
    reader: &mut Reader<R>,
) -> Result<ProgramStats, ProgramError> {
    let mut all = replay_all(&[(design, *opts)], config, reader)?;
    Ok(all.pop().expect("one run, one result"))
}

/// Replays a CPU trace on several machines at once, the trace read and decoded once: each
/// run's result is the one [`replay`] gives it alone. A run runs until it asks for the next
/// chunk or is done, so every run still going asks for each chunk in turn and gets it when it
/// would alone.
pub fn replay_all<R: Read>(
    runs: &[(Design, Options)],
    config: Config,
    reader: &mut Reader<R>,
) -> Result<Vec<ProgramStats>, ProgramError> {
    replay_queued(runs, config, reader, QUEUED)
}

fn replay_queued<R: Read>(
    runs: &[(Design, Options)],
    config: Config,
    reader: &mut Reader<R>,
    queue_limit: usize,
) -> Result<Vec<ProgramStats>, ProgramError> {
    let mut reps: Vec<Replay> = runs.iter().map(|(d, o)| Replay::new(*d, config, o, queue_limit)).collect();
    let mut lanes = Lanes::default();
    let mut chunk = Chunk::default();
    // Runs still going: a run that does not ask for the next chunk is done (alone, it would
    // read no further).
    let mut live = vec![true; reps.len()];
    for n in 0u64.. {
        for (r, l) in reps.iter_mut().zip(&mut live).filter(|(_, l)| **l) {
            r.run(&lanes);
            *l = r.wants();
        }
        if !live.contains(&true) {
            break;
        }
        if !reader.next_chunk(&mut chunk)? {
            for (r, _) in reps.iter_mut().zip(&live).filter(|(_, l)| **l) {
                r.more = false;
                r.run(&lanes);
            }
            break;
        }
        if let Some(e) = chunk.events.iter().find(|e| e.sm >= MAX_THREADS) {
            return Err(ProgramError::Thread { tid: e.sm, chunk: n });
        }
        for e in chunk.events.iter().filter(|e| e.kind != Kind::WarpDone) {
            lanes.push(e.sm as usize, Step::new(e));
        }
        for (r, _) in reps.iter_mut().zip(&live).filter(|(_, l)| **l) {
            r.feed(&chunk.events);
        }
        // What every run still going is past goes back to the pool.
        for t in 0..lanes.threads() {
            let going = reps.iter().zip(&live).filter(|(_, l)| **l);
            if let Some(past) = going.filter_map(|(r, _)| r.threads.get(t)).map(|th| th.next).min() {
                lanes.release(t, past);
            }
        }
    }
    Ok(reps.into_iter().map(Replay::finish).collect())
}

#[cfg(test)]
mod tests {
    use gpusan_trace::{Op, Space, Writer};

    use super::*;

    fn alloc(tid: u32, id: u32, base: u64, size: u64) -> Event {
        Event { sm: tid, ..Event::alloc(id, base, size) }
    }
    /// An access by `tid` at `addr` inside object `obj` (0: none); for 8 bytes, `to` the object
    /// the value points into at `offset`.
    fn acc(tid: u32, store: bool, addr: u64, size: u64, obj: u32, to: u32, offset: u64) -> Event {
        let a = if store { Access::Store } else { Access::Load };
        let mut e = Event::access(0, tid, 0, Op::new(Space::Global, a, size as u32), addr, size, obj);
        e.epoch = to;
        e.count = offset;
        e
    }

    /// Thread 0 allocates a table (1) and a node (2), stores the node's pointer, and reads
    /// the node; thread 1 loads the pointer, reads the node twice at one address and once at
    /// another, then stores a pointer into the node's middle (arithmetic that reached memory)
    /// and reads through it.
    fn program() -> Vec<Event> {
        let (table, node) = (0x1000, 0x2000);
        vec![
            alloc(0, 1, table, 64),
            alloc(0, 2, node, 32),
            acc(0, true, table, 8, 1, 2, 0),     // pointer store through malloc's pointer
            acc(0, false, node, 4, 2, 0, 0),     // through malloc's pointer
            acc(1, false, table, 8, 1, 2, 0),    // a table pointer not seen: checked; a pointer load (tag safe)
            acc(1, false, node + 4, 4, 2, 0, 0), // through it
            acc(1, false, node + 4, 4, 2, 0, 0), // again at the same address
            acc(1, false, node + 8, 4, 2, 0, 0), // at another
            acc(1, true, table + 8, 8, 1, 2, 16), // a modified pointer stored: unsafe tag
            acc(1, false, node + 16, 4, 2, 0, 0), // through the modified pointer
        ]
    }

    #[test]
    fn checks_by_both_rules_are_hand_counted() {
        let mut low = Lowering::new(true);
        let work: Vec<Work> = program().iter().map(|e| low.event(e)).collect();
        let s = low.finish(&Options::default());
        // Dereferences: every access inside an object (8 of them).
        assert_eq!(s.checks.total, 8);
        // Stored rule: checked are only thread 1's first use of the table (no pointer to
        // it seen: it came through a global) and its use of the modified pointer.
        let checked: Vec<usize> = work.iter().enumerate().filter(|(_, w)| w.check).map(|(i, _)| i).collect();
        assert_eq!(checked, [4, 9], "smart: checked events");
        assert_eq!(s.checks.skipped_stored, 6);
        // Address rule: skipped are the two uses of malloc's pointers at their objects'
        // starts and the repeat at node + 4.
        assert_eq!(s.checks.skipped_address, 3);
        assert_eq!((s.pointer_loads, s.pointer_stores), (1, 2));
        // The pointer load was from a safe location: its bounds load deferred; the pointer
        // was modified before it was stored again, so its bounds were loaded then.
        assert_eq!((s.bounds_loads_deferred, s.bounds_loads_late, s.bounds_loads), (1, 1, 1));
        assert_eq!(work[8].bounds_load, Some(bound_addr(0x1000)));
        assert_eq!(work[8].bounds_store, Some(bound_addr(0x1008)));
        // Storage: two locations; the second's bounds are the first's record (a link).
        assert_eq!(s.storage, Storage { locations: 2, linked: 1, unshared_bytes: 32, shared_bytes: 24 });
    }

    /// A check marks the location its pointer came from safe: the next thread to load it
    /// skips both the check and the bounds load.
    #[test]
    fn a_checked_pointer_makes_its_location_safe_for_the_next_load() {
        let mut low = Lowering::new(true);
        let evs = [
            alloc(0, 1, 0x1000, 64),
            alloc(0, 2, 0x2000, 64),
            acc(0, true, 0x1000, 8, 1, 2, 8), // a modified pointer (node + 8): unsafe tag
            acc(1, false, 0x1000, 8, 1, 2, 8), // loaded: its bounds loaded now
            acc(1, false, 0x2008, 4, 2, 0, 0), // checked
            acc(2, false, 0x1000, 8, 1, 2, 8), // the tag is safe now: bounds deferred
            acc(2, false, 0x2008, 4, 2, 0, 0), // skipped
        ];
        let work: Vec<Work> = evs.iter().map(|e| low.event(e)).collect();
        assert!(work[4].check && !work[6].check);
        assert_eq!(work[3].bounds_load, Some(bound_addr(0x1000)));
        assert_eq!(work[5].bounds_load, None);
        // Thread 1's and 2's table accesses were checked (pointers to the table not seen),
        // thread 0's went through malloc's pointer.
        let s = low.finish(&Options::default());
        assert_eq!((s.checks.total, s.checks.total - s.checks.skipped_stored), (5, 3));
    }

    #[test]
    fn without_smart_tagging_every_dereference_is_checked_and_every_pointer_load_loads_bounds() {
        let mut low = Lowering::new(false);
        let work: Vec<Work> = program().iter().map(|e| low.event(e)).collect();
        assert_eq!(work.iter().filter(|w| w.check).count(), 8);
        assert_eq!(work[4].bounds_load, Some(bound_addr(0x1000)));
        let s = low.finish(&Options::default());
        assert_eq!((s.bounds_loads, s.bounds_loads_deferred), (1, 0));
    }

    #[test]
    fn a_freed_object_forgets_its_tags_and_a_non_pointer_clears_one() {
        let mut low = Lowering::new(true);
        for e in &program() {
            low.event(e);
        }
        assert_eq!(low.tags.len(), 2);
        low.event(&acc(0, true, 0x1008, 8, 1, 0, 0));
        assert_eq!(low.tags.len(), 1);
        low.event(&Event { sm: 0, ..Event::free(1) });
        assert!(low.tags.is_empty());
        assert!(low.held.iter().all(|h| !h.contains_key(&1)));
    }

    fn trace(events: &[Event]) -> Vec<u8> {
        trace_in_chunks(events, gpusan_trace::Config::default())
    }

    fn trace_in_chunks(events: &[Event], config: gpusan_trace::Config) -> Vec<u8> {
        let mut bytes = Vec::new();
        let mut w = Writer::new(&mut bytes, &Default::default(), config).unwrap();
        for e in events {
            w.push(e).unwrap();
        }
        w.finish().unwrap();
        bytes
    }

    #[test]
    fn a_replay_times_each_thread_and_smart_tagging_saves_cycles() {
        // Two threads read a shared node through pointers they load, many times over.
        let mut events = vec![alloc(0, 1, 0x1000, 64), alloc(0, 2, 0x2000, 64), acc(0, true, 0x1000, 8, 1, 2, 0)];
        for i in 0..200u64 {
            for t in 1..3 {
                events.push(acc(t, false, 0x1000, 8, 1, 2, 0));
                events.push(acc(t, false, 0x2000 + 8 * (i % 8), 4, 2, 0, 0));
            }
        }
        let bytes = trace(&events);
        let run = |smart| {
            let opts = Options { smart, ..Options::default() };
            replay(Design::BCache, Config::mesh(4, 4), &opts, &mut Reader::new(&bytes[..]).unwrap()).unwrap()
        };
        let (plain, smart) = (run(false), run(true));
        assert_eq!(plain.threads, 3);
        assert_eq!(plain.memory_ops, 801);
        assert_eq!(plain.bounds_loads, 400);
        assert_eq!(smart.bounds_loads, 0);
        assert_eq!(smart.bounds_loads_deferred, 400);
        assert!(smart.cycles < plain.cycles, "{} against {}", smart.cycles, plain.cycles);
        assert!(smart.upc > plain.upc);
        // The machine saw the bounds loads and the one store.
        assert_eq!(plain.machine.accesses, 401);
    }

    /// Threads flushed in bursts, as the tracer writes them, one ending early and one starting
    /// late (its clock starts where the replay is when it is read), in chunks of 7 events,
    /// with the replay's queue limit binding and not: several machines replayed from one
    /// reading each count what they count alone.
    #[test]
    fn runs_replayed_together_count_what_each_counts_alone() {
        let mut events = vec![alloc(0, 1, 0x1000, 4096), alloc(0, 2, 0x9000, 64)];
        for burst in 0..12u64 {
            for t in 1..6u32 {
                // Thread 4 ends after burst 5; thread 5 starts at burst 7.
                if t == 4 && burst > 5 || t == 5 && burst < 7 {
                    continue;
                }
                // Bursts of different lengths; thread 1 misses everywhere, the others hit.
                for i in 0..(3 + 4 * u64::from(t)) {
                    let spread = if t == 1 { 64 * (burst * 13 + i) } else { 8 * (i % 4) };
                    events.push(acc(t, i % 3 == 0, 0x1000 + spread % 4096, 8, 1, 2, 8 * (i % 4)));
                    events.push(acc(t, false, 0x9000 + 8 * (i % 8), 4, 2, 0, 0));
                }
            }
            if burst == 5 {
                events.push(Event { kernel: 0, ..Event::warp_done(0, 4, 0, 0) });
            }
            // Real time moves on: a thread that waited catches up.
            for e in events.iter_mut().rev().take(120) {
                e.kernel = burst as u32 * 300;
            }
        }
        let bytes = trace_in_chunks(&events, gpusan_trace::Config { chunk_events: 7 });
        let both = Options::default();
        let runs = [
            (Design::HardBound, both),
            (Design::BCache, both),
            (Design::BCache3d, Options { read_only: false, ..both }),
            (Design::BCache, Options { smart: true, ..both }),
        ];
        let config = Config::mesh(2, 2);
        // As the replay's queue limit, 20 events: it runs on while threads starve.
        for limit in [QUEUED, 20] {
            let read = || Reader::new(&bytes[..]).unwrap();
            let together = replay_queued(&runs, config, &mut read(), limit).unwrap();
            assert_eq!(together.len(), runs.len());
            for (run, got) in runs.iter().zip(&together) {
                let alone = replay_queued(std::slice::from_ref(run), config, &mut read(), limit).unwrap();
                assert_eq!(&alone[0], got, "{run:?}, limit {limit}");
                assert_eq!(got.events as usize, events.len() - 1, "every event but the thread's end");
            }
            assert_ne!(together[0].cycles, together[1].cycles, "the machines differ");
        }
    }
}
