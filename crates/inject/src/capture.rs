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
//! - [`global_of`] asks for a module variable in the relaxed mode.
//!
//! Outside a capture nothing changes: copies stay synchronous on the legacy stream, which
//! orders them after the program's work in blocking streams (a kernel still running never
//! sees the table change under it). Captures are known from the program's calls to
//! `cuStreamBeginCapture*` and `cuStreamEndCapture`, which gpusan wraps, so asking costs an
//! atomic load.

use std::collections::{HashMap, HashSet};
use std::ffi::{c_void, CString};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use gpusan_runtime::locks;
use gpusan_runtime::per_process::PerProcess;

use crate::driver::{current_context, real, CUresult, CUstream, Loaded, CUDA_SUCCESS};

const CAPTURE_MODE_RELAXED: i32 = 2;
const STREAM_NON_BLOCKING: u32 = 1;

/// Streams capturing now (begun through gpusan's stand-ins and not ended), and how many.
static CAPTURING: PerProcess<Mutex<Option<HashSet<u64>>>> = PerProcess::new(|| Mutex::new(None));
static ACTIVE: PerProcess<AtomicUsize> = PerProcess::new(|| AtomicUsize::new(0));

/// Whether any stream of the process is capturing.
pub fn any() -> bool {
    ACTIVE.get().load(Ordering::Acquire) > 0
}

fn capturing<R>(f: impl FnOnce(&mut HashSet<u64>) -> R) -> R {
    let mut g = locks::lock(CAPTURING.get());
    let set = g.get_or_insert_with(HashSet::new);
    let r = f(set);
    ACTIVE.get().store(set.len(), Ordering::Release);
    r
}

/// The driver's own word on whether `stream` is capturing (`ACTIVE` or `INVALIDATED`:
/// either way its work does not run now).
pub fn stream_is_capturing(stream: CUstream) -> bool {
    let Some(f) = real::cuStreamIsCapturing() else { return false };
    let mut status = 0u32;
    unsafe { f(stream, &mut status) == CUDA_SUCCESS && status != 0 }
}

/// After the program's `cuStreamBeginCapture*` on `stream` returned `r`.
pub fn began(stream: CUstream, r: CUresult) {
    if r == CUDA_SUCCESS {
        capturing(|s| s.insert(stream as u64));
    }
}

/// After the program's `cuStreamEndCapture` on `stream`: the capture is over unless the
/// driver refused to end it (wrong thread, not capturing). True when this ended the last
/// capture of the process: work gpusan held back during captures can be done now.
pub fn ended(stream: CUstream) -> bool {
    if stream_is_capturing(stream) {
        return false;
    }
    capturing(|s| s.remove(&(stream as u64)));
    !any()
}

/// Runs `f` (gpusan's own driver calls) in the relaxed capture interaction mode when a
/// capture is going on; the thread's mode is restored after, even if `f` panics.
pub fn relaxed<R>(f: impl FnOnce() -> R) -> R {
    type Exchange = unsafe extern "C" fn(*mut i32) -> CUresult;
    struct Restore(Option<(Exchange, i32)>);
    impl Drop for Restore {
        fn drop(&mut self) {
            if let Some((exchange, mut mode)) = self.0 {
                unsafe { exchange(&mut mode) };
            }
        }
    }
    let mut restore = Restore(None);
    if any() {
        if let Some(exchange) = real::cuThreadExchangeStreamCaptureMode() {
            let mut mode = CAPTURE_MODE_RELAXED;
            if unsafe { exchange(&mut mode) } == CUDA_SUCCESS {
                restore.0 = Some((exchange, mode));
            }
        }
    }
    f()
}

/// Context → gpusan's stream in it.
static STREAMS: PerProcess<Mutex<Option<HashMap<u64, u64>>>> = PerProcess::new(|| Mutex::new(None));

