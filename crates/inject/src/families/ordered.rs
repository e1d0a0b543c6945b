//! Stream-ordered frees held in quarantine (`cuMemFreeAsync`, `cudaFreeAsync`): the pool
//! would hand the same address to the next `cuMemAllocAsync`, and a kernel still using the
//! freed pointer would then write into a live allocation, unseen. So the free does not reach
//! the driver at once: gpusan records an event on the program's stream where the free was
//! (the point in the stream after which the memory is free) and keeps the block. When the
//! quarantine lets it go, gpusan's own stream in the block's context waits on that event and
//! frees it there (`cuMemFreeAsync` on the private stream): stream order kept, no host
//! synchronization. A free gpusan cannot hold back (no event) reaches the driver at once,
//! as before.
//!
//! Events come from a small pool per context, made with `CU_EVENT_DISABLE_TIMING`. A free
//! costs one `cuEventRecord`: the frees on one stream share its current event, each
//! recording it again (any later point of the same stream is still after the earlier frees,
//! and a wait takes the event as last recorded when the wait is made), until
//! [`FREES_PER_EVENT`] have, when the stream takes a fresh one; an event goes back to the
//! pool once no held block waits for it. So a held block is given back at most that many
//! frees of its stream later than its own free, and a program freeing thousands of blocks a
//! step makes a few dozen events, not one per free. Sharing is only sound within one
//! stream: a destroyed stream's handle, which the driver may give a new stream, stops
//! sharing at `cuStreamDestroy` ([`stream_gone`]), and `CU_STREAM_PER_THREAD`, one handle
//! for a stream of each thread, shares per thread.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use gpusan_runtime::locks;
use gpusan_runtime::per_process::PerProcess;
use gpusan_runtime::registry::Allocation;

use crate::capture::{own_stream, relaxed};
use crate::driver::{real, CUcontext, CUdeviceptr, CUevent, CUresult, CUstream, CUDA_SUCCESS};

/// `CU_EVENT_DISABLE_TIMING`.
const DISABLE_TIMING: u32 = 2;
/// Frees of one stream that share an event before the stream takes a fresh one.
const FREES_PER_EVENT: u32 = 32;
/// Streams of a context with an event of their own; past this (a program making streams as
/// it goes) they all take fresh ones, and those of the streams gone return to the pool.
const STREAMS_PER_CONTEXT: usize = 64;

/// One of gpusan's events.
struct Event {
    handle: usize,
    /// Held blocks waiting for it, and frees that recorded it, since it was last taken.
    holds: u32,
    records: u32,
    /// Some stream records it at its next free.
    current: bool,
}

/// A stream as events are shared: its handle, and for `CU_STREAM_PER_THREAD` the thread's
/// [`thread_key`] (0 for every other handle).
type StreamKey = (u64, u64);

/// `CU_STREAM_PER_THREAD`.
const PER_THREAD: u64 = 2;

/// A number of this thread's own, never 0.
fn thread_key() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    std::thread_local! { static KEY: u64 = NEXT.fetch_add(1, Ordering::Relaxed); }
    KEY.with(|k| *k)
}

fn stream_key(stream: CUstream) -> StreamKey {
    let handle = stream as u64;
    (handle, if handle == PER_THREAD { thread_key() } else { 0 })
}

/// The events of one context.
#[derive(Default)]
struct Pool {
    events: Vec<Event>,
    idle: Vec<usize>,
    by_stream: HashMap<StreamKey, usize>,
}

impl Pool {
    /// An event for the next free on `stream`, counted as recorded and held; `None` when
    /// the pool has none to give (the caller makes one: [`Pool::add`]).
    fn take(&mut self, stream: StreamKey) -> Option<usize> {
        if let Some(&i) = self.by_stream.get(&stream) {
            let e = &mut self.events[i];
            if e.records < FREES_PER_EVENT {
                e.records += 1;
                e.holds += 1;
                return Some(i);
            }
            self.retire(stream);
        }
        if self.by_stream.len() >= STREAMS_PER_CONTEXT {
            let streams: Vec<StreamKey> = self.by_stream.keys().copied().collect();
            streams.into_iter().for_each(|s| self.retire(s));
        }
        let i = self.idle.pop()?;
        self.events[i] = Event { handle: self.events[i].handle, holds: 1, records: 1, current: true };
        self.by_stream.insert(stream, i);
        Some(i)
    }

