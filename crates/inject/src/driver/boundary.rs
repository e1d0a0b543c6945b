//! The C boundary: every function gpusan exports runs its own work under [`contain`], so a
//! panic in gpusan's bookkeeping never unwinds into the program (which Rust turns into an
//! abort at an `extern "C"` function) and never costs the program its call. After the
//! first such panic gpusan stops its bookkeeping for the rest of the process ([`stopped`]:
//! stand-ins only forward, as in a forked child) rather than run code whose state a panic
//! may have left half-changed, and the report says so ([`internal_error`]).
//!
//! Tests make gpusan panic on purpose through `GPUSAN_TEST_PANIC` (debug builds only, see
//! [`test_panic`]): no input is known to make it panic, and the boundary must be shown to
//! hold anyway.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

static STOPPED: AtomicBool = AtomicBool::new(false);
/// The first internal error: where, and the panic's message.
static FIRST: Mutex<Option<String>> = Mutex::new(None);

/// Whether gpusan stopped its bookkeeping after an internal error.
#[inline]
pub fn stopped() -> bool {
    STOPPED.load(Ordering::Relaxed)
}

/// Runs `work`; if it panics, records the panic as gpusan's internal error in `place`, stops
/// gpusan's bookkeeping, and returns `recover()` instead (what the program's call needs:
/// the real function's result, or its call now).
pub fn contain<R>(place: &str, work: impl FnOnce() -> R, recover: impl FnOnce() -> R) -> R {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)) {
        Ok(r) => r,
        Err(payload) => {
            failed(place, &*payload);
            recover()
        }
    }
}

/// Records a panic caught at the boundary or inside gpusan's bookkeeping (`quietly`).
pub fn failed(place: &str, payload: &(dyn std::any::Any + Send)) {
    let message = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into());
    STOPPED.store(true, Ordering::Relaxed);
    let mut first = FIRST.lock().unwrap_or_else(|p| p.into_inner());
    if first.is_none() {
        *first = Some(format!("{place}: {message}"));
    }
}

/// The report's note when gpusan failed inside the program.
pub fn internal_error() -> Option<String> {
    FIRST.lock().unwrap_or_else(|p| p.into_inner()).as_ref().map(|first| {
        format!(
            "gpusan internal error ({first}): the program's calls went on unchanged, but gpusan stopped checking \
             there, so what followed was not checked"
        )
    })
}

/// `GPUSAN_TEST_PANIC`, read once at library load ([`read_test_panic`]): reading the
/// environment inside `dlsym` would call the `getenv` a preloaded shim may have, which may
/// call `dlsym` again.
static TEST_PANIC: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();

/// At library load (debug builds only: release builds have no such switch).
pub fn read_test_panic() {
    #[cfg(debug_assertions)]
    let _ = TEST_PANIC.set(std::env::var("GPUSAN_TEST_PANIC").ok());
}

/// Panics when `GPUSAN_TEST_PANIC` named `place`: a stand-in's name (before its real call),
/// `name:after` (after it), `dlsym` or `cuGetProcAddress`.
#[inline]
pub fn test_panic(place: &str) {
    if let Some(Some(at)) = TEST_PANIC.get() {
        if at == place {
            panic!("GPUSAN_TEST_PANIC at {place}");
        }
    }
}
