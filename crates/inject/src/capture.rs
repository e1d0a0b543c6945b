//! gpusan's own driver calls while the program captures a stream into a graph.
//!
//! During a capture the driver refuses "potentially unsafe" calls (allocation, synchronous
//! copies, synchronizations) made in the capture's interaction mode, and refuses work on
//! the legacy stream in any mode while a blocking stream captures; either refusal
//! invalidates the program's capture (`cuThreadExchangeStreamCaptureMode` in `cuda.h`).
//! gpusan's runtime calls the driver from inside the program's launches and module loads
//! (cudart loads a module lazily, at the first launch of one of its kernels, which may be a
//! captured one), so every such call goes through here:
//! - [`relaxed`] runs gpusan's calls in the relaxed interaction mode, which the driver
//!   allows alongside any capture, and restores the thread's mode after;
//! - [`htod`] and [`dtoh`] copy through a stream of gpusan's own (one per context,
//!   non-blocking, so it never waits for a captured stream) and wait for that stream only.
//!
//! Outside a capture nothing changes: copies stay synchronous on the legacy stream, which
//! orders them after the program's work in blocking streams (a kernel still running never
//! sees the table change under it). Captures are known from the program's calls to
//! `cuStreamBeginCapture*` and `cuStreamEndCapture`, which gpusan wraps, so asking costs an
//! atomic load.

use std::collections::{HashMap, HashSet};
use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::hooks::{driver_fn, CUresult};

type Ptr = *mut c_void;
const SUCCESS: CUresult = 0;
const CAPTURE_MODE_RELAXED: i32 = 2;
const STREAM_NON_BLOCKING: u32 = 1;

/// Streams capturing now (begun through gpusan's wrappers and not ended), and how many.
static CAPTURING: Mutex<Option<HashSet<u64>>> = Mutex::new(None);
static ACTIVE: AtomicUsize = AtomicUsize::new(0);

/// Whether any stream of the process is capturing.
pub fn any() -> bool {
    ACTIVE.load(Ordering::Acquire) > 0
}

fn capturing<R>(f: impl FnOnce(&mut HashSet<u64>) -> R) -> R {
    let mut g = CAPTURING.lock().unwrap_or_else(|p| p.into_inner());
    let set = g.get_or_insert_with(HashSet::new);
    let r = f(set);
    ACTIVE.store(set.len(), Ordering::Release);
    r
}

/// The driver's own word on whether `stream` is capturing (`ACTIVE` or `INVALIDATED`:
/// either way its work does not run now).
pub fn stream_is_capturing(stream: Ptr) -> bool {
    static F: AtomicUsize = AtomicUsize::new(0);
    let f = driver_fn(&F, c"cuStreamIsCapturing");
    if f == 0 {
        return false;
    }
    let f: unsafe extern "C" fn(Ptr, *mut u32) -> CUresult = unsafe { std::mem::transmute(f) };
    let mut status = 0u32;
    unsafe { f(stream, &mut status) == SUCCESS && status != 0 }
}

/// After the program's `cuStreamBeginCapture*` on `stream` returned `r`.
pub fn began(stream: Ptr, r: CUresult) {
    if r == SUCCESS {
        capturing(|s| s.insert(stream as u64));
    }
}

/// After the program's `cuStreamEndCapture` on `stream`: the capture is over unless the
/// driver refused to end it (wrong thread, not capturing). Work gpusan held back during
/// captures is done once none is left.
pub fn ended(stream: Ptr) {
    if stream_is_capturing(stream) {
        return;
    }
    capturing(|s| s.remove(&(stream as u64)));
    if !any() {
        crate::hooks::after_captures();
    }
}

/// Runs `f` (gpusan's own driver calls) in the relaxed capture interaction mode when a
/// capture is going on; the thread's mode is restored after, even if `f` panics.
pub fn relaxed<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(Option<(usize, i32)>);
    impl Drop for Restore {
        fn drop(&mut self) {
            if let Some((exchange, mut mode)) = self.0 {
                let exchange: unsafe extern "C" fn(*mut i32) -> CUresult = unsafe { std::mem::transmute(exchange) };
                unsafe { exchange(&mut mode) };
            }
        }
    }
    static EXCHANGE: AtomicUsize = AtomicUsize::new(0);
    let mut restore = Restore(None);
    if any() {
        let exchange = driver_fn(&EXCHANGE, c"cuThreadExchangeStreamCaptureMode");
        if exchange != 0 {
            let call: unsafe extern "C" fn(*mut i32) -> CUresult = unsafe { std::mem::transmute(exchange) };
            let mut mode = CAPTURE_MODE_RELAXED;
            if unsafe { call(&mut mode) } == SUCCESS {
                restore.0 = Some((exchange, mode));
            }
        }
    }
    f()
}

