//! GPU faults as findings (`gpusan_runtime::fault`): the kernels launched in each context
//! that no synchronization has shown to be done, and, when a stand-in's result says a
//! kernel faulted, one finding per context naming them. A launch records its handle,
//! shape, stream and context in a log of the process's last 1,024 launches, written
//! without a lock (a seqlock per record: launches of several threads never wait for each
//! other); a synchronization of a stream or a context moves a mark, and a finding names the
//! context's last 16 launches past its marks. The program's stack is captured at each
//! kernel's first launch only (an unwind per launch would cost PyTorch's thousands).
//!
//! At the fault, what instrumented kernels recorded before it is read at once (the error
//! buffer is host memory, readable with the context broken): a program that aborts on the
//! error never reaches the synchronization or the exit where it would be read. At exit, a
//! context whose kernels were never synchronized is asked, without waiting, whether one
//! faulted ([`at_exit`]): a program that never checks still gets its fault reported.

use std::collections::HashSet;
use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::sync::Mutex;

use gpusan_runtime::fault::fault_name;
use gpusan_runtime::locks;
use gpusan_runtime::per_process::PerProcess;
use gpusan_runtime::registry::SiteId;
use gpusan_runtime::report::{FaultDetails, FaultLaunch, Report};

use super::coverage::Counted;
use crate::driver::{current_context_handle, real, CUresult};
use crate::state::FastMap;
use crate::state::{quietly, state};

/// How many launches a finding names at most (the last ones; a canary finding keeps its
/// own context's first).
const RING: usize = 16;
/// Launches the log keeps (all contexts and threads together).
const LOG: usize = 1024;
/// Set in a log slot's sequence number while its record is being written.
const WRITING: u64 = 1 << 63;

#[derive(Clone, Copy)]
struct Launch {
    /// A kernel handle, or an executable graph's.
    f: usize,
    graph: bool,
    grid: [u32; 3],
    block: [u32; 3],
    stream: usize,
    context: u64,
}

/// One record of the launch log: a seqlock (`seq` is the launch's number, with
/// [`WRITING`] set while the words change), so that readers take only whole records and
/// no writer ever waits.
struct Slot {
    seq: AtomicU64,
    words: [AtomicU64; 6],
}

/// The last [`LOG`] launches of the process, numbered from 1, written without a lock: a
/// launch (PyTorch makes thousands a second, from several threads) must not wait for
/// another thread's. Syncs and scans, much rarer, only move marks ([`Faults`]); readers
/// (a fault's finding, a canary's) filter the log by them.
struct LaunchLog {
    next: AtomicU64,
    slots: Box<[Slot]>,
}

impl LaunchLog {
    fn new() -> LaunchLog {
        let slots = (0..LOG).map(|_| Slot { seq: AtomicU64::new(0), words: Default::default() }).collect();
        LaunchLog { next: AtomicU64::new(0), slots }
    }

    /// Logs `l`, returning its number. Two writers meeting in one slot (launches [`LOG`]
    /// apart, at the same moment) leave the newer record or none: never one made of both.
    fn push(&self, l: &Launch) -> u64 {
        let n = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let slot = &self.slots[n as usize % LOG];
        let seen = slot.seq.load(Ordering::Relaxed);
        if seen & WRITING != 0 || seen >= n {
            return n;
        }
        if slot.seq.compare_exchange(seen, n | WRITING, Ordering::AcqRel, Ordering::Relaxed).is_err() {
            return n;
        }
        fence(Ordering::Release);
        let w = [
            l.f as u64 | if l.graph { 1 << 63 } else { 0 },
            l.stream as u64,
            l.context,
            u64::from(l.grid[0]) | u64::from(l.grid[1]) << 32,
            u64::from(l.grid[2]) | u64::from(l.block[0]) << 32,
            u64::from(l.block[1]) | u64::from(l.block[2]) << 32,
        ];
        for (cell, v) in slot.words.iter().zip(w) {
            cell.store(v, Ordering::Relaxed);
        }
        slot.seq.store(n, Ordering::Release);
        n
    }

