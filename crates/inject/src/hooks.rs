//! What gpusan does around the driver calls it watches: record allocations, judge frees,
//! copies and sets against the registry, and hold freed memory in quarantine.
//!
//! Every handler calls the real function exactly as the program asked, except a second
//! free of quarantined memory, which the driver would refuse and gpusan answers the same
//! way. gpusan's own work runs under `quietly`: if it ever panics, the call still goes
//! through untouched.

// Handlers mirror the driver functions they stand for, arguments and all.
#![allow(clippy::too_many_arguments)]

use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};

use gpusan_runtime::checks::{check_free, Call, Mem};
use gpusan_runtime::registry::{capture_site, AllocKind, Allocation, FreeApi, FreeOutcome, Lookup, NewAlloc, SiteId};

use crate::state::state;

pub type CUresult = i32;
type Ptr = *mut c_void;
const SUCCESS: CUresult = 0;
const ERROR_INVALID_VALUE: CUresult = 1;
const ERROR_OUT_OF_MEMORY: CUresult = 2;

/// Runs gpusan's bookkeeping; a panic inside it is contained. Skipped entirely in a
/// forked child (see `state::FORKED_CHILD`): the call then simply goes through.
fn quietly<R>(f: impl FnOnce() -> R) -> Option<R> {
    if crate::state::FORKED_CHILD.load(Ordering::Relaxed) {
        return None;
    }
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).ok()
}

/// Frames of gpusan's own between the program and `capture_site`: the handler and the
/// exported wrapper.
const OWN_FRAMES: usize = 2;

#[inline(never)]
fn site() -> SiteId {
    let s = capture_site(OWN_FRAMES + 1);
    std::hint::black_box(s)
}

/// A driver function gpusan itself calls, resolved once.
pub fn driver_fn(slot: &AtomicUsize, name: &std::ffi::CStr) -> usize {
    let p = slot.load(Ordering::Acquire);
    if p != 0 {
        return p;
    }
    let p = unsafe { crate::resolve::real_driver_symbol(name) };
    slot.store(p, Ordering::Release);
    p
}

/// The current context and its device, for the registry.
pub fn current_context() -> (u64, i32) {
    static GET_CTX: AtomicUsize = AtomicUsize::new(0);
    static GET_DEV: AtomicUsize = AtomicUsize::new(0);
    let (g, d) = (driver_fn(&GET_CTX, c"cuCtxGetCurrent"), driver_fn(&GET_DEV, c"cuCtxGetDevice"));
    let (mut ctx, mut dev): (Ptr, i32) = (std::ptr::null_mut(), -1);
    unsafe {
        if g != 0 {
            let f: unsafe extern "C" fn(*mut Ptr) -> CUresult = std::mem::transmute(g);
            f(&mut ctx);
        }
        if d != 0 && !ctx.is_null() {
            let f: unsafe extern "C" fn(*mut i32) -> CUresult = std::mem::transmute(d);
            f(&mut dev);
        }
    }
    (ctx as u64, dev)
}

fn record_alloc(base: u64, size: u64, kind: AllocKind, site: SiteId) {
    let (context, device) = current_context();
    let _ = state().registry.insert(NewAlloc { base, size, kind, device, context, site });
}

/// Allocations that left quarantine during a capture: freed when the last capture ends
/// (`cuMemFree` is one of the calls a capture prohibits).
static RELEASE_AFTER_CAPTURE: std::sync::Mutex<Vec<Allocation>> = std::sync::Mutex::new(Vec::new());

/// Really frees an allocation leaving quarantine.
fn release(a: &Allocation) {
    if crate::capture::any() {
        RELEASE_AFTER_CAPTURE.lock().unwrap_or_else(|p| p.into_inner()).push(*a);
        return;
    }
    static FREE: AtomicUsize = AtomicUsize::new(0);
    static FREE_HOST: AtomicUsize = AtomicUsize::new(0);
    let (slot, name) = match a.kind {
        // Only these kinds are held back at their free (`Release::Deferred`).
        AllocKind::Device | AllocKind::Pitched { .. } | AllocKind::Managed | AllocKind::Other => {
            (&FREE, c"cuMemFree_v2")
        }
        AllocKind::HostPinned { .. } => (&FREE_HOST, c"cuMemFreeHost"),
        // Released when the program freed them (stream-ordered frees, unregistrations,
        // unmaps) or never by a free call (module variables, device heap, arrays, graphs).
        _ => return,
    };
    let f = driver_fn(slot, name);
    if f == 0 {
        return;
    }
    unsafe {
        if matches!(a.kind, AllocKind::HostPinned { .. }) {
            let f: unsafe extern "C" fn(Ptr) -> CUresult = std::mem::transmute(f);
            f(a.base as Ptr);
        } else {
            let f: unsafe extern "C" fn(u64) -> CUresult = std::mem::transmute(f);
            f(a.base);
        }
    }
}

/// The last capture of the process ended: what was held back for it can be done now.
pub fn after_captures() {
    let held = std::mem::take(&mut *RELEASE_AFTER_CAPTURE.lock().unwrap_or_else(|p| p.into_inner()));
    held.iter().for_each(release);
}

/// What the driver's `cuMemFree` does first: wait for the device. Its result is what the
/// free returns when it fails (an earlier launch's sticky error), as the driver's does.
fn synchronize() -> CUresult {
    static SYNC: AtomicUsize = AtomicUsize::new(0);
    let f = driver_fn(&SYNC, c"cuCtxSynchronize");
    if f == 0 {
        return SUCCESS;
    }
    let f: unsafe extern "C" fn() -> CUresult = unsafe { std::mem::transmute(f) };
    unsafe { f() }
}

