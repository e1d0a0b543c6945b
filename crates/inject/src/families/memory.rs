//! Allocations and frees: device, pitched, stream-ordered, pool, managed and pinned host
//! memory, host registrations and virtual memory mappings. Every allocation enters the
//! registry; every free is judged, and freed memory is held in quarantine (really freed
//! later) so that a use after free finds it still allocated and marked freed.
//!
//! Every handler calls the real function exactly as the program asked, except a second
//! free of quarantined memory, which the driver would refuse and gpusan answers the same
//! way, and device allocations the binary route pads with a red zone (`routes::redzones`:
//! asked longer, registered at the size asked, made as asked when refused padded; the
//! driver's answers about them, `cuMemGetInfo` and `cuMemGetAddressRange`, given as
//! without it). gpusan's own work runs under `quietly`: if it ever panics, the call still
//! goes through untouched.

use std::ffi::c_void;

use gpusan_runtime::checks::check_free;
use gpusan_runtime::locks;
use gpusan_runtime::per_process::PerProcess;
use gpusan_runtime::registry::{AllocKind, Allocation, FreeApi, FreeOutcome, Lookup};

use super::graphs;
use super::judge::{record_alloc, record_padded_alloc, site};
use crate::driver::hook::hooks;
use crate::driver::{
    real, CUdeviceptr, CUmemHandle, CUmemoryPool, CUresult, CUstream, CUDA_ERROR_INVALID_VALUE,
    CUDA_ERROR_OUT_OF_MEMORY, CUDA_SUCCESS,
};
use crate::state::{quietly, state};

hooks! {
    fn cuMemAlloc_v2(dptr: *mut CUdeviceptr, size: usize) => |real| mem_alloc(real, dptr, size);
    fn cuMemAllocPitch_v2(dptr: *mut CUdeviceptr, pitch: *mut usize, width: usize, height: usize, elem: u32)
        => |real| mem_alloc_pitch(real, dptr, pitch, width, height, elem);
    fn cuMemAllocAsync(dptr: *mut CUdeviceptr, size: usize, stream: CUstream)
        => |real| mem_alloc_async(real, dptr, size, stream, stream);
    fn cuMemAllocAsync_ptsz(dptr: *mut CUdeviceptr, size: usize, stream: CUstream)
        => |real| mem_alloc_async(real, dptr, size, stream, per_thread(stream));
    fn cuMemAllocFromPoolAsync(dptr: *mut CUdeviceptr, size: usize, pool: CUmemoryPool, stream: CUstream)
        => |real| mem_alloc_from_pool(real, dptr, size, pool, stream, stream);
    fn cuMemAllocFromPoolAsync_ptsz(dptr: *mut CUdeviceptr, size: usize, pool: CUmemoryPool, stream: CUstream)
        => |real| mem_alloc_from_pool(real, dptr, size, pool, stream, per_thread(stream));
    fn cuMemAllocManaged(dptr: *mut CUdeviceptr, size: usize, flags: u32)
        => |real| mem_alloc_managed(real, dptr, size, flags);
    fn cuMemHostAlloc(pp: *mut *mut c_void, size: usize, flags: u32) => |real| mem_host_alloc(real, pp, size, flags);
    fn cuMemAllocHost_v2(pp: *mut *mut c_void, size: usize) => |real| mem_alloc_host(real, pp, size);
    fn cuMemFree_v2(dptr: CUdeviceptr) => |real| mem_free(real, dptr);
    fn cuMemFreeAsync(dptr: CUdeviceptr, stream: CUstream) => |real| mem_free_async(real, dptr, stream, stream);
    fn cuMemFreeAsync_ptsz(dptr: CUdeviceptr, stream: CUstream) => |real| mem_free_async(real, dptr, stream, per_thread(stream));
    fn cuMemPoolDestroy(pool: CUmemoryPool) => |real| mem_pool_destroy(real, pool);
    fn cuMemFreeHost(p: *mut c_void) => |real| mem_free_host(real, p);
    fn cuMemHostRegister_v2(p: *mut c_void, size: usize, flags: u32) => |real| mem_host_register(real, p, size, flags);
    fn cuMemHostUnregister(p: *mut c_void) => |real| mem_host_unregister(real, p);
    fn cuMemMap(ptr: CUdeviceptr, size: usize, offset: usize, handle: CUmemHandle, flags: u64)
        => |real| mem_map(real, ptr, size, offset, handle, flags);
    fn cuMemUnmap(ptr: CUdeviceptr, size: usize) => |real| mem_unmap(real, ptr, size);
    fn cuMemGetInfo_v2(free: *mut usize, total: *mut usize) => |real| mem_get_info(real, free, total);
    fn cuMemGetAddressRange_v2(base: *mut CUdeviceptr, size: *mut usize, dptr: CUdeviceptr)
        => |real| mem_get_address_range(real, base, size, dptr);
}