    /// The whole records now in the log, by number, oldest first.
    fn snapshot(&self) -> Vec<(u64, Launch)> {
        let mut out = Vec::new();
        for slot in self.slots.iter() {
            let before = slot.seq.load(Ordering::Acquire);
            if before == 0 || before & WRITING != 0 {
                continue;
            }
            let w: Vec<u64> = slot.words.iter().map(|c| c.load(Ordering::Relaxed)).collect();
            fence(Ordering::Acquire);
            if slot.seq.load(Ordering::Relaxed) != before {
                continue;
            }
            let low = |v: u64| v as u32;
            let high = |v: u64| (v >> 32) as u32;
            out.push((
                before,
                Launch {
                    f: (w[0] & !(1 << 63)) as usize,
                    graph: w[0] >> 63 != 0,
                    stream: w[1] as usize,
                    context: w[2],
                    grid: [low(w[3]), high(w[3]), low(w[4])],
                    block: [high(w[4]), low(w[5]), high(w[5])],
                },
            ));
        }
        out.sort_by_key(|(n, _)| *n);
        out
    }

    fn count(&self) -> u64 {
        self.next.load(Ordering::Relaxed)
    }
}

static LAUNCH_LOG: PerProcess<LaunchLog> = PerProcess::new(LaunchLog::new);

/// The legacy stream's handles (null, `CU_STREAM_LEGACY`) name one stream.
fn stream_key(stream: usize) -> usize {
    crate::driver::legacy_as_one(stream as u64) as usize
}

/// What the log's readers need besides it: launch numbers up to which each context, each
/// stream and each context's canaries are known done or clean.
#[derive(Default)]
struct Faults {
    /// Every launch of the context numbered up to this is known done (a context
    /// synchronization, or the context made anew under the same handle).
    synced: FastMap<u64, u64>,
    /// Likewise for a stream of a context.
    stream_synced: FastMap<(u64, usize), u64>,
    /// Canary mode: launches up to this number did no harm that shows (a clean scan).
    scanned: FastMap<u64, u64>,
    /// Where each kernel handle was first launched.
    first_site: FastMap<usize, SiteId>,
    /// Contexts whose fault was reported.
    reported: HashSet<u64>,
}

impl Faults {
    /// The launches of `context` in the log not known done, the last [`RING`], oldest
    /// first.
    fn pending(&self, log: &[(u64, Launch)], context: u64) -> Vec<Launch> {
        let synced = self.synced.get(&context).copied().unwrap_or(0);
        let mut found: Vec<Launch> = log
            .iter()
            .filter(|(n, l)| {
                l.context == context
                    && *n > synced
                    && *n > self.stream_synced.get(&(context, stream_key(l.stream))).copied().unwrap_or(0)
            })
            .map(|(_, l)| *l)
            .collect();
        found.drain(..found.len().saturating_sub(RING));
        found
    }

    /// Canary mode: the launches since `context`'s canaries' last clean scan, oldest first
    /// (done or not), at most [`RING`]. Another context's count too: its kernel may have
    /// written here through peer access (another GPU's); where there are too many, the
    /// oldest of other contexts go first.
    fn since_scan(&self, log: &[(u64, Launch)], context: u64) -> Vec<Launch> {
        let clean = self.scanned.get(&context).copied().unwrap_or(0);
        let found: Vec<Launch> = log.iter().filter(|(n, _)| *n > clean).map(|(_, l)| *l).collect();
        let own = found.iter().filter(|l| l.context == context).count();
        let mut others_over = (found.len() - own).saturating_sub(RING.saturating_sub(own));
        let mut own_over = own.saturating_sub(RING);
        found
            .into_iter()
            .filter(|l| {
                let over = if l.context == context { &mut own_over } else { &mut others_over };
                let drop = *over > 0;
                *over = over.saturating_sub(1);
                !drop
            })
            .collect()
    }
}