    /// A new event, made by the caller, becomes `stream`'s (counted as [`Pool::take`] does).
    fn add(&mut self, stream: StreamKey, handle: usize) -> usize {
        self.retire(stream);
        self.events.push(Event { handle, holds: 1, records: 1, current: true });
        let i = self.events.len() - 1;
        self.by_stream.insert(stream, i);
        i
    }

    /// `stream` records a fresh event from now on.
    fn retire(&mut self, stream: StreamKey) {
        if let Some(i) = self.by_stream.remove(&stream) {
            self.events[i].current = false;
            if self.events[i].holds == 0 {
                self.idle.push(i);
            }
        }
    }

    /// A block waiting for event `i` left.
    fn unhold(&mut self, i: usize) {
        let Some(e) = self.events.get_mut(i) else { return };
        e.holds = e.holds.saturating_sub(1);
        if e.holds == 0 && !e.current {
            self.idle.push(i);
        }
    }
}

/// A block freed in stream order, still in quarantine: its context, and what its release
/// waits for.
struct Hold {
    context: u64,
    wait: Wait,
}

enum Wait {
    /// Event `index` of `context`'s pool (the program's stream's context).
    Event { context: u64, index: usize },
    /// Nothing: the event's context is gone, and its stream's work with it.
    Nothing,
}

/// Held blocks by allocation id (`Allocation::id`: never reused, so an entry the registry
/// displaced can never be taken for a later block at its address).
#[derive(Default)]
struct Held {
    blocks: HashMap<u64, Hold>,
    pools: HashMap<u64, Pool>,
    /// Contexts whose gpusan stream was given frees since the last [`wait_for_releases`].
    released_in: HashSet<u64>,
}

impl Held {
    fn unhold(&mut self, hold: &Hold) {
        if let Wait::Event { context, index } = hold.wait {
            if let Some(pool) = self.pools.get_mut(&context) {
                pool.unhold(index);
            }
        }
    }
}

static HELD: PerProcess<Mutex<Option<Held>>> = PerProcess::new(|| Mutex::new(None));

fn with<R>(f: impl FnOnce(&mut Held) -> R) -> R {
    f(locks::lock(HELD.get()).get_or_insert_with(Held::default))
}

/// The context current on this thread (the one the program's stream is taken in), 0 if none.
fn current() -> u64 {
    let mut ctx: CUcontext = std::ptr::null_mut();
    // SAFETY: the driver's function with an out-parameter of ours.
    real::cuCtxGetCurrent().map_or(0, |get| if unsafe { get(&mut ctx) } == CUDA_SUCCESS { ctx as u64 } else { 0 })
}

/// An event of `context`'s pool for a free on `stream`, made when the pool has none idle
/// (with no lock held: another thread's free must not wait for this driver call).
fn take_event(context: u64, stream: CUstream) -> Option<(usize, CUevent)> {
    let key = stream_key(stream);
    let taken = with(|h| {
        let pool = h.pools.entry(context).or_default();
        pool.take(key).map(|i| (i, pool.events[i].handle as CUevent))
    });
    if taken.is_some() {
        return taken;
    }
    let create = real::cuEventCreate()?;
    let mut event: CUevent = std::ptr::null_mut();
    // SAFETY: the driver's function with an out-parameter of ours.
    if relaxed(|| unsafe { create(&mut event, DISABLE_TIMING) }) != CUDA_SUCCESS || event.is_null() {
        return None;
    }
    Some((with(|h| h.pools.entry(context).or_default().add(key, event as usize)), event))
}

/// Holds block `a`, freed by the program on `stream`: `true` when held (the program's free
/// is then answered by gpusan), `false` when it must reach the driver now.
pub fn hold(a: &Allocation, stream: CUstream) -> bool {
    let (event_context, Some(record)) = (current(), real::cuEventRecord()) else { return false };
    if event_context == 0 {
        return false;
    }
    let Some((index, event)) = take_event(event_context, stream) else { return false };
    // SAFETY: the driver's function; the event is gpusan's, the stream the program's own.
    let recorded = relaxed(|| unsafe { record(event, stream) }) == CUDA_SUCCESS;
    with(|h| {
        let hold = Hold { context: a.context, wait: Wait::Event { context: event_context, index } };
        if recorded {
            h.blocks.insert(a.id, hold);
        } else {
            h.unhold(&hold);
        }
    });
    recorded
}