/// `CU_STREAM_PER_THREAD`: what the null stream means to a `_ptsz` function. gpusan's own
/// calls about the program's stream (its capture, the event at a free) name it so: on the
/// legacy stream they would ask about, and wait for, another stream.
fn per_thread(stream: CUstream) -> CUstream {
    if stream.is_null() {
        2 as CUstream
    } else {
        stream
    }
}

// ---- quarantine ------------------------------------------------------------------------

/// Allocations that left quarantine during a capture: freed when the last capture ends
/// (`cuMemFree` is one of the calls a capture prohibits).
static RELEASE_AFTER_CAPTURE: PerProcess<std::sync::Mutex<Vec<Allocation>>> = PerProcess::new(Default::default);

/// Really frees an allocation leaving quarantine.
fn release(a: &Allocation) {
    if crate::capture::any() {
        locks::lock(RELEASE_AFTER_CAPTURE.get()).push(*a);
        return;
    }
    // Canary mode: no scan may read the memory once the driver has it (a stream-ordered
    // free waits on the GPU for the guard's last scan).
    let after = crate::routes::canary::active()
        .then(|| crate::routes::canary::before_release(a, super::ordered::is_held(a)))
        .flatten();
    // Freed in stream order (`cuMemFreeAsync`, whatever allocated it): after the program's
    // free, on gpusan's stream. Else as the program freed it.
    let r = super::ordered::release(a, after).or_else(|| {
        real::in_context(a.context, || match a.kind {
            // Only these kinds are held back at their free (`Release::Deferred`); memory of a
            // pool may be freed by `cuMemFree` too.
            AllocKind::Device
            | AllocKind::Pitched { .. }
            | AllocKind::Managed
            | AllocKind::Other
            | AllocKind::Async { .. }
            | AllocKind::Pool { .. } => real::cuMemFree_v2().map(|free| unsafe { free(a.base) }),
            AllocKind::HostPinned { .. } => real::cuMemFreeHost().map(|free| unsafe { free(a.base as *mut c_void) }),
            // Released when the program freed them (unregistrations, unmaps) or never by a
            // free call (module variables, device heap, arrays, graphs).
            _ => None,
        })
    });
    if let Some(r) = r.filter(|&r| r != CUDA_SUCCESS) {
        let mut failed = locks::lock(RELEASE_FAILED.get());
        failed.0 += 1;
        if failed.1.is_none() {
            failed.1 = Some(format!("{:#x} ({} bytes, context {:#x}): error {r}", a.base, a.size, a.context));
        }
    }
}

/// Held-back frees the driver refused when gpusan gave the memory back: how many, and the
/// first. Never silent: the report says so (`released_with_errors`).
static RELEASE_FAILED: PerProcess<std::sync::Mutex<(u64, Option<String>)>> = PerProcess::new(Default::default);

/// A note for the report if giving held-back memory back ever failed.
pub fn release_failures() -> Option<String> {
    let failed = locks::lock(RELEASE_FAILED.get());
    failed.1.as_ref().map(|first| {
        format!(
            "{} freed allocation(s) held back in quarantine could not be given back to the driver (first: {first})",
            failed.0
        )
    })
}