static FAULTS: PerProcess<Mutex<Option<Faults>>> = PerProcess::new(|| Mutex::new(None));

fn with<R>(f: impl FnOnce(&mut Faults) -> R) -> R {
    f(locks::lock(FAULTS.get()).get_or_insert_with(Faults::default))
}

/// A launch of `f` with this shape on `stream`, in the current context; `counted`: what
/// the coverage knows of `f`'s launches.
pub fn launched(f: usize, grid: [u32; 3], block: [u32; 3], stream: usize, counted: Counted) {
    record(Launch { f, graph: false, grid, block, stream, context: current_context_handle() }, counted);
}

/// A launch of executable graph `exec` on `stream`: its kernels are not named one by one.
pub fn graph_launched(exec: usize, stream: usize) {
    let launch =
        Launch { f: exec, graph: true, grid: [0; 3], block: [0; 3], stream, context: current_context_handle() };
    record(launch, Counted::Not);
}

fn record(launch: Launch, counted: Counted) {
    LAUNCH_LOG.get().push(&launch);
    // The stack at a handle's first launch: the lock only at the coverage's first count of
    // it, or, where it did not count it, at a thread's first launch of it.
    let mut first = false;
    let mut first_here = || {
        with(|s| {
            first = !s.first_site.contains_key(&launch.f);
            if first {
                s.first_site.insert(launch.f, SiteId::UNKNOWN);
            }
        })
    };
    match counted {
        Counted::Again => {}
        Counted::First => first_here(),
        Counted::Not => {
            static SEEN: AtomicU64 = AtomicU64::new(0);
            super::cells::Cells::get(SITED | launch.f, || {
                first_here();
                &SEEN
            });
        }
    }
    if first {
        let site = crate::pyframes::site(crate::driver::resolve::own_code());
        with(|s| {
            s.first_site.insert(launch.f, site);
        });
        if !launch.graph {
            // Named now, while the handle is the kernel launched: a finding may name it
            // after its module is gone (the coverage named it already where it counts).
            super::coverage::name_unknown(&[launch.f]);
            super::coverage::first_launched_at(launch.f, site);
        }
    }
}

/// Keys of the thread caches of first sites (`cells`): apart from coverage's handles.
const SITED: usize = 1 << 62;

/// The number of the last launch recorded (canary mode: a scan launched now covers every
/// launch up to it).
pub fn launch_count() -> u64 {
    LAUNCH_LOG.get().count()
}

/// A scan of `context`'s canaries launched when [`launch_count`] was `upto` found them
/// clean: those launches did no harm that shows.
pub fn scanned_clean(context: u64, upto: u64) {
    with(|s| {
        let mark = s.scanned.entry(context).or_default();
        *mark = (*mark).max(upto);
    });
}

/// The launches since `context`'s canaries' last clean scan, in every context (`since_scan`),
/// oldest first, as a finding names them.
pub fn since_clean_scan(context: u64) -> Vec<FaultLaunch> {
    let log = LAUNCH_LOG.get().snapshot();
    let launches = with(|s| {
        let site = |f: usize| s.first_site.get(&f).copied().unwrap_or(SiteId::UNKNOWN);
        s.since_scan(&log, context).into_iter().map(|l| (l, site(l.f))).collect::<Vec<_>>()
    });
    launches.iter().map(|(l, site)| fault_launch(l, *site)).collect()
}

fn fault_launch(l: &Launch, site: SiteId) -> FaultLaunch {
    FaultLaunch {
        kernel: if l.graph { String::new() } else { super::coverage::name_of(l.f) },
        graph: l.graph.then_some(l.f as u64),
        grid: l.grid,
        block: l.block,
        stream: l.stream as u64,
        launch_stack: site.into(),
    }
}

