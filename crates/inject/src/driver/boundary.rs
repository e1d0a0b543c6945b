//! The C boundary: every function of gpusan's that C calls (the exported stand-ins, `dlsym`
//! and `cuGetProcAddress`, `InitializeInjection` and the Sanitizer API's callbacks, the
//! library's load, exit and fork handlers) runs its own work under [`contain`], the one
//! place gpusan catches a panic (`tests/boundary.rs` holds every such function to it). A
//! panic in gpusan's bookkeeping so never unwinds into the program (which Rust turns into
//! an abort at an `extern "C"` function) and never costs the program its call: `contain`
//! returns what the caller must get instead (the driver's own answer).
//!
//! After the first such panic gpusan stops its bookkeeping for the rest of the process
//! ([`bypassed`]: stand-ins only forward, as in a forked child) rather than run code whose
//! state a panic may have left half-changed, and the report says so ([`internal_error`]),
//! with where it happened. The panic itself prints nothing ([`silence_panics`]): the
//! program's output stays its own.
//!
//! This needs `panic = "unwind"` (Rust's default): with `abort` no panic could be caught,
//! so building the library that way is refused below.
//!
//! Tests make gpusan panic on purpose through `GPUSAN_TEST_PANIC` (debug builds only, see
//! [`test_panic`]): no input is known to make it panic, and the boundary must be shown to
//! hold anyway.

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};

#[cfg(panic = "abort")]
compile_error!(
    "libgpusan_inject.so needs panic = \"unwind\": its C boundary catches gpusan's panics (driver/boundary.rs)"
);

static STOPPED: AtomicBool = AtomicBool::new(false);
/// The first internal error: where, and the panic's message. Set once, never freed, and
/// without a lock: a child forked while another thread records one must not wait on it.
static FIRST: AtomicPtr<String> = AtomicPtr::new(std::ptr::null_mut());

thread_local! {
    /// The entry from C this thread is in (see [`entry`]).
    static ENTRY: Cell<Option<&'static str>> = const { Cell::new(None) };
    /// Where the panic being caught on this thread was raised (`file:line`), from the
    /// panic hook.
    static RAISED_AT: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Whether gpusan stopped its bookkeeping after an internal error.
#[inline]
pub fn stopped() -> bool {
    STOPPED.load(Ordering::Relaxed)
}

/// Whether gpusan's own work is skipped in this process and calls only go through: a child
/// forked once CUDA was initialised ([`super::fork`]), or after an internal error.
#[inline]
pub fn bypassed() -> bool {
    super::fork::forward_only() || stopped()
}

/// Runs `work`, gpusan's part of a call that came from C at `place`; if it panics, records
/// the panic as gpusan's internal error, stops gpusan's bookkeeping, and returns
/// `recover()` instead: what the caller needs all the same (the real function's result,
/// or its call now). The only place gpusan catches a panic.
pub fn contain<R>(place: &'static str, work: impl FnOnce() -> R, recover: impl FnOnce() -> R) -> R {
    let outer = ENTRY.with(|e| e.replace(Some(place)));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work));
    ENTRY.with(|e| e.set(outer));
    match r {
        Ok(r) => r,
        Err(payload) => {
            failed(place, &*payload);
            recover()
        }
    }
}

/// The entry from C this thread is in (the innermost [`contain`]'s place): where a panic
/// caught deeper (by `state::quietly`) is said to have happened.
pub fn entry() -> &'static str {
    ENTRY.with(|e| e.get()).unwrap_or("gpusan's bookkeeping")
}

/// [`contain`] for an entry that returns nothing (a callback, an exit or fork handler).
pub fn enter(place: &'static str, work: impl FnOnce()) {
    contain(place, work, || ())
}

/// Records a caught panic and stops gpusan's bookkeeping.
fn failed(entry: &str, payload: &(dyn std::any::Any + Send)) {
    let message = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into());
    let at = RAISED_AT.try_with(|r| r.take()).ok().flatten().map(|at| format!(" at {at}")).unwrap_or_default();
    STOPPED.store(true, Ordering::Relaxed);
    let this = Box::into_raw(Box::new(format!("in {entry}{at}: {message}")));
    if FIRST.compare_exchange(std::ptr::null_mut(), this, Ordering::AcqRel, Ordering::Acquire).is_err() {
        // SAFETY: `this` was never published.
        drop(unsafe { Box::from_raw(this) });
    }
}

/// The report's note when gpusan failed inside the program.
pub fn internal_error() -> Option<String> {
    // SAFETY: a published value is never freed.
    unsafe { FIRST.load(Ordering::Acquire).as_ref() }.map(|first| {
        format!(
            "gpusan internal error ({first}): the program's calls went on unchanged, but gpusan stopped checking \
             there, so what followed was not checked"
        )
    })
}

/// At library load: panics print nothing (the library has its own copy of Rust's runtime,
/// so this hook is gpusan's alone); where each was raised is kept for the report instead.
pub fn silence_panics() {
    // Unit tests of the crate keep Rust's messages.
    #[cfg(not(test))]
    std::panic::set_hook(Box::new(|info| {
        if let Some(l) = info.location() {
            let _ = RAISED_AT.try_with(|r| *r.borrow_mut() = Some(format!("{}:{}", l.file(), l.line())));
        }
    }));
}

/// `GPUSAN_TEST_PANIC`, read once at library load ([`read_test_panic`]): reading the
/// environment inside `dlsym` would call the `getenv` a preloaded shim may have, which may
/// call `dlsym` again.
#[cfg(debug_assertions)]
static TEST_PANIC: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();

/// At library load (debug builds only: release builds have no such switch).
pub fn read_test_panic() {
    #[cfg(debug_assertions)]
    let _ = TEST_PANIC.set(std::env::var("GPUSAN_TEST_PANIC").ok());
}

/// Panics when `GPUSAN_TEST_PANIC` named `place`: a stand-in's name (before its real call),
/// `name:after` (after it), `dlsym`, `cuGetProcAddress`, or one of the other places tests
/// name (`InitializeInjection`, `runtime_callback`, `in_context`, `exit`, `late_exit`,
/// `report`, `symbolize`).
#[inline]
#[track_caller]
pub fn test_panic(place: &str) {
    #[cfg(debug_assertions)]
    if let Some(Some(at)) = TEST_PANIC.get() {
        if at == place {
            panic!("GPUSAN_TEST_PANIC at {place}");
        }
    }
    #[cfg(not(debug_assertions))]
    let _ = place;
}