/// The program destroyed `context`: the driver took its memory with it, so what gpusan
/// holds back of it is forgotten, never freed again.
pub fn context_gone(context: u64) {
    super::ordered::context_gone(context);
    let st = state();
    for a in st.registry.snapshot() {
        if a.context == context && !a.is_live() {
            st.registry.forget(a.base);
        }
    }
    locks::lock(RELEASE_AFTER_CAPTURE.get()).retain(|a| a.context != context);
}

/// The last capture of the process ended: what was held back for it can be done now.
pub fn after_captures() {
    let held = std::mem::take(&mut *locks::lock(RELEASE_AFTER_CAPTURE.get()));
    held.iter().for_each(release);
}

/// What the driver's `cuMemFree` does first: wait for the device. Its result is what the
/// free returns when it fails (an earlier launch's sticky error), as the driver's does.
fn synchronize() -> CUresult {
    match real::cuCtxSynchronize() {
        Some(f) => unsafe { f() },
        None => CUDA_SUCCESS,
    }
}

/// Gives every quarantined allocation back, so a failed allocation can be retried.
fn drain_quarantine() -> bool {
    let evicted = state().registry.evict_quarantine(0);
    evicted.iter().for_each(release);
    // Stream-ordered frees are only queued on gpusan's streams: done before the retry.
    super::ordered::wait_for_releases();
    !evicted.is_empty()
}

/// Allocates through `alloc`; out of memory with memory in quarantine, drains it and
/// tries once more: the quarantine must never make a program fail that would not.
fn alloc_with_retry(mut alloc: impl FnMut() -> CUresult) -> CUresult {
    let r = alloc();
    if r == CUDA_ERROR_OUT_OF_MEMORY && quietly(drain_quarantine).unwrap_or(false) {
        return alloc();
    }
    r
}

/// The common path of every free. `Deferred` frees are held in quarantine instead of
/// reaching the driver; `Immediate` ones (graph memory, unregistrations, unmaps) reach it
/// now and are only remembered as freed; `Ordered` ones are held after an event.
pub(super) enum Release {
    Deferred,
    Immediate,
    /// Stream-ordered: held back after an event on this stream (`ordered`).
    Ordered(CUstream),
}

pub(super) fn free_common(
    api: FreeApi,
    name: &'static str,
    ptr: u64,
    release_now: Release,
    real: impl FnOnce() -> CUresult,
) -> CUresult {
    let Some(outcome) = quietly(|| {
        let s = site();
        let st = state();
        let freed = st.registry.free(ptr, api, s);
        if let Some(f) = check_free(&st.registry, name, ptr, &freed.outcome) {
            st.finding(&f, s);
        }
        if let (FreeOutcome::Freed(a), true) = (&freed.outcome, crate::routes::canary::active()) {
            crate::routes::canary::freed(a.base, a.context);
            // Given back at once (no quarantine, graph memory, an unregistration): checked
            // and disarmed first, as at a release.
            if freed.evicted.iter().any(|e| e.base == ptr) || matches!(release_now, Release::Immediate) {
                crate::routes::canary::before_release(a, false);
            }
        }
        freed.evicted.iter().filter(|a| a.base != ptr).for_each(release);
        (freed.outcome, freed.evicted.iter().any(|a| a.base == ptr))
    }) else {
        return real();
    };
    match (outcome, release_now) {
        ((FreeOutcome::Freed(_), _), Release::Immediate) => real(),
        ((FreeOutcome::Freed(a), false), Release::Ordered(stream)) => {
            if quietly(|| super::ordered::hold(&a, stream)).unwrap_or(false) {
                CUDA_SUCCESS
            } else {
                // Not held: the pool may hand the address out at once, and gpusan must not free
                // it again when it would have left quarantine.
                quietly(|| state().registry.forget(a.base));
                real()
            }
        }
        ((FreeOutcome::Freed(_), true), Release::Ordered(_)) => real(),
        // A zero quarantine budget evicts the allocation at once: free it now.
        ((FreeOutcome::Freed(_), true), Release::Deferred) => real(),
        ((FreeOutcome::Freed(_), false), Release::Deferred) => {
            // The driver's free synchronizes the device and programs rely on it; holding
            // the memory back must not take that away. It is also where kernels' error
            // records become final. Not while a stream captures: synchronizing the context
            // then would invalidate the capture.
            if !quietly(crate::capture::any).unwrap_or(true) {
                let r = synchronize();
                quietly(crate::routes::mirror::drain);
                return r;
            }
            CUDA_SUCCESS
        }
        // The program freed this already; the driver would refuse the second free too.
        ((FreeOutcome::DoubleFree { .. }, _), _) => CUDA_ERROR_INVALID_VALUE,
        _ => real(),
    }
}