/// A synchronization of the current context succeeded: what was launched before it ran.
pub fn synced_context() {
    let context = current_context_handle();
    let upto = launch_count();
    with(|s| s.synced.insert(context, upto));
}

/// A synchronization of `stream` in the current context succeeded: what was launched into
/// it ran.
pub fn synced_stream(stream: usize) {
    let context = current_context_handle();
    let upto = launch_count();
    with(|s| s.stream_synced.insert((context, stream_key(stream)), upto));
}

/// Stand-in `entry` returned `r`, a sticky kernel error: the first time in this context, a
/// finding.
pub fn seen(entry: &str, r: CUresult) {
    quietly(|| {
        let Some(error) = fault_name(r) else { return };
        let context = current_context_handle();
        // Every later call of the context fails alike: only the first costs an unwind.
        if with(|s| s.reported.contains(&context)) {
            return;
        }
        let call_stack = crate::pyframes::site(crate::driver::resolve::own_code());
        report(context, entry, r, error, call_stack);
    });
}

/// The finding for a fault in `context` learnt from `api`, unless one was made already.
fn report(context: u64, api: &str, r: CUresult, error: &str, call_stack: SiteId) {
    let log = LAUNCH_LOG.get().snapshot();
    let Some(launches) = with(|s| {
        if !s.reported.insert(context) {
            return None;
        }
        let recent = s.pending(&log, context);
        let site = |f: usize| s.first_site.get(&f).copied().unwrap_or(SiteId::UNKNOWN);
        Some(recent.into_iter().map(|l| (l, site(l.f))).collect::<Vec<_>>())
    }) else {
        return;
    };
    // What the kernels recorded before the fault (the checked one that explains it, often):
    // the error buffer is host memory, still mapped, and reads that cannot fault are used
    // in case a context went away behind gpusan's back.
    super::mirror::drain_at_exit();
    let kernels: Vec<FaultLaunch> = launches.iter().map(|(l, site)| fault_launch(l, *site)).collect();
    let details = FaultDetails {
        error: error.to_string(),
        code: r,
        api: api.to_string(),
        launch_stack: kernels.last().map(|k| k.launch_stack.clone()).unwrap_or_default(),
        kernels,
        call_stack: call_stack.into(),
    };
    state().report(Report::fault(details));
}

/// At exit, before CUDA tears its contexts down: a context whose last launches were never
/// synchronized, and whose fault (if any) no call returned, is asked whether a kernel
/// faulted, with a query that does not wait (a kernel still running is left alone).
pub fn at_exit() {
    quietly(|| {
        let log = LAUNCH_LOG.get().snapshot();
        let pending: Vec<u64> = with(|s| {
            let mut contexts: Vec<u64> = log.iter().map(|(_, l)| l.context).collect();
            contexts.sort_unstable();
            contexts.dedup();
            contexts.retain(|&c| !s.reported.contains(&c) && !s.pending(&log, c).is_empty());
            contexts
        });
        let Some(query) = real::cuStreamQuery() else { return };
        for context in pending {
            // SAFETY: the driver's function on the context's legacy stream (null).
            let r = real::in_context(context, || unsafe { query(std::ptr::null_mut()) });
            if let Some(error) = fault_name(r) {
                report(
                    context,
                    "cuStreamQuery (gpusan's, at exit: no call gpusan saw had returned it)",
                    r,
                    error,
                    SiteId::UNKNOWN,
                );
            }
        }
    });
}

/// Contexts whose fault was reported: their memory can no longer be freed.
pub fn faulted_contexts() -> HashSet<u64> {
    with(|s| s.reported.clone())
}