/// Gives every quarantined allocation back, so a failed allocation can be retried.
fn drain_quarantine() -> bool {
    let evicted = state().registry.evict_quarantine(0);
    evicted.iter().for_each(release);
    !evicted.is_empty()
}

/// Allocates through `alloc`; out of memory with memory in quarantine, drains it and
/// tries once more: the quarantine must never make a program fail that would not.
fn alloc_with_retry(mut alloc: impl FnMut() -> CUresult) -> CUresult {
    let r = alloc();
    if r == ERROR_OUT_OF_MEMORY && quietly(drain_quarantine).unwrap_or(false) {
        return alloc();
    }
    r
}

/// The common path of every free. `Deferred` frees are held in quarantine instead of
/// reaching the driver; `Immediate` ones (stream-ordered) reach it now and are only
/// remembered as freed.
enum Release {
    Deferred,
    Immediate,
}

fn free_common(
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
        freed.evicted.iter().filter(|a| a.base != ptr).for_each(release);
        (freed.outcome, freed.evicted.iter().any(|a| a.base == ptr))
    }) else {
        return real();
    };
    match (outcome, release_now) {
        ((FreeOutcome::Freed(_), _), Release::Immediate) => real(),
        // A zero quarantine budget evicts the allocation at once: free it now.
        ((FreeOutcome::Freed(_), true), Release::Deferred) => real(),
        ((FreeOutcome::Freed(_), false), Release::Deferred) => {
            // The driver's free synchronizes the device and programs rely on it; holding
            // the memory back must not take that away. It is also where kernels' error
            // records become final. Not while a stream captures: synchronizing the context
            // then would invalidate the capture.
            if !quietly(crate::capture::any).unwrap_or(true) {
                let r = synchronize();
                quietly(crate::mirror::drain);
                return r;
            }
            SUCCESS
        }
        // The program freed this already; the driver would refuse the second free too.
        ((FreeOutcome::DoubleFree { .. }, _), _) => ERROR_INVALID_VALUE,
        _ => real(),
    }
}

/// Whether the driver knows `p` as device memory (`cuPointerGetAttribute`'s range).
/// Asked only for addresses the registry does not know, which is rare.
fn driver_knows(p: u64) -> bool {
    const RANGE_START_ADDR: i32 = 11;
    static GET: AtomicUsize = AtomicUsize::new(0);
    let f = driver_fn(&GET, c"cuPointerGetAttribute");
    if f == 0 {
        return false;
    }
    let mut start: u64 = 0;
    let f: unsafe extern "C" fn(*mut c_void, i32, u64) -> CUresult = unsafe { std::mem::transmute(f) };
    unsafe { f(&mut start as *mut u64 as *mut c_void, RANGE_START_ADDR, p) == SUCCESS && start != 0 }
}

/// A pointer the API says is device memory: judged against the registry, unless gpusan
/// never saw it allocated and the driver vouches for it (module variables and the like).
/// Module variables are resolved (once per module and context) the first time an address
/// the registry does not know shows up, and the lookup retried.
fn device(p: u64) -> Mem {
    let known = |p| matches!(state().registry.lookup(p), Lookup::Live { .. } | Lookup::Freed { .. });
    if known(p) || (crate::variables::resolve() && known(p)) {
        return Mem::Device(p);
    }
    if driver_knows(p) {
        Mem::Untracked(p)
    } else {
        Mem::Device(p)
    }
}

/// A pointer passed where unified addressing allows host or device memory.
fn uva(p: u64) -> Mem {
    match state().registry.lookup(p) {
        Lookup::Live { alloc, .. } | Lookup::Freed { alloc, .. }
            if matches!(alloc.kind, AllocKind::HostPinned { .. } | AllocKind::HostRegistered) =>
        {
            Mem::Host(p)
        }
        Lookup::Live { .. } | Lookup::Freed { .. } => Mem::Device(p),
        Lookup::Outside { .. } => Mem::Host(p),
    }
}