// ---- allocations -------------------------------------------------------------------

unsafe fn mem_alloc(
    real: unsafe extern "C" fn(*mut CUdeviceptr, usize) -> CUresult,
    dptr: *mut CUdeviceptr,
    size: usize,
) -> CUresult {
    let (r, redzone) = alloc_padded(size, redzone_for(size), |bytes| real(dptr, bytes));
    if r == CUDA_SUCCESS && !dptr.is_null() {
        quietly(|| record_padded_alloc(*dptr, size as u64, AllocKind::Device, site(), redzone));
    }
    r
}

unsafe fn mem_alloc_pitch(
    real: unsafe extern "C" fn(*mut CUdeviceptr, *mut usize, usize, usize, u32) -> CUresult,
    dptr: *mut CUdeviceptr,
    pitch: *mut usize,
    width: usize,
    height: usize,
    elem: u32,
) -> CUresult {
    // A red zone of whole rows: the pitch is the driver's choice, the rows the program's.
    let bytes = width.saturating_mul(height);
    let rows = crate::routes::redzones::pitched_rows(width as u64, redzone_for(bytes)) as usize;
    let (r, extra) = alloc_padded(height, rows as u64, |h| real(dptr, pitch, width, h, elem));
    if r == CUDA_SUCCESS && !dptr.is_null() && !pitch.is_null() {
        let (p, w, h) = (*pitch as u64, width as u64, height as u64);
        let kind = AllocKind::Pitched { pitch: p, width_bytes: w, height: h };
        quietly(|| record_padded_alloc(*dptr, p * h, kind, site(), p * extra));
    }
    r
}

/// `ours` is the program's `stream` as gpusan's own calls name it ([`per_thread`]).
unsafe fn mem_alloc_async(
    real: unsafe extern "C" fn(*mut CUdeviceptr, usize, CUstream) -> CUresult,
    dptr: *mut CUdeviceptr,
    size: usize,
    stream: CUstream,
    ours: CUstream,
) -> CUresult {
    // Graph memory (under capture) is registered again at each launch of its graph: no red zone.
    let capturing = quietly(|| graphs::capturing(ours).is_some()).unwrap_or(true);
    let (r, redzone) = alloc_padded(size, if capturing { 0 } else { redzone_for(size) }, |n| real(dptr, n, stream));
    if r == CUDA_SUCCESS && !dptr.is_null() {
        quietly(|| match graphs::capturing(ours) {
            // Under stream capture the call adds a memory allocation node: the address is
            // the graph's, valid at every launch of it.
            Some(graph) => graphs::graph_alloc(graph, *dptr, size as u64, site()),
            None => {
                let kind = AllocKind::Async { stream: stream as u64 };
                record_padded_alloc(*dptr, size as u64, kind, site(), redzone)
            }
        });
    }
    r
}