/// `context` was destroyed: a new one the driver gives the same handle starts clean.
pub fn context_gone(context: u64) {
    // A new context given the same handle starts clean: what the log holds of this one is
    // done with.
    let upto = launch_count();
    with(|s| {
        s.synced.insert(context, upto);
        s.scanned.insert(context, upto);
        s.stream_synced.retain(|(c, _), _| *c != context);
        s.reported.remove(&context);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch(f: usize, context: u64, stream: usize) -> Launch {
        // The shape repeats the handle, so that a record made of two launches shows.
        let x = f as u32;
        Launch { f, graph: false, grid: [x, x ^ 1, x ^ 2], block: [x ^ 3, x ^ 4, x ^ 5], stream, context }
    }

    fn whole(l: &Launch) -> bool {
        let x = l.f as u32;
        l.grid == [x, x ^ 1, x ^ 2] && l.block == [x ^ 3, x ^ 4, x ^ 5] && l.stream == l.f >> 20
    }

    #[test]
    fn threads_logging_at_once_leave_only_whole_records_numbered_in_order() {
        let log = LaunchLog::new();
        std::thread::scope(|s| {
            for t in 0..4usize {
                let log = &log;
                s.spawn(move || {
                    for i in 0..20_000usize {
                        let f = (t << 20) | (t << 16) | i;
                        log.push(&launch(f, 0x1000, f >> 20));
                    }
                });
            }
        });
        assert_eq!(log.count(), 80_000);
        let records = log.snapshot();
        assert!(records.len() > LOG / 2, "the last launches are kept: {}", records.len());
        assert!(records.iter().all(|(_, l)| whole(l)), "a torn record");
        assert!(records.windows(2).all(|w| w[0].0 < w[1].0));
        // A slot keeps the newer record or, where the newer writer met an older one still
        // writing there, the older: a lap behind, seldom more (a full test run here once
        // left one such record).
        let recent = records.iter().filter(|(n, _)| *n > 80_000 - LOG as u64).count();
        assert!(recent > LOG / 2, "{recent} of the last launches");
        assert!(records.iter().all(|(n, _)| *n > 80_000 - 3 * LOG as u64));
    }

    #[test]
    fn a_finding_names_the_contexts_last_launches_past_its_synchronizations() {
        let log = LaunchLog::new();
        let mut faults = Faults::default();
        for i in 1..=40 {
            log.push(&launch(i, if i % 2 == 0 { 0x1000 } else { 0x2000 }, i % 3));
        }
        let pending = |faults: &Faults| {
            let records = log.snapshot();
            faults.pending(&records, 0x1000).iter().map(|l| l.f).collect::<Vec<_>>()
        };
        // Even launches are context 0x1000's: its last 16, oldest first.
        assert_eq!(pending(&faults), (10..=40).step_by(2).collect::<Vec<_>>());
        // A synchronization of stream 2 leaves its launches out.
        faults.stream_synced.insert((0x1000, stream_key(2)), 40);
        assert!(pending(&faults).iter().all(|f| f % 3 != 2));
        faults.synced.insert(0x1000, 30);
        assert_eq!(pending(&faults), vec![32, 34, 36, 38, 40].into_iter().filter(|f| f % 3 != 2).collect::<Vec<_>>());
        // Since 0x2000's clean scan: its launches and 0x1000's (a peer's kernel may write
        // into its memory).
        faults.scanned.insert(0x2000, 35);
        let records = log.snapshot();
        let since = |faults: &Faults| faults.since_scan(&records, 0x2000).iter().map(|l| l.f).collect::<Vec<_>>();
        assert_eq!(since(&faults), vec![36, 37, 38, 39, 40]);
        // More than 16: the other context's oldest go first, every one of its own is kept.
        faults.scanned.insert(0x2000, 10);
        let kept = since(&faults);
        assert_eq!(kept.len(), RING);
        assert!((11..=40).step_by(2).all(|f| kept.contains(&f)), "{kept:?}");
        assert_eq!(kept.iter().filter(|f| *f % 2 == 0).copied().collect::<Vec<_>>(), vec![40]);
    }
}