/// Context → gpusan's stream in it.
static STREAMS: Mutex<Option<HashMap<u64, u64>>> = Mutex::new(None);

/// gpusan's non-blocking stream in the current context, made at its first use (the device
/// ABI makes it when it sets a context up, so normally outside any capture).
pub fn own_stream() -> Option<Ptr> {
    static CREATE: AtomicUsize = AtomicUsize::new(0);
    let (context, _) = crate::hooks::current_context();
    if context == 0 {
        return None;
    }
    let mut g = STREAMS.lock().unwrap_or_else(|p| p.into_inner());
    let streams = g.get_or_insert_with(HashMap::new);
    if let Some(&s) = streams.get(&context) {
        return Some(s as Ptr);
    }
    let create = driver_fn(&CREATE, c"cuStreamCreate");
    if create == 0 {
        return None;
    }
    let create: unsafe extern "C" fn(*mut Ptr, u32) -> CUresult = unsafe { std::mem::transmute(create) };
    let mut stream: Ptr = std::ptr::null_mut();
    if relaxed(|| unsafe { create(&mut stream, STREAM_NON_BLOCKING) }) != SUCCESS || stream.is_null() {
        return None;
    }
    streams.insert(context, stream as u64);
    Some(stream)
}

/// Waits for gpusan's stream only (never for the program's).
fn sync_own(stream: Ptr) -> bool {
    static SYNC: AtomicUsize = AtomicUsize::new(0);
    let f = driver_fn(&SYNC, c"cuStreamSynchronize");
    if f == 0 {
        return false;
    }
    let f: unsafe extern "C" fn(Ptr) -> CUresult = unsafe { std::mem::transmute(f) };
    unsafe { f(stream) == SUCCESS }
}

/// Copies `n` bytes from the host to device memory, complete when this returns.
///
/// # Safety
/// `src` must be readable for `n` bytes and `dst` device memory of at least `n` bytes.
pub unsafe fn htod(dst: u64, src: *const c_void, n: usize) -> bool {
    static SYNC: AtomicUsize = AtomicUsize::new(0);
    static ASYNC: AtomicUsize = AtomicUsize::new(0);
    if n == 0 {
        return true;
    }
    if !any() {
        let f = driver_fn(&SYNC, c"cuMemcpyHtoD_v2");
        if f == 0 {
            return false;
        }
        let f: unsafe extern "C" fn(u64, *const c_void, usize) -> CUresult = std::mem::transmute(f);
        return f(dst, src, n) == SUCCESS;
    }
    relaxed(|| {
        let f = driver_fn(&ASYNC, c"cuMemcpyHtoDAsync_v2");
        let Some(stream) = own_stream().filter(|_| f != 0) else { return false };
        let f: unsafe extern "C" fn(u64, *const c_void, usize, Ptr) -> CUresult = std::mem::transmute(f);
        f(dst, src, n, stream) == SUCCESS && sync_own(stream)
    })
}

/// Copies `n` bytes from device memory to the host, complete when this returns.
///
/// # Safety
/// `dst` must be writable for `n` bytes and `src` device memory of at least `n` bytes.
pub unsafe fn dtoh(dst: *mut c_void, src: u64, n: usize) -> bool {
    static SYNC: AtomicUsize = AtomicUsize::new(0);
    static ASYNC: AtomicUsize = AtomicUsize::new(0);
    if n == 0 {
        return true;
    }
    if !any() {
        let f = driver_fn(&SYNC, c"cuMemcpyDtoH_v2");
        if f == 0 {
            return false;
        }
        let f: unsafe extern "C" fn(*mut c_void, u64, usize) -> CUresult = std::mem::transmute(f);
        return f(dst, src, n) == SUCCESS;
    }
    relaxed(|| {
        let f = driver_fn(&ASYNC, c"cuMemcpyDtoHAsync_v2");
        let Some(stream) = own_stream().filter(|_| f != 0) else { return false };
        let f: unsafe extern "C" fn(*mut c_void, u64, usize, Ptr) -> CUresult = std::mem::transmute(f);
        f(dst, src, n, stream) == SUCCESS && sync_own(stream)
    })
}