unsafe fn mem_alloc_from_pool(
    real: unsafe extern "C" fn(*mut CUdeviceptr, usize, CUmemoryPool, CUstream) -> CUresult,
    dptr: *mut CUdeviceptr,
    size: usize,
    pool: CUmemoryPool,
    stream: CUstream,
    ours: CUstream,
) -> CUresult {
    let capturing = quietly(|| graphs::capturing(ours).is_some()).unwrap_or(true);
    let redzone = if capturing { 0 } else { redzone_for(size) };
    let (r, redzone) = alloc_padded(size, redzone, |n| real(dptr, n, pool, stream));
    if r == CUDA_SUCCESS && !dptr.is_null() {
        let kind = AllocKind::Pool { pool: pool as u64, stream: stream as u64 };
        quietly(|| match graphs::capturing(ours) {
            // Under capture, an allocation node like `cuMemAllocAsync`'s: graph memory, which
            // a free outside the graph must give back to the driver at once.
            Some(graph) => graphs::graph_alloc(graph, *dptr, size as u64, site()),
            None => record_padded_alloc(*dptr, size as u64, kind, site(), redzone),
        });
    }
    r
}

unsafe fn mem_alloc_managed(
    real: unsafe extern "C" fn(*mut CUdeviceptr, usize, u32) -> CUresult,
    dptr: *mut CUdeviceptr,
    size: usize,
    flags: u32,
) -> CUresult {
    let (r, redzone) = alloc_padded(size, redzone_for(size), |n| real(dptr, n, flags));
    if r == CUDA_SUCCESS && !dptr.is_null() {
        quietly(|| record_padded_alloc(*dptr, size as u64, AllocKind::Managed, site(), redzone));
    }
    r
}

unsafe fn mem_host_alloc(
    real: unsafe extern "C" fn(*mut *mut c_void, usize, u32) -> CUresult,
    pp: *mut *mut c_void,
    size: usize,
    flags: u32,
) -> CUresult {
    const DEVICEMAP: u32 = 0x02;
    let r = alloc_with_retry(|| real(pp, size, flags));
    if r == CUDA_SUCCESS && !pp.is_null() {
        let kind = AllocKind::HostPinned { mapped: flags & DEVICEMAP != 0 };
        quietly(|| record_alloc(*pp as u64, size as u64, kind, site()));
    }
    r
}

unsafe fn mem_alloc_host(
    real: unsafe extern "C" fn(*mut *mut c_void, usize) -> CUresult,
    pp: *mut *mut c_void,
    size: usize,
) -> CUresult {
    let r = alloc_with_retry(|| real(pp, size));
    if r == CUDA_SUCCESS && !pp.is_null() {
        quietly(|| record_alloc(*pp as u64, size as u64, AllocKind::HostPinned { mapped: false }, site()));
    }
    r
}

/// Allocates `size` bytes through `alloc` (given the bytes to ask for), padded with the
/// binary route's red zone where one applies (`routes::redzones`): the result, and the red
/// zone the allocation got. Refused padded, it is made as asked (as [`alloc_with_retry`]
/// does), so a red zone never makes a program fail that would not.
fn alloc_padded(size: usize, redzone: u64, mut alloc: impl FnMut(usize) -> CUresult) -> (CUresult, u64) {
    if let Some(padded) = usize::try_from(redzone).ok().filter(|&z| z > 0).and_then(|z| size.checked_add(z)) {
        if alloc(padded) == CUDA_SUCCESS {
            return (CUDA_SUCCESS, redzone);
        }
    }
    (alloc_with_retry(|| alloc(size)), 0)
}

/// The red zone for a request of `size` bytes in this run (none if gpusan's work fails).
fn redzone_for(size: usize) -> u64 {
    quietly(|| crate::routes::redzones::for_request(size as u64)).unwrap_or(0)
}

/// `cuMemGetInfo`: the red zones gpusan holds on the current device count as free, as
/// they would be without it.
unsafe fn mem_get_info(
    real: unsafe extern "C" fn(*mut usize, *mut usize) -> CUresult,
    free: *mut usize,
    total: *mut usize,
) -> CUresult {
    let r = real(free, total);
    if r == CUDA_SUCCESS && !free.is_null() && !total.is_null() {
        let held = quietly(|| crate::routes::redzones::held(crate::driver::current_context().1)).unwrap_or(0);
        *free = (*free).saturating_add(held as usize).min(*total);
    }
    r
}