/// gpusan's non-blocking stream in the current context, made at its first use (the device
/// ABI makes it when it sets a context up, so normally outside any capture).
pub fn own_stream() -> Option<CUstream> {
    let (context, _) = current_context();
    if context == 0 {
        return None;
    }
    let known = locks::lock(STREAMS.get()).as_ref().and_then(|m| m.get(&context).copied());
    if let Some(s) = known {
        return Some(s as CUstream);
    }
    // Made with no lock held: another thread's copy must not wait for this driver call.
    let create = real::cuStreamCreate()?;
    let mut stream: CUstream = std::ptr::null_mut();
    if relaxed(|| unsafe { create(&mut stream, STREAM_NON_BLOCKING) }) != CUDA_SUCCESS || stream.is_null() {
        return None;
    }
    let mut g = locks::lock(STREAMS.get());
    let kept = *g.get_or_insert_with(HashMap::new).entry(context).or_insert(stream as u64);
    drop(g);
    if kept != stream as u64 {
        // Another thread made one first: its stream is the context's, this one goes.
        if let Some(destroy) = real::cuStreamDestroy_v2() {
            relaxed(|| unsafe { destroy(stream) });
        }
    }
    Some(kept as CUstream)
}

/// `context` was destroyed, and gpusan's stream in it with it.
pub fn context_gone(context: u64) {
    if let Some(streams) = locks::lock(STREAMS.get()).as_mut() {
        streams.remove(&context);
    }
}

/// Waits for gpusan's stream only (never for the program's).
fn sync_own(stream: CUstream) -> bool {
    let Some(f) = real::cuStreamSynchronize() else { return false };
    unsafe { f(stream) == CUDA_SUCCESS }
}

/// Copies `n` bytes from the host to device memory, complete when this returns.
///
/// # Safety
/// `src` must be readable for `n` bytes and `dst` device memory of at least `n` bytes.
pub unsafe fn htod(dst: u64, src: *const c_void, n: usize) -> bool {
    if n == 0 {
        return true;
    }
    if !any() {
        let Some(f) = real::cuMemcpyHtoD_v2() else { return false };
        return f(dst, src, n) == CUDA_SUCCESS;
    }
    relaxed(|| {
        let f = real::cuMemcpyHtoDAsync_v2();
        let (Some(stream), Some(f)) = (own_stream(), f) else { return false };
        f(dst, src, n, stream) == CUDA_SUCCESS && sync_own(stream)
    })
}

/// Copies `n` bytes from device memory to the host, complete when this returns.
///
/// # Safety
/// `dst` must be writable for `n` bytes and `src` device memory of at least `n` bytes.
pub unsafe fn dtoh(dst: *mut c_void, src: u64, n: usize) -> bool {
    if n == 0 {
        return true;
    }
    if !any() {
        let Some(f) = real::cuMemcpyDtoH_v2() else { return false };
        return f(dst, src, n) == CUDA_SUCCESS;
    }
    relaxed(|| {
        let f = real::cuMemcpyDtoHAsync_v2();
        let (Some(stream), Some(f)) = (own_stream(), f) else { return false };
        f(dst, src, n, stream) == CUDA_SUCCESS && sync_own(stream)
    })
}

/// Address and size of a module variable, through the driver (not gpusan's own hooks).
pub fn global_of(loaded: Loaded, name: &str) -> Option<(u64, usize)> {
    let cname = CString::new(name).ok()?;
    let (f, handle) = match loaded {
        Loaded::Module(h) => (real::cuModuleGetGlobal_v2()?, h),
        Loaded::Library(h) => (real::cuLibraryGetGlobal()?, h),
    };
    let (mut p, mut size) = (0u64, 0usize);
    // Asking for a variable loads the module into the context if it was not yet.
    (relaxed(|| unsafe { f(&mut p, &mut size, handle as *mut c_void, cname.as_ptr()) }) == CUDA_SUCCESS)
        .then_some((p, size))
}
