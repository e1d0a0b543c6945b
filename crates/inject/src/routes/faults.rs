//! GPU faults as findings (`gpusan_runtime::fault`): the kernels launched in each context
//! since its last synchronization that succeeded, and, when a stand-in's result says a
//! kernel faulted, one finding per context naming them. A launch records its handle,
//! shape and stream in a ring of 16 per context; the program's stack is captured at each
//! kernel's first launch only (an unwind per launch would cost PyTorch's thousands).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Mutex;

use gpusan_runtime::fault::{fault_name, FaultDetails, FaultLaunch};
use gpusan_runtime::locks;
use gpusan_runtime::per_process::PerProcess;
use gpusan_runtime::registry::{capture_site_outside, SiteId};
use gpusan_runtime::report::Report;

use crate::driver::{current_context, CUresult};
use crate::state::{quietly, state};

const RING: usize = 16;

#[derive(Clone, Copy)]
struct Launch {
    f: usize,
    grid: [u32; 3],
    block: [u32; 3],
    stream: usize,
}

#[derive(Default)]
struct Faults {
    recent: HashMap<u64, VecDeque<Launch>>,
    /// Where each kernel handle was first launched.
    first_site: HashMap<usize, SiteId>,
    /// Contexts whose fault was reported.
    reported: HashSet<u64>,
}

static FAULTS: PerProcess<Mutex<Option<Faults>>> = PerProcess::new(|| Mutex::new(None));

fn with<R>(f: impl FnOnce(&mut Faults) -> R) -> R {
    f(locks::lock(FAULTS.get()).get_or_insert_with(Faults::default))
}

/// A launch of `f` with this shape on `stream`, in the current context.
pub fn launched(f: usize, grid: [u32; 3], block: [u32; 3], stream: usize) {
    let (context, _) = current_context();
    let first = with(|s| {
        let ring = s.recent.entry(context).or_default();
        if ring.len() == RING {
            ring.pop_front();
        }
        ring.push_back(Launch { f, grid, block, stream });
        !s.first_site.contains_key(&f)
    });
    if first {
        let site = capture_site_outside(crate::driver::resolve::own_code());
        with(|s| {
            s.first_site.entry(f).or_insert(site);
        });
    }
}

/// A synchronization of the current context succeeded: what was launched before it ran.
pub fn synced() {
    let (context, _) = current_context();
    with(|s| s.recent.get_mut(&context).map(VecDeque::clear));
}

/// Stand-in `entry` returned `r`, a sticky kernel error: the first time in this context, a
/// finding.
pub fn seen(entry: &'static str, r: CUresult) {
    quietly(|| {
        let Some(error) = fault_name(r) else { return };
        let (context, _) = current_context();
        let Some((launches, last_site)) = with(|s| {
            if !s.reported.insert(context) {
                return None;
            }
            let launches: Vec<Launch> = s.recent.get(&context).map(|r| r.iter().copied().collect()).unwrap_or_default();
            let site = launches.last().and_then(|l| s.first_site.get(&l.f).copied());
            Some((launches, site))
        }) else {
            return;
        };
        let kernels = launches
            .iter()
            .map(|l| FaultLaunch {
                kernel: super::coverage::name_of(l.f),
                grid: l.grid,
                block: l.block,
                stream: l.stream as u64,
            })
            .collect();
        let details = FaultDetails {
            error: error.to_string(),
            code: r,
            api: entry.to_string(),
            kernels,
            launch_stack: last_site.unwrap_or(SiteId::UNKNOWN).into(),
            call_stack: capture_site_outside(crate::driver::resolve::own_code()).into(),
        };
        state().report(Report::fault(details));
    });
}