/// `cuMemGetAddressRange`: an allocation gpusan padded with a red zone is as long as the
/// program asked for.
unsafe fn mem_get_address_range(
    real: unsafe extern "C" fn(*mut CUdeviceptr, *mut usize, CUdeviceptr) -> CUresult,
    base: *mut CUdeviceptr,
    size: *mut usize,
    dptr: CUdeviceptr,
) -> CUresult {
    let r = real(base, size, dptr);
    if r == CUDA_SUCCESS && !base.is_null() && !size.is_null() {
        let redzone = quietly(|| match state().registry.lookup(*base) {
            Lookup::Live { alloc, .. } | Lookup::Freed { alloc, .. } if alloc.base == *base => alloc.redzone,
            _ => 0,
        });
        *size -= (redzone.unwrap_or(0) as usize).min(*size);
    }
    r
}

// ---- frees -------------------------------------------------------------------------

unsafe fn mem_free(real: unsafe extern "C" fn(CUdeviceptr) -> CUresult, dptr: CUdeviceptr) -> CUresult {
    free_device("cuMemFree", FreeApi::Free, dptr, Release::Deferred, || real(dptr))
}

/// `cuMemFree` and `cuMemFreeAsync` outside a capture; `other` for memory not a graph's.
/// Graph memory comes from the graph's pool: the driver must get it back at once (gpusan
/// cannot release it later), and the registry keeps it as freed until the graph's next
/// launch allocates it again. Memory its own graph frees the driver refuses to free outside
/// the graph: a double free, the graph's free node the first.
fn free_device(
    name: &'static str,
    api: FreeApi,
    dptr: CUdeviceptr,
    other: Release,
    real: impl FnOnce() -> CUresult,
) -> CUresult {
    let graph = quietly(|| match state().registry.lookup(dptr) {
        Lookup::Live { alloc, .. } if alloc.kind == AllocKind::GraphNode => {
            Some((alloc, graphs::freed_by_own_graph(dptr).filter(|_| alloc.base == dptr)))
        }
        _ => None,
    });
    match graph.flatten() {
        Some((alloc, Some(first_free))) => {
            quietly(|| {
                let st = state();
                let outcome = FreeOutcome::DoubleFree { alloc, first_free };
                if let Some(f) = check_free(&st.registry, name, dptr, &outcome) {
                    st.finding(&f, site());
                }
            });
            real() // which the driver refuses
        }
        Some((_, None)) => free_common(api, name, dptr, Release::Immediate, real),
        None => free_common(api, name, dptr, other, real),
    }
}

/// `ours` is the program's `stream` as gpusan's own calls name it ([`per_thread`]).
unsafe fn mem_free_async(
    real: unsafe extern "C" fn(CUdeviceptr, CUstream) -> CUresult,
    dptr: CUdeviceptr,
    stream: CUstream,
    ours: CUstream,
) -> CUresult {
    // Under capture this adds a free node: nothing is freed now (see `graphs`).
    if let Some(Some(graph)) = quietly(|| graphs::capturing(ours)) {
        quietly(|| graphs::graph_frees(graph, dptr, site()));
        return real(dptr, stream);
    }
    // Stream-ordered: held in quarantine after an event at the free's place in the stream
    // (`ordered`), so the pool cannot hand the address out again while it is quarantined.
    free_device("cuMemFreeAsync", FreeApi::FreeAsync, dptr, Release::Ordered(ours), || real(dptr, stream))
}