/// Gives a held block back to its pool, after the point in the program's stream where it
/// was freed, in the block's context. `None` when it is not held here (freed at once, or
/// forgotten); else the driver's answer.
/// `also`: an event of gpusan's the free waits for as well (canary mode's last scan, which
/// may still read the memory: `routes::canary::before_release`).
pub fn release(a: &Allocation, also: Option<usize>) -> Option<CUresult> {
    let (hold, event) = with(|h| {
        let hold = h.blocks.remove(&a.id)?;
        let event = match hold.wait {
            Wait::Event { context, index } => {
                h.pools.get(&context).and_then(|p| p.events.get(index)).map(|e| e.handle as CUevent)
            }
            Wait::Nothing => None,
        };
        Some((hold, event))
    })?;
    let r = real::in_context(a.context, || {
        let stream = own_stream();
        if let (Some(s), Some(e), Some(wait)) = (stream, also, real::cuStreamWaitEvent()) {
            // SAFETY: gpusan's stream and event.
            unsafe { wait(s, e as CUevent, 0) };
        }
        // SAFETY: the driver's functions; the event and the block are the ones held.
        unsafe { free_after(a.base, event, stream) }
    });
    with(|h| {
        h.unhold(&hold);
        h.released_in.insert(a.context);
    });
    Some(r)
}

/// Frees `base` on gpusan's `stream` once it reached `event`. Without a stream of gpusan's
/// (the driver would not make one), the host waits for the event and frees on the legacy
/// stream; without an event (its context is gone, and its stream's work with it), at once.
unsafe fn free_after(base: CUdeviceptr, event: Option<CUevent>, stream: Option<CUstream>) -> CUresult {
    let Some(free) = real::cuMemFreeAsync() else { return CUDA_SUCCESS };
    match (stream, event) {
        (Some(s), Some(e)) if real::cuStreamWaitEvent().is_some_and(|wait| wait(s, e, 0) == CUDA_SUCCESS) => {
            free(base, s)
        }
        (Some(s), None) => free(base, s),
        (_, Some(e)) => match real::cuEventSynchronize().map_or(CUDA_SUCCESS, |sync| sync(e)) {
            CUDA_SUCCESS => free(base, std::ptr::null_mut()),
            r => r,
        },
        (None, None) => free(base, std::ptr::null_mut()),
    }
}

/// After blocks were given back to make room: the frees must have run before a retried
/// allocation can reuse their memory (the pool reuses a block freed on another stream only
/// once that free is done, and gives memory back to the system only at a synchronization).
/// Waits for gpusan's streams only, on this failure path only.
pub fn wait_for_releases() {
    let contexts = with(|h| std::mem::take(&mut h.released_in));
    let Some(sync) = real::cuStreamSynchronize() else { return };
    for context in contexts {
        real::in_context(context, || {
            if let Some(stream) = own_stream() {
                // SAFETY: gpusan's own stream.
                unsafe { sync(stream) };
            }
        });
    }
}

/// The pool handle a held block came from (for `cuMemPoolDestroy`), if the driver says.
pub fn pool_of(base: CUdeviceptr) -> Option<u64> {
    const MEMPOOL_HANDLE: i32 = 17; // CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE
    let get = real::cuPointerGetAttribute()?;
    let mut pool: u64 = 0;
    // SAFETY: an out-parameter of ours, of the attribute's size (a handle).
    let ok = unsafe { get(&mut pool as *mut u64 as *mut std::ffi::c_void, MEMPOOL_HANDLE, base) } == CUDA_SUCCESS;
    ok.then_some(pool)
}

/// Whether gpusan holds block `a` to free it in stream order.
pub fn is_held(a: &Allocation) -> bool {
    with(|h| h.blocks.contains_key(&a.id))
}

/// The program destroys `stream`: its handle may be a new stream's next, which must not
/// record the event earlier frees of this one wait for.
pub fn stream_gone(stream: CUstream) {
    let key = stream_key(stream);
    with(|h| h.pools.values_mut().for_each(|p| p.retire(key)));
}

/// `context` is gone, and with it its events, the blocks held of it, and gpusan's stream.
pub fn context_gone(context: u64) {
    with(|h| {
        h.pools.remove(&context);
        h.released_in.remove(&context);
        let gone: Vec<u64> = h.blocks.iter().filter(|(_, b)| b.context == context).map(|(&id, _)| id).collect();
        for id in gone {
            if let Some(hold) = h.blocks.remove(&id) {
                h.unhold(&hold);
            }
        }
        for hold in h.blocks.values_mut() {
            if matches!(hold.wait, Wait::Event { context: c, .. } if c == context) {
                hold.wait = Wait::Nothing;
            }
        }
    });
}
