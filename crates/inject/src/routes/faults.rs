//! GPU faults as findings (`gpusan_runtime::fault`): the kernels launched in each context
//! that no synchronization has shown to be done, and, when a stand-in's result says a
//! kernel faulted, one finding per context naming them. A launch records its handle,
//! shape and stream (a graph's launch: the executable graph) in a ring of 16 per context,
//! left when its stream or its context is synchronized; the program's stack is captured at
//! each kernel's first launch only (an unwind per launch would cost PyTorch's thousands).
//!
//! At the fault, what instrumented kernels recorded before it is read at once (the error
//! buffer is host memory, readable with the context broken): a program that aborts on the
//! error never reaches the synchronization or the exit where it would be read. At exit, a
//! context whose kernels were never synchronized is asked, without waiting, whether one
//! faulted ([`at_exit`]): a program that never checks still gets its fault reported.

use std::collections::{HashSet, VecDeque};
use std::sync::Mutex;

use gpusan_runtime::fault::fault_name;
use gpusan_runtime::locks;
use gpusan_runtime::per_process::PerProcess;
use gpusan_runtime::registry::SiteId;
use gpusan_runtime::report::{FaultDetails, FaultLaunch, Report};

use crate::driver::{current_context_handle, real, CUresult};
use crate::state::FastMap;
use crate::state::{quietly, state};

const RING: usize = 16;

#[derive(Clone, Copy)]
struct Launch {
    /// A kernel handle, or an executable graph's.
    f: usize,
    graph: bool,
    grid: [u32; 3],
    block: [u32; 3],
    stream: usize,
}

#[derive(Default)]
struct Faults {
    recent: FastMap<u64, VecDeque<Launch>>,
    /// Canary mode: launches since the last clean scan of each context's canaries, each
    /// with its number ([`Faults::launches`] when it was made), the last [`RING`].
    since_scan: FastMap<u64, VecDeque<(u64, Launch)>>,
    /// Launches recorded so far, all contexts.
    launches: u64,
    /// Where each kernel handle was first launched.
    first_site: FastMap<usize, SiteId>,
    /// Contexts whose fault was reported.
    reported: HashSet<u64>,
}

static FAULTS: PerProcess<Mutex<Option<Faults>>> = PerProcess::new(|| Mutex::new(None));

fn with<R>(f: impl FnOnce(&mut Faults) -> R) -> R {
    f(locks::lock(FAULTS.get()).get_or_insert_with(Faults::default))
}

/// A launch of `f` with this shape on `stream`, in the current context.
pub fn launched(f: usize, grid: [u32; 3], block: [u32; 3], stream: usize) {
    record(Launch { f, graph: false, grid, block, stream });
}

/// A launch of executable graph `exec` on `stream`: its kernels are not named one by one.
pub fn graph_launched(exec: usize, stream: usize) {
    record(Launch { f: exec, graph: true, grid: [0; 3], block: [0; 3], stream });
}

fn record(launch: Launch) {
    let context = current_context_handle();
    let f = launch.f;
    let first = with(|s| {
        let ring = s.recent.entry(context).or_default();
        if ring.len() == RING {
            ring.pop_front();
        }
        ring.push_back(launch);
        s.launches += 1;
        let n = s.launches;
        let ring = s.since_scan.entry(context).or_default();
        if ring.len() == RING {
            ring.pop_front();
        }
        ring.push_back((n, launch));
        !s.first_site.contains_key(&f)
    });
    if first {
        let site = crate::pyframes::site(crate::driver::resolve::own_code());
        with(|s| {
            s.first_site.entry(f).or_insert(site);
        });
        if !launch.graph {
            super::coverage::first_launched_at(f, site);
        }
    }
}

/// The number of the last launch recorded (canary mode: a scan launched now covers every
/// launch up to it).
pub fn launch_count() -> u64 {
    with(|s| s.launches)
}

/// A scan of `context`'s canaries launched when [`launch_count`] was `upto` found them
/// clean: those launches did no harm that shows.
pub fn scanned_clean(context: u64, upto: u64) {
    with(|s| s.since_scan.get_mut(&context).map(|r| r.retain(|(n, _)| *n > upto)));
}

/// The launches of `context` since its canaries' last clean scan, oldest first, as a
/// finding names them.
pub fn since_clean_scan(context: u64) -> Vec<FaultLaunch> {
    let launches = with(|s| {
        let ring = s.since_scan.get(&context).map(|r| r.iter().map(|(_, l)| *l).collect::<Vec<_>>());
        let site = |f: usize| s.first_site.get(&f).copied().unwrap_or(SiteId::UNKNOWN);
        ring.unwrap_or_default().into_iter().map(|l| (l, site(l.f))).collect::<Vec<_>>()
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
    with(|s| s.recent.get_mut(&context).map(VecDeque::clear));
}

/// A synchronization of `stream` in the current context succeeded: what was launched into
/// it ran. The legacy stream's handles (null, `CU_STREAM_LEGACY`) name one stream.
pub fn synced_stream(stream: usize) {
    const LEGACY: usize = 1;
    let legacy = |s: usize| s == 0 || s == LEGACY;
    let context = current_context_handle();
    with(|s| {
        if let Some(ring) = s.recent.get_mut(&context) {
            ring.retain(|l| l.stream != stream && !(legacy(l.stream) && legacy(stream)));
        }
    });
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
    let Some(launches) = with(|s| {
        if !s.reported.insert(context) {
            return None;
        }
        let recent = s.recent.get(&context).map(|r| r.iter().copied().collect::<Vec<_>>()).unwrap_or_default();
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
        let pending: Vec<u64> = with(|s| {
            s.recent.iter().filter(|(c, r)| !r.is_empty() && !s.reported.contains(c)).map(|(c, _)| *c).collect()
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
    with(|s| {
        s.recent.remove(&context);
        s.since_scan.remove(&context);
        s.reported.remove(&context);
    });
}