/// `cuMemPoolDestroy`: the pool's blocks gpusan still holds back (the program freed them
/// before it destroyed the pool) are given back first, in stream order as ever, and
/// leave the quarantine. The driver destroys a pool with outstanding allocations only
/// once they are freed: kept, they would keep the whole pool's memory (all of it, under a
/// high release threshold) until the quarantine let them go; forgotten unfreed, they would
/// keep it for good. Freed first, the pool goes when their frees are done, as it would
/// have. Its blocks cannot stay in the registry as freed: the pool's addresses may be
/// another pool's next. (A trimmed pool, `cuMemPoolTrimTo`, is left alone: trimming gives
/// back memory no allocation uses, and a quarantined block is in use to the pool.)
unsafe fn mem_pool_destroy(real: unsafe extern "C" fn(CUmemoryPool) -> CUresult, pool: CUmemoryPool) -> CUresult {
    quietly(|| {
        let registry = &state().registry;
        for a in registry.snapshot().iter().filter(|a| !a.is_live() && super::ordered::is_held(a)) {
            let of_pool = match a.kind {
                AllocKind::Pool { pool: p, .. } => p == pool as u64,
                // From the device's current pool, which may be this one.
                _ => super::ordered::pool_of(a.base) == Some(pool as u64),
            };
            if of_pool && registry.forget(a.base).is_some() {
                release(a);
            }
        }
    });
    real(pool)
}

/// After a graph's launch: what it freed of other graphs' memory, or, when the driver
/// refused it, what `graphs::launching` made live for it freed again as before.
pub fn after_graph_launch(after: graphs::AfterLaunch) {
    match after {
        graphs::AfterLaunch::Freed(bases) => bases.into_iter().for_each(freed_by_graph_launch),
        graphs::AfterLaunch::Refused(revived) => quietly(|| {
            let registry = &state().registry;
            for (base, freed_at) in revived {
                let freed = registry.free(base, FreeApi::GraphFree, freed_at);
                freed.evicted.iter().filter(|a| a.base != base).for_each(release);
            }
        })
        .unwrap_or_default(),
    }
}

/// A free node of another graph freed graph memory at `base` during a launch: judged as a
/// free call, which the driver has made (its memory is the graph's, never held back).
/// Memory gpusan never saw allocated is left alone: the driver accepted the launch.
fn freed_by_graph_launch(base: u64) {
    if matches!(quietly(|| state().registry.lookup(base)), Some(Lookup::Outside { .. }) | None) {
        return;
    }
    free_common(FreeApi::GraphFree, "cuGraphLaunch", base, Release::Immediate, || CUDA_SUCCESS);
}

unsafe fn mem_free_host(real: unsafe extern "C" fn(*mut c_void) -> CUresult, p: *mut c_void) -> CUresult {
    free_common(FreeApi::FreeHost, "cuMemFreeHost", p as u64, Release::Deferred, || real(p))
}

// ---- host registration and virtual memory mappings ------------------------------------

unsafe fn mem_host_register(
    real: unsafe extern "C" fn(*mut c_void, usize, u32) -> CUresult,
    p: *mut c_void,
    size: usize,
    flags: u32,
) -> CUresult {
    let r = real(p, size, flags);
    if r == CUDA_SUCCESS {
        quietly(|| record_alloc(p as u64, size as u64, AllocKind::HostRegistered, site()));
    }
    r
}

unsafe fn mem_host_unregister(real: unsafe extern "C" fn(*mut c_void) -> CUresult, p: *mut c_void) -> CUresult {
    // The user's memory stays; only the registration ends, at once.
    free_common(FreeApi::HostUnregister, "cuMemHostUnregister", p as u64, Release::Immediate, || real(p))
}

unsafe fn mem_map(
    real: unsafe extern "C" fn(CUdeviceptr, usize, usize, CUmemHandle, u64) -> CUresult,
    ptr: CUdeviceptr,
    size: usize,
    offset: usize,
    handle: CUmemHandle,
    flags: u64,
) -> CUresult {
    let r = real(ptr, size, offset, handle, flags);
    if r == CUDA_SUCCESS {
        quietly(|| record_alloc(ptr, size as u64, AllocKind::Vmm, site()));
    }
    r
}

unsafe fn mem_unmap(
    real: unsafe extern "C" fn(CUdeviceptr, usize) -> CUresult,
    ptr: CUdeviceptr,
    size: usize,
) -> CUresult {
    // The address range stays reserved after an unmap, so no allocation can take it until
    // the program maps it again: unmapping at once keeps use after unmap detectable.
    free_common(FreeApi::MemUnmap, "cuMemUnmap", ptr, Release::Immediate, || real(ptr, size))
}
