//! When kernels see a pool block's free (`families::pools`). The table kernels search is one
//! buffer a context's kernels share, brought up to date in place before launches
//! (`mirror`): a block shown freed there is freed to every kernel still running, those
//! launched before the free included, which may still use it legitimately (the pool freed
//! it in stream order: PyTorch frees a tensor on the host while the kernels that read it are
//! still queued). So the registry keeps a block's free pending (the table shows the block
//! live) until no kernel launched before the free can still run on the free's stream:
//!
//! - a free on the legacy default stream or the per-thread one (handles 0, 1, 2) is shown
//!   at the next upload: the upload is a synchronous copy on the legacy stream, which runs
//!   after all work those streams had (they are blocking streams), and before the kernel
//!   the upload precedes; so that kernel and every later one see the block freed;
//! - a free on any other stream (it may be non-blocking, which the legacy stream does not
//!   wait for) waits for an event gpusan records on that stream at the next launch after
//!   the free: it is shown at the first launch that finds the event complete (polled with
//!   `cuEventQuery`, never waited for: a kernel of that stream may wait on the host, as
//!   NCCL's do), or at a synchronization of the whole context.
//!
//! - a free on no stream known (NVTX's) is shown at a synchronization of the whole context.
//!
//! A kernel launched between the free and its showing sees the block live: a use after
//! free it makes is missed, never a false one reported. While a stream captures, nothing
//! is shown (the upload then runs on gpusan's own stream, ordered after nothing).

use std::sync::Mutex;

use gpusan_runtime::locks;
use gpusan_runtime::per_process::PerProcess;

use crate::capture::relaxed;
use crate::driver::{current_context, real, CUevent, CUstream, CUDA_SUCCESS};
use crate::state::state;

/// `CU_EVENT_DISABLE_TIMING`.
const DISABLE_TIMING: u32 = 2;
/// `CUDA_ERROR_NOT_READY`.
const NOT_READY: crate::driver::CUresult = 600;
/// A free's stream when the pool names none (NVTX's memory API): only a synchronization of
/// the whole context shows it.
pub const UNKNOWN_STREAM: u64 = u64::MAX;

/// Events in flight at most; past it, frees on other streams wait for a later launch.
const MAX_IN_FLIGHT: usize = 64;

/// An event recorded on a stream after some frees: they are shown when it completes.
struct InFlight {
    event: usize,
    context: u64,
    /// Ids of the blocks whose frees wait for it.
    ids: Vec<u64>,
}

#[derive(Default)]
struct Events {
    in_flight: Vec<InFlight>,
    /// Events done with, by context, for reuse.
    idle: Vec<(u64, usize)>,
    /// Ids already waiting for an event.
    waiting: std::collections::HashSet<u64>,
}

static EVENTS: PerProcess<Mutex<Option<Events>>> = PerProcess::new(|| Mutex::new(None));

fn with<R>(f: impl FnOnce(&mut Events) -> R) -> R {
    f(locks::lock(EVENTS.get()).get_or_insert_with(Events::default))
}

/// The legacy default stream (0, `CU_STREAM_LEGACY`) and the per-thread one
/// (`CU_STREAM_PER_THREAD`): work on them is done before a legacy-stream copy runs.
fn ordered_by_upload(stream: u64) -> bool {
    stream <= 2
}

/// Before a launch's upload: shows the frees whose stream's earlier kernels are done (or
/// will be when the upload lands), and records events for the others.
pub fn before_upload() {
    let registry = &state().registry;
    if !registry.has_pending_block_frees() || crate::capture::any() {
        return;
    }
    registry.publish_block_frees(|p| ordered_by_upload(p.stream));
    poll();
    let pending = registry.pending_block_frees();
    let (context, _) = current_context();
    let mut by_stream: std::collections::BTreeMap<u64, Vec<u64>> = Default::default();
    with(|e| {
        for p in pending.iter().filter(|p| p.stream != UNKNOWN_STREAM && !e.waiting.contains(&p.id)) {
            by_stream.entry(p.stream).or_default().push(p.id);
        }
    });
    for (stream, ids) in by_stream {
        if with(|e| e.in_flight.len()) >= MAX_IN_FLIGHT {
            break;
        }
        if let Some(event) = record(context, stream) {
            with(|e| {
                e.waiting.extend(ids.iter().copied());
                e.in_flight.push(InFlight { event, context, ids });
            });
        }
    }
}

/// An event of `context` recorded on `stream` now; `None` when the driver refuses (the
/// stream is another context's: its frees then wait for a synchronization).
fn record(context: u64, stream: u64) -> Option<usize> {
    let event = match with(|e| e.idle.iter().position(|&(c, _)| c == context).map(|i| e.idle.swap_remove(i).1)) {
        Some(event) => event,
        None => {
            let create = real::cuEventCreate()?;
            let mut event: CUevent = std::ptr::null_mut();
            // SAFETY: the driver's function with an out-parameter of ours.
            if relaxed(|| unsafe { create(&mut event, DISABLE_TIMING) }) != CUDA_SUCCESS || event.is_null() {
                return None;
            }
            event as usize
        }
    };
    let rec = real::cuEventRecord()?;
    // SAFETY: gpusan's event on the program's stream.
    if relaxed(|| unsafe { rec(event as CUevent, stream as CUstream) }) == CUDA_SUCCESS {
        Some(event)
    } else {
        with(|e| e.idle.push((context, event)));
        None
    }
}

/// Shows the frees whose event completed (or failed: its context, and its kernels, gone).
fn poll() {
    let Some(query) = real::cuEventQuery() else { return };
    let in_flight = with(|e| std::mem::take(&mut e.in_flight));
    let mut done = Vec::new();
    let mut still = Vec::new();
    for f in in_flight {
        // SAFETY: gpusan's own event.
        let r = unsafe { query(f.event as CUevent) };
        if r == NOT_READY {
            still.push(f);
        } else {
            done.push(f);
        }
    }
    let ids: std::collections::HashSet<u64> = done.iter().flat_map(|f| f.ids.iter().copied()).collect();
    with(|e| {
        e.in_flight.extend(still);
        for f in done {
            f.ids.iter().for_each(|id| {
                e.waiting.remove(id);
            });
            e.idle.push((f.context, f.event));
        }
    });
    if !ids.is_empty() {
        state().registry.publish_block_frees(|p| ids.contains(&p.id));
    }
}

/// After the current context synchronized: its kernels are all done, so every free of its
/// device is shown (at the next upload).
pub fn after_context_sync() {
    let registry = &state().registry;
    if !registry.has_pending_block_frees() {
        return;
    }
    let (_, device) = current_context();
    registry.publish_block_frees(|p| p.device == device || p.device < 0);
}

/// `context` is gone: its events with it (frees waiting for them are shown at the next poll
/// through the failed query's path, here at once).
pub fn context_gone(context: u64) {
    let ids: Vec<u64> = with(|e| {
        e.idle.retain(|&(c, _)| c != context);
        let (gone, kept): (Vec<_>, Vec<_>) =
            std::mem::take(&mut e.in_flight).into_iter().partition(|f| f.context == context);
        e.in_flight = kept;
        let ids: Vec<u64> = gone.into_iter().flat_map(|f| f.ids).collect();
        ids.iter().for_each(|id| {
            e.waiting.remove(id);
        });
        ids
    });
    if !ids.is_empty() {
        state().registry.publish_block_frees(|p| ids.contains(&p.id));
    }
}