thread_local! {
    /// Findings the driver-level checks made on this thread: a runtime-API callback (see
    /// `sanitizer`) does not report a call again that a driver hook inside it reported.
    pub static FOUND_ON_THREAD: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Judges a call; the call stack (the costly part) is captured only for a finding.
fn check(api: &'static str, call: Call) {
    quietly(|| {
        let st = state();
        let mut findings = gpusan_runtime::checks::check_call(&st.registry, api, &call);
        if !findings.is_empty() {
            let s = site();
            for f in &mut findings {
                f.name_variable(crate::variables::name_of);
                st.finding(f, s);
            }
            FOUND_ON_THREAD.with(|n| n.set(n.get() + findings.len() as u64));
        }
    });
}

// ---- allocations -------------------------------------------------------------------

type AllocFn = unsafe extern "C" fn(*mut u64, usize) -> CUresult;

pub unsafe fn mem_alloc(real: AllocFn, dptr: *mut u64, size: usize) -> CUresult {
    let r = alloc_with_retry(|| real(dptr, size));
    if r == SUCCESS && !dptr.is_null() {
        quietly(|| record_alloc(*dptr, size as u64, AllocKind::Device, site()));
    }
    r
}

pub unsafe fn mem_alloc_pitch(
    real: unsafe extern "C" fn(*mut u64, *mut usize, usize, usize, u32) -> CUresult,
    dptr: *mut u64,
    pitch: *mut usize,
    width: usize,
    height: usize,
    elem: u32,
) -> CUresult {
    let r = alloc_with_retry(|| real(dptr, pitch, width, height, elem));
    if r == SUCCESS && !dptr.is_null() && !pitch.is_null() {
        let (p, w, h) = (*pitch as u64, width as u64, height as u64);
        let kind = AllocKind::Pitched { pitch: p, width_bytes: w, height: h };
        quietly(|| record_alloc(*dptr, p * h, kind, site()));
    }
    r
}

pub unsafe fn mem_alloc_async(
    real: unsafe extern "C" fn(*mut u64, usize, Ptr) -> CUresult,
    dptr: *mut u64,
    size: usize,
    stream: Ptr,
) -> CUresult {
    let r = alloc_with_retry(|| real(dptr, size, stream));
    if r == SUCCESS && !dptr.is_null() {
        quietly(|| match capturing(stream) {
            // Under stream capture the call adds a memory allocation node: the address is
            // the graph's, valid at every launch of it.
            Some(graph) => graph_alloc(graph, *dptr, size as u64, site()),
            None => record_alloc(*dptr, size as u64, AllocKind::Async { stream: stream as u64 }, site()),
        });
    }
    r
}

// ---- graph memory nodes ----------------------------------------------------------------
//
// A graph's allocation is registered when its node is made (the node's parameters give
// address and size) and stays live across launches: a free node gives the memory back at
// the end of each launch, and the next launch allocates it again at the same address, so
// marking it freed at node creation would turn every later launch into use after free.
// Its entry goes when the graph is destroyed (for allocations the graph itself frees) or,
// once freed by the program, when the device's graph memory is trimmed.

#[derive(Default)]
struct GraphMemory {
    /// Graph → bases of the allocations its nodes made.
    allocs: std::collections::HashMap<u64, Vec<u64>>,
    /// Graph → bases its free nodes free.
    frees: std::collections::HashMap<u64, Vec<u64>>,
}

static GRAPHS: std::sync::Mutex<Option<GraphMemory>> = std::sync::Mutex::new(None);

fn graphs<R>(f: impl FnOnce(&mut GraphMemory) -> R) -> R {
    let mut g = GRAPHS.lock().unwrap_or_else(|p| p.into_inner());
    f(g.get_or_insert_with(GraphMemory::default))
}

/// The graph `stream` is being captured into, if it is (0 when the driver does not say
/// which graph).
fn capturing(stream: Ptr) -> Option<u64> {
    const ACTIVE: i32 = 1;
    static INFO: AtomicUsize = AtomicUsize::new(0);
    static IS: AtomicUsize = AtomicUsize::new(0);
    let (mut status, mut graph): (i32, Ptr) = (0, std::ptr::null_mut());
    let info = driver_fn(&INFO, c"cuStreamGetCaptureInfo_v2");
    unsafe {
        if info != 0 {
            let f: unsafe extern "C" fn(Ptr, *mut i32, *mut u64, *mut Ptr, *mut *const Ptr, *mut usize) -> CUresult =
                std::mem::transmute(info);
            let (mut id, mut deps, mut n) = (0u64, std::ptr::null(), 0usize);
            if f(stream, &mut status, &mut id, &mut graph, &mut deps, &mut n) != SUCCESS {
                return None;
            }
        } else {
            let is = driver_fn(&IS, c"cuStreamIsCapturing");
            if is == 0 {
                return None;
            }
            let f: unsafe extern "C" fn(Ptr, *mut i32) -> CUresult = std::mem::transmute(is);
            if f(stream, &mut status) != SUCCESS {
                return None;
            }
        }
    }
    (status == ACTIVE).then_some(graph as u64)
}

fn graph_alloc(graph: u64, base: u64, size: u64, site: SiteId) {
    record_alloc(base, size, AllocKind::GraphNode, site);
    graphs(|g| g.allocs.entry(graph).or_default().push(base));
}

/// `CUDA_MEM_ALLOC_NODE_PARAMS` (v1): the pool properties, then the access descriptors,
/// then the size asked for and the address the driver chose.
#[repr(C)]
pub struct MemAllocNodeParams {
    pool_props: [u8; 88],
    access_descs: Ptr,
    access_desc_count: usize,
    bytesize: usize,
    dptr: u64,
}

pub unsafe fn graph_add_mem_alloc_node(
    real: unsafe extern "C" fn(*mut Ptr, Ptr, *const Ptr, usize, *mut MemAllocNodeParams) -> CUresult,
    node: *mut Ptr,
    graph: Ptr,
    deps: *const Ptr,
    n: usize,
    params: *mut MemAllocNodeParams,
) -> CUresult {
    let r = real(node, graph, deps, n, params);
    if r == SUCCESS && !params.is_null() {
        let (base, size) = ((*params).dptr, (*params).bytesize as u64);
        quietly(|| graph_alloc(graph as u64, base, size, site()));
    }
    r
}

pub unsafe fn graph_add_mem_free_node(
    real: unsafe extern "C" fn(*mut Ptr, Ptr, *const Ptr, usize, u64) -> CUresult,
    node: *mut Ptr,
    graph: Ptr,
    deps: *const Ptr,
    n: usize,
    dptr: u64,
) -> CUresult {
    let r = real(node, graph, deps, n, dptr);
    if r == SUCCESS {
        // Not freed now: the memory is freed at the end of each launch and comes back at
        // the next one.
        quietly(|| graphs(|g| g.frees.entry(graph as u64).or_default().push(dptr)));
    }
    r
}

pub unsafe fn graph_destroy(real: unsafe extern "C" fn(Ptr) -> CUresult, graph: Ptr) -> CUresult {
    let r = real(graph);
    if r == SUCCESS {
        quietly(|| {
            let (allocs, frees) = graphs(|g| {
                (
                    g.allocs.remove(&(graph as u64)).unwrap_or_default(),
                    g.frees.remove(&(graph as u64)).unwrap_or_default(),
                )
            });
            // What the graph allocated and frees itself is gone with it; what it allocated
            // without freeing outlives it until the program frees it.
            for base in allocs.iter().filter(|b| frees.contains(b)) {
                if let Lookup::Live { alloc, .. } = state().registry.lookup(*base) {
                    if alloc.base == *base && alloc.kind == AllocKind::GraphNode {
                        state().registry.forget(*base);
                    }
                }
            }
        });
    }
    r
}

pub unsafe fn device_graph_mem_trim(real: unsafe extern "C" fn(i32) -> CUresult, device: i32) -> CUresult {
    let r = real(device);
    if r == SUCCESS {
        quietly(|| {
            let st = state();
            for a in st.registry.snapshot() {
                if a.kind == AllocKind::GraphNode && !a.is_live() && a.device == device {
                    st.registry.forget(a.base);
                }
            }
        });
    }
    r
}

pub unsafe fn mem_alloc_from_pool(
    real: unsafe extern "C" fn(*mut u64, usize, Ptr, Ptr) -> CUresult,
    dptr: *mut u64,
    size: usize,
    pool: Ptr,
    stream: Ptr,
) -> CUresult {
    let r = alloc_with_retry(|| real(dptr, size, pool, stream));
    if r == SUCCESS && !dptr.is_null() {
        let kind = AllocKind::Pool { pool: pool as u64, stream: stream as u64 };
        quietly(|| record_alloc(*dptr, size as u64, kind, site()));
    }
    r
}

pub unsafe fn mem_alloc_managed(
    real: unsafe extern "C" fn(*mut u64, usize, u32) -> CUresult,
    dptr: *mut u64,
    size: usize,
    flags: u32,
) -> CUresult {
    let r = alloc_with_retry(|| real(dptr, size, flags));
    if r == SUCCESS && !dptr.is_null() {
        quietly(|| record_alloc(*dptr, size as u64, AllocKind::Managed, site()));
    }
    r
}

pub unsafe fn mem_host_alloc(
    real: unsafe extern "C" fn(*mut Ptr, usize, u32) -> CUresult,
    pp: *mut Ptr,
    size: usize,
    flags: u32,
) -> CUresult {
    const DEVICEMAP: u32 = 0x02;
    let r = alloc_with_retry(|| real(pp, size, flags));
    if r == SUCCESS && !pp.is_null() {
        let kind = AllocKind::HostPinned { mapped: flags & DEVICEMAP != 0 };
        quietly(|| record_alloc(*pp as u64, size as u64, kind, site()));
    }
    r
}

pub unsafe fn mem_alloc_host(
    real: unsafe extern "C" fn(*mut Ptr, usize) -> CUresult,
    pp: *mut Ptr,
    size: usize,
) -> CUresult {
    let r = alloc_with_retry(|| real(pp, size));
    if r == SUCCESS && !pp.is_null() {
        quietly(|| record_alloc(*pp as u64, size as u64, AllocKind::HostPinned { mapped: false }, site()));
    }
    r
}

// ---- frees -------------------------------------------------------------------------

pub unsafe fn mem_free(real: unsafe extern "C" fn(u64) -> CUresult, dptr: u64) -> CUresult {
    // Graph memory comes from the graph's pool: the driver must get it back at once (gpusan
    // cannot release it later), and the registry keeps it as freed until it is trimmed.
    let graph = quietly(|| is_graph_memory(dptr)).unwrap_or(false);
    let release = if graph { Release::Immediate } else { Release::Deferred };
    free_common(FreeApi::Free, "cuMemFree", dptr, release, || real(dptr))
}

fn is_graph_memory(p: u64) -> bool {
    matches!(state().registry.lookup(p), Lookup::Live { alloc, .. } if alloc.kind == AllocKind::GraphNode)
}

pub unsafe fn mem_free_async(real: unsafe extern "C" fn(u64, Ptr) -> CUresult, dptr: u64, stream: Ptr) -> CUresult {
    // Under capture this adds a free node: nothing is freed now (see graph memory nodes).
    if let Some(Some(graph)) = quietly(|| capturing(stream)) {
        quietly(|| graphs(|g| g.frees.entry(graph).or_default().push(dptr)));
        return real(dptr, stream);
    }
    // Stream-ordered: the free must take its place in the stream, so it reaches the
    // driver now; the registry still knows the range as freed until it is reused.
    free_common(FreeApi::FreeAsync, "cuMemFreeAsync", dptr, Release::Immediate, || real(dptr, stream))
}

pub unsafe fn mem_free_host(real: unsafe extern "C" fn(Ptr) -> CUresult, p: Ptr) -> CUresult {
    free_common(FreeApi::FreeHost, "cuMemFreeHost", p as u64, Release::Deferred, || real(p))
}

// ---- copies ------------------------------------------------------------------------

pub unsafe fn memcpy_htod(
    real: unsafe extern "C" fn(u64, *const c_void, usize) -> CUresult,
    dst: u64,
    src: *const c_void,
    n: usize,
) -> CUresult {
    check("cuMemcpyHtoD", Call::Copy { dst: device(dst), src: Mem::Host(src as u64), count: n as u64 });
    real(dst, src, n)
}

pub unsafe fn memcpy_dtoh(
    real: unsafe extern "C" fn(Ptr, u64, usize) -> CUresult,
    dst: Ptr,
    src: u64,
    n: usize,
) -> CUresult {
    check("cuMemcpyDtoH", Call::Copy { dst: Mem::Host(dst as u64), src: device(src), count: n as u64 });
    // A synchronous copy back is where most programs wait for their kernels.
    after_sync(real(dst, src, n))
}

pub unsafe fn memcpy_dtod(
    real: unsafe extern "C" fn(u64, u64, usize) -> CUresult,
    dst: u64,
    src: u64,
    n: usize,
) -> CUresult {
    check("cuMemcpyDtoD", Call::Copy { dst: device(dst), src: device(src), count: n as u64 });
    real(dst, src, n)
}

pub unsafe fn memcpy(
    real: unsafe extern "C" fn(u64, u64, usize) -> CUresult,
    dst: u64,
    src: u64,
    n: usize,
) -> CUresult {
    check("cuMemcpy", Call::Copy { dst: uva(dst), src: uva(src), count: n as u64 });
    real(dst, src, n)
}

pub unsafe fn memcpy_async(
    real: unsafe extern "C" fn(u64, u64, usize, Ptr) -> CUresult,
    dst: u64,
    src: u64,
    n: usize,
    s: Ptr,
) -> CUresult {
    check("cuMemcpyAsync", Call::Copy { dst: uva(dst), src: uva(src), count: n as u64 });
    real(dst, src, n, s)
}

pub unsafe fn memcpy_htod_async(
    real: unsafe extern "C" fn(u64, *const c_void, usize, Ptr) -> CUresult,
    dst: u64,
    src: *const c_void,
    n: usize,
    s: Ptr,
) -> CUresult {
    check("cuMemcpyHtoDAsync", Call::Copy { dst: device(dst), src: Mem::Host(src as u64), count: n as u64 });
    real(dst, src, n, s)
}

pub unsafe fn memcpy_dtoh_async(
    real: unsafe extern "C" fn(Ptr, u64, usize, Ptr) -> CUresult,
    dst: Ptr,
    src: u64,
    n: usize,
    s: Ptr,
) -> CUresult {
    check("cuMemcpyDtoHAsync", Call::Copy { dst: Mem::Host(dst as u64), src: device(src), count: n as u64 });
    real(dst, src, n, s)
}

pub unsafe fn memcpy_dtod_async(
    real: unsafe extern "C" fn(u64, u64, usize, Ptr) -> CUresult,
    dst: u64,
    src: u64,
    n: usize,
    s: Ptr,
) -> CUresult {
    check("cuMemcpyDtoDAsync", Call::Copy { dst: device(dst), src: device(src), count: n as u64 });
    real(dst, src, n, s)
}

/// `CUDA_MEMCPY2D` (the `_v2` layout, `size_t` fields).
#[repr(C)]
pub struct Memcpy2D {
    src_x: usize,
    src_y: usize,
    src_type: u32,
    src_host: *const c_void,
    src_device: u64,
    src_array: Ptr,
    src_pitch: usize,
    dst_x: usize,
    dst_y: usize,
    dst_type: u32,
    dst_host: Ptr,
    dst_device: u64,
    dst_array: Ptr,
    dst_pitch: usize,
    width: usize,
    height: usize,
}

fn side(mem_type: u32, host: u64, dev: u64, array: u64, x: usize, y: usize, pitch: usize) -> Mem {
    let offset = (y as u64).saturating_mul(pitch as u64).saturating_add(x as u64);
    match mem_type {
        1 => Mem::Host(host.wrapping_add(offset)),
        2 => device(dev.wrapping_add(offset)),
        3 => Mem::Array(array),
        _ => uva(dev.wrapping_add(offset)),
    }
}

unsafe fn check_2d(api: &'static str, p: *const Memcpy2D) {
    if p.is_null() {
        return;
    }
    let c = &*p;
    let src = side(c.src_type, c.src_host as u64, c.src_device, c.src_array as u64, c.src_x, c.src_y, c.src_pitch);
    let dst = side(c.dst_type, c.dst_host as u64, c.dst_device, c.dst_array as u64, c.dst_x, c.dst_y, c.dst_pitch);
    check(
        api,
        Call::Copy2D {
            dst,
            dpitch: c.dst_pitch as u64,
            src,
            spitch: c.src_pitch as u64,
            width: c.width as u64,
            height: c.height as u64,
        },
    );
}

pub unsafe fn memcpy_2d(real: unsafe extern "C" fn(*const Memcpy2D) -> CUresult, p: *const Memcpy2D) -> CUresult {
    check_2d("cuMemcpy2D", p);
    real(p)
}

pub unsafe fn memcpy_2d_async(
    real: unsafe extern "C" fn(*const Memcpy2D, Ptr) -> CUresult,
    p: *const Memcpy2D,
    s: Ptr,
) -> CUresult {
    check_2d("cuMemcpy2DAsync", p);
    real(p, s)
}

// ---- sets --------------------------------------------------------------------------

pub unsafe fn memset<T: Copy>(
    api: &'static str,
    elem: u64,
    real: unsafe extern "C" fn(u64, T, usize) -> CUresult,
    dst: u64,
    v: T,
    n: usize,
) -> CUresult {
    check(api, Call::Set { dst: device(dst), count: (n as u64).saturating_mul(elem) });
    real(dst, v, n)
}

pub unsafe fn memset_async<T: Copy>(
    api: &'static str,
    elem: u64,
    real: unsafe extern "C" fn(u64, T, usize, Ptr) -> CUresult,
    dst: u64,
    v: T,
    n: usize,
    s: Ptr,
) -> CUresult {
    check(api, Call::Set { dst: device(dst), count: (n as u64).saturating_mul(elem) });
    real(dst, v, n, s)
}

pub unsafe fn memset_2d<T: Copy>(
    api: &'static str,
    elem: u64,
    real: unsafe extern "C" fn(u64, usize, T, usize, usize) -> CUresult,
    dst: u64,
    pitch: usize,
    v: T,
    w: usize,
    h: usize,
) -> CUresult {
    let width = (w as u64).saturating_mul(elem);
    check(api, Call::Set2D { dst: device(dst), pitch: pitch as u64, width, height: h as u64 });
    real(dst, pitch, v, w, h)
}

pub unsafe fn memset_2d_async<T: Copy>(
    api: &'static str,
    elem: u64,
    real: unsafe extern "C" fn(u64, usize, T, usize, usize, Ptr) -> CUresult,
    dst: u64,
    pitch: usize,
    v: T,
    w: usize,
    h: usize,
    s: Ptr,
) -> CUresult {
    let width = (w as u64).saturating_mul(elem);
    check(api, Call::Set2D { dst: device(dst), pitch: pitch as u64, width, height: h as u64 });
    real(dst, pitch, v, w, h, s)
}

// ---- module loads (kernel substitution) ------------------------------------------------

/// Whether this run instruments kernels: every mode but `api` names a pass.
fn substituting() -> bool {
    state().options.mode != "api"
}

/// Loads `image` through `load`, instrumented when the mode asks for it and possible,
/// else as it is. `handle` names what a successful load produced; the module is then
/// offered to the device ABI (it takes part if it declares the ABI variables).
unsafe fn load_module(
    image: *const c_void,
    mut load: impl FnMut(*const c_void) -> CUresult,
    handle: impl Fn() -> crate::modules::Loaded,
) -> CUresult {
    let r = if !substituting() {
        load(image)
    } else {
        match quietly(|| crate::modules::substitute(image, &state().options.mode)) {
            Some(crate::modules::Image::Substitute(bytes)) => {
                let r = load(bytes.as_ptr() as *const c_void);
                if r == SUCCESS {
                    crate::modules::with(|m| {
                        m.substituted += 1;
                        m.instrumented.push(handle());
                    });
                    r
                } else {
                    crate::modules::with(|m| {
                        *m.unchecked
                            .entry(format!("instrumented module refused by the driver (error {r})"))
                            .or_default() += 1
                    });
                    quietly(|| crate::modules::refused(image, &state().options.mode));
                    load(image)
                }
            }
            Some(crate::modules::Image::Original(why)) => {
                crate::modules::with(|m| *m.unchecked.entry(why).or_default() += 1);
                load(image)
            }
            // The pass panicked (a gpusan bug, caught): the program runs its own module,
            // and the report says this one went unchecked rather than passing it over.
            None => {
                quietly(|| {
                    crate::modules::with(|m| {
                        *m.unchecked
                            .entry("not instrumented: gpusan failed internally (a bug in gpusan)".into())
                            .or_default() += 1
                    })
                });
                load(image)
            }
        }
    };
    if r == SUCCESS {
        quietly(|| crate::variables::on_module_loaded(handle(), image));
        quietly(|| crate::mirror::on_module_loaded(handle(), || crate::modules::ptx_of(image, u32::MAX).ok()));
    }
    r
}

pub unsafe fn module_load_data(
    real: unsafe extern "C" fn(*mut Ptr, *const c_void) -> CUresult,
    module: *mut Ptr,
    image: *const c_void,
) -> CUresult {
    load_module(image, |i| real(module, i), || crate::modules::Loaded::Module(*module as usize))
}

pub unsafe fn module_load_data_ex(
    real: unsafe extern "C" fn(*mut Ptr, *const c_void, u32, *mut i32, *mut Ptr) -> CUresult,
    module: *mut Ptr,
    image: *const c_void,
    n: u32,
    options: *mut i32,
    values: *mut Ptr,
) -> CUresult {
    load_module(image, |i| real(module, i, n, options, values), || crate::modules::Loaded::Module(*module as usize))
}

pub unsafe fn module_load_fat_binary(
    real: unsafe extern "C" fn(*mut Ptr, *const c_void) -> CUresult,
    module: *mut Ptr,
    image: *const c_void,
) -> CUresult {
    load_module(image, |i| real(module, i), || crate::modules::Loaded::Module(*module as usize))
}

pub unsafe fn library_load_data(
    real: unsafe extern "C" fn(*mut Ptr, *const c_void, *mut i32, *mut Ptr, u32, *mut i32, *mut Ptr, u32) -> CUresult,
    lib: *mut Ptr,
    code: *const c_void,
    jo: *mut i32,
    jv: *mut Ptr,
    njo: u32,
    lo: *mut i32,
    lv: *mut Ptr,
    nlo: u32,
) -> CUresult {
    load_module(code, |i| real(lib, i, jo, jv, njo, lo, lv, nlo), || crate::modules::Loaded::Library(*lib as usize))
}

/// After a synchronization what kernels wrote is final for now: drain their error
/// records, and read the counters of instrumented modules.
fn after_sync(r: CUresult) -> CUresult {
    if r == SUCCESS {
        quietly(crate::mirror::drain);
        if substituting() {
            quietly(crate::modules::read_counters);
        }
    }
    r
}

// ---- launches ------------------------------------------------------------------------

/// `stream`: the launch's stream. A launch into a stream being captured does not run now:
/// it becomes a graph node, and the launch of the graph brings the table up to date
/// before the graph runs. A launch into another stream while one captures uploads through
/// `capture`'s capture-safe copies.
fn before_launch_on(stream: Ptr) {
    // The capture query is a driver call: only made while some stream captures.
    let captured =
        quietly(|| crate::mirror::active() && crate::capture::any() && crate::capture::stream_is_capturing(stream));
    if captured.unwrap_or(false) {
        register_late_exit();
    } else {
        before_launch();
    }
}

fn before_launch() {
    quietly(crate::mirror::before_launch);
    register_late_exit();
}

fn register_late_exit() {
    // Registered at the first launch, after cudart registered its own exit handler at its
    // start, so this runs first (exit handlers run in reverse): kernels' last records and
    // counters are read while the context still exists.
    static LATE_EXIT: std::sync::Once = std::sync::Once::new();
    LATE_EXIT.call_once(|| unsafe {
        libc::atexit(read_before_cuda_exits);
    });
}

extern "C" fn read_before_cuda_exits() {
    if !crate::state::FORKED_CHILD.load(Ordering::Relaxed) {
        before_teardown();
    }
}

pub unsafe fn launch_kernel(
    real: unsafe extern "C" fn(Ptr, u32, u32, u32, u32, u32, u32, u32, Ptr, *mut Ptr, *mut Ptr) -> CUresult,
    f: Ptr,
    grid: [u32; 3],
    block: [u32; 3],
    shmem: u32,
    stream: Ptr,
    params: *mut Ptr,
    extra: *mut Ptr,
) -> CUresult {
    before_launch_on(stream);
    real(f, grid[0], grid[1], grid[2], block[0], block[1], block[2], shmem, stream, params, extra)
}

pub unsafe fn launch_kernel_ex(
    real: unsafe extern "C" fn(*const c_void, Ptr, *mut Ptr, *mut Ptr) -> CUresult,
    config: *const c_void,
    f: Ptr,
    params: *mut Ptr,
    extra: *mut Ptr,
) -> CUresult {
    // CUlaunchConfig: six grid/block dimensions and the shared memory size (seven u32s),
    // then the stream at offset 32.
    let stream = if config.is_null() { std::ptr::null_mut() } else { *(config.cast::<u8>().add(32) as *const Ptr) };
    before_launch_on(stream);
    real(config, f, params, extra)
}

pub unsafe fn launch_cooperative(
    real: unsafe extern "C" fn(Ptr, u32, u32, u32, u32, u32, u32, u32, Ptr, *mut Ptr) -> CUresult,
    f: Ptr,
    grid: [u32; 3],
    block: [u32; 3],
    shmem: u32,
    stream: Ptr,
    params: *mut Ptr,
) -> CUresult {
    before_launch_on(stream);
    real(f, grid[0], grid[1], grid[2], block[0], block[1], block[2], shmem, stream, params)
}

pub unsafe fn graph_launch(real: unsafe extern "C" fn(Ptr, Ptr) -> CUresult, exec: Ptr, stream: Ptr) -> CUresult {
    // Launched into a capturing stream, the graph becomes a child node of the capture.
    before_launch_on(stream);
    real(exec, stream)
}

// ---- stream capture --------------------------------------------------------------------

/// `cuStreamBeginCapture*` on `stream`, made by `real`: from now on gpusan's own driver
/// calls take the capture-safe paths (see `capture`).
pub fn begin_capture(stream: Ptr, real: impl FnOnce() -> CUresult) -> CUresult {
    let r = real();
    quietly(|| crate::capture::began(stream, r));
    r
}

pub fn end_capture(stream: Ptr, real: impl FnOnce() -> CUresult) -> CUresult {
    let r = real();
    quietly(|| crate::capture::ended(stream));
    r
}

pub unsafe fn ctx_synchronize(real: unsafe extern "C" fn() -> CUresult) -> CUresult {
    after_sync(real())
}

pub unsafe fn stream_synchronize(real: unsafe extern "C" fn(Ptr) -> CUresult, s: Ptr) -> CUresult {
    after_sync(real(s))
}

// ---- module variables ----------------------------------------------------------------

/// The program asked where a module variable is (cudart does before `cudaMemcpyToSymbol`):
/// from now on its exact bounds are known, so copies past its end are caught.
unsafe fn learn_variable(r: CUresult, dptr: *mut u64, bytes: *mut usize, name: *const std::ffi::c_char) -> CUresult {
    if r == SUCCESS && !dptr.is_null() && !bytes.is_null() {
        let (base, size) = (*dptr, *bytes as u64);
        let name = (!name.is_null()).then(|| std::ffi::CStr::from_ptr(name).to_string_lossy().into_owned());
        quietly(|| crate::variables::learned(base, size, name.as_deref()));
    }
    r
}

pub unsafe fn library_get_global(
    real: unsafe extern "C" fn(*mut u64, *mut usize, Ptr, *const std::ffi::c_char) -> CUresult,
    dptr: *mut u64,
    bytes: *mut usize,
    lib: Ptr,
    name: *const std::ffi::c_char,
) -> CUresult {
    learn_variable(real(dptr, bytes, lib, name), dptr, bytes, name)
}

pub unsafe fn module_get_global(
    real: unsafe extern "C" fn(*mut u64, *mut usize, Ptr, *const std::ffi::c_char) -> CUresult,
    dptr: *mut u64,
    bytes: *mut usize,
    module: Ptr,
    name: *const std::ffi::c_char,
) -> CUresult {
    learn_variable(real(dptr, bytes, module, name), dptr, bytes, name)
}

// ---- 3-D and peer copies ---------------------------------------------------------------

/// `CUDA_MEMCPY3D` (the `_v2` layout, `size_t` fields).
#[repr(C)]
pub struct Memcpy3D {
    src_x: usize,
    src_y: usize,
    src_z: usize,
    src_lod: usize,
    src_type: u32,
    src_host: *const c_void,
    src_device: u64,
    src_array: Ptr,
    reserved0: Ptr,
    src_pitch: usize,
    src_height: usize,
    dst_x: usize,
    dst_y: usize,
    dst_z: usize,
    dst_lod: usize,
    dst_type: u32,
    dst_host: Ptr,
    dst_device: u64,
    dst_array: Ptr,
    reserved1: Ptr,
    dst_pitch: usize,
    dst_height: usize,
    width: usize,
    height: usize,
    depth: usize,
}

fn base_of(mem_type: u32, host: u64, dev: u64, array: u64) -> Mem {
    match mem_type {
        1 => Mem::Host(host),
        2 => device(dev),
        3 => Mem::Array(array),
        _ => uva(dev),
    }
}

unsafe fn check_3d(api: &'static str, p: *const Memcpy3D) {
    use gpusan_runtime::checks::{Extent, Pitched3D};
    if p.is_null() {
        return;
    }
    let c = &*p;
    let src = Pitched3D {
        mem: base_of(c.src_type, c.src_host as u64, c.src_device, c.src_array as u64),
        pitch: c.src_pitch as u64,
        rows: c.src_height as u64,
        pos: [c.src_x as u64, c.src_y as u64, c.src_z as u64],
    };
    let dst = Pitched3D {
        mem: base_of(c.dst_type, c.dst_host as u64, c.dst_device, c.dst_array as u64),
        pitch: c.dst_pitch as u64,
        rows: c.dst_height as u64,
        pos: [c.dst_x as u64, c.dst_y as u64, c.dst_z as u64],
    };
    let extent = Extent { width: c.width as u64, height: c.height as u64, depth: c.depth as u64 };
    check(api, Call::Copy3D { dst, src, extent });
}

pub unsafe fn memcpy_3d(real: unsafe extern "C" fn(*const Memcpy3D) -> CUresult, p: *const Memcpy3D) -> CUresult {
    check_3d("cuMemcpy3D", p);
    real(p)
}

pub unsafe fn memcpy_3d_async(
    real: unsafe extern "C" fn(*const Memcpy3D, Ptr) -> CUresult,
    p: *const Memcpy3D,
    s: Ptr,
) -> CUresult {
    check_3d("cuMemcpy3DAsync", p);
    real(p, s)
}

pub unsafe fn memcpy_peer(
    real: unsafe extern "C" fn(u64, Ptr, u64, Ptr, usize) -> CUresult,
    dst: u64,
    dst_ctx: Ptr,
    src: u64,
    src_ctx: Ptr,
    n: usize,
) -> CUresult {
    check("cuMemcpyPeer", Call::Copy { dst: device(dst), src: device(src), count: n as u64 });
    real(dst, dst_ctx, src, src_ctx, n)
}

pub unsafe fn memcpy_peer_async(
    real: unsafe extern "C" fn(u64, Ptr, u64, Ptr, usize, Ptr) -> CUresult,
    dst: u64,
    dst_ctx: Ptr,
    src: u64,
    src_ctx: Ptr,
    n: usize,
    s: Ptr,
) -> CUresult {
    check("cuMemcpyPeerAsync", Call::Copy { dst: device(dst), src: device(src), count: n as u64 });
    real(dst, dst_ctx, src, src_ctx, n, s)
}

// ---- host registration and virtual memory mappings ------------------------------------

pub unsafe fn mem_host_register(
    real: unsafe extern "C" fn(Ptr, usize, u32) -> CUresult,
    p: Ptr,
    size: usize,
    flags: u32,
) -> CUresult {
    let r = real(p, size, flags);
    if r == SUCCESS {
        quietly(|| record_alloc(p as u64, size as u64, AllocKind::HostRegistered, site()));
    }
    r
}

pub unsafe fn mem_host_unregister(real: unsafe extern "C" fn(Ptr) -> CUresult, p: Ptr) -> CUresult {
    // The user's memory stays; only the registration ends, at once.
    free_common(FreeApi::HostUnregister, "cuMemHostUnregister", p as u64, Release::Immediate, || real(p))
}

pub unsafe fn mem_map(
    real: unsafe extern "C" fn(u64, usize, usize, u64, u64) -> CUresult,
    ptr: u64,
    size: usize,
    offset: usize,
    handle: u64,
    flags: u64,
) -> CUresult {
    let r = real(ptr, size, offset, handle, flags);
    if r == SUCCESS {
        quietly(|| record_alloc(ptr, size as u64, AllocKind::Vmm, site()));
    }
    r
}

pub unsafe fn mem_unmap(real: unsafe extern "C" fn(u64, usize) -> CUresult, ptr: u64, size: usize) -> CUresult {
    // The address range stays reserved after an unmap, so no allocation can take it until
    // the program maps it again: unmapping at once keeps use after unmap detectable.
    free_common(FreeApi::MemUnmap, "cuMemUnmap", ptr, Release::Immediate, || real(ptr, size))
}

// ---- context teardown ------------------------------------------------------------------

/// Before a context goes away, what its kernels recorded must be read: cudart tears the
/// primary context down at exit before gpusan's own exit handler runs, and its device-wide
/// synchronization does not always pass through a driver entry point gpusan sees.
fn before_teardown() {
    quietly(crate::mirror::drain);
    if substituting() {
        quietly(crate::modules::read_counters);
    }
}

pub unsafe fn primary_ctx_release(real: unsafe extern "C" fn(i32) -> CUresult, dev: i32) -> CUresult {
    before_teardown();
    real(dev)
}

pub unsafe fn primary_ctx_reset(real: unsafe extern "C" fn(i32) -> CUresult, dev: i32) -> CUresult {
    before_teardown();
    real(dev)
}

pub unsafe fn ctx_destroy(real: unsafe extern "C" fn(Ptr) -> CUresult, ctx: Ptr) -> CUresult {
    before_teardown();
    real(ctx)
}

pub unsafe fn event_synchronize(real: unsafe extern "C" fn(Ptr) -> CUresult, e: Ptr) -> CUresult {
    after_sync(real(e))
}
