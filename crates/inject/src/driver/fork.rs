//! CUDA across `fork`. A child made once the driver was initialised cannot use CUDA (NVIDIA:
//! any use before `exec` is undefined; in practice every call fails): there gpusan's
//! stand-ins only forward ([`forward_only`]), since the parent's allocations, modules and
//! contexts mean nothing in the child and judging its calls against them would invent
//! findings. A child made before initialisation (PyTorch's `multiprocessing` workers, whose
//! parent imported torch but never touched the GPU) initialises CUDA itself and is checked
//! like any process: its gpusan state starts empty (`gpusan_runtime::per_process`).
//!
//! `gpusan run --target-processes application-only` checks the application alone, as
//! compute-sanitizer's option does: the library still loads into every process the
//! application starts (`LD_PRELOAD` is inherited), but in any process other than the
//! direct child of `gpusan run` ([`gpusan_abi::env::ONLY_CHILD_OF`]) it only forwards and
//! leaves no report ([`not_targeted`]).

use std::sync::atomic::{AtomicBool, Ordering};

/// The driver was initialised in this process or in the one it was forked from.
static INITIALISED: AtomicBool = AtomicBool::new(false);
/// This process was forked after [`INITIALISED`] (or from such a process).
static FORWARD_ONLY: AtomicBool = AtomicBool::new(false);
/// This process is not the one `gpusan run` checks (`--target-processes application-only`).
static NOT_TARGETED: AtomicBool = AtomicBool::new(false);

/// Whether the run checks only its application and this process is another.
#[inline]
pub fn not_targeted() -> bool {
    NOT_TARGETED.load(Ordering::Relaxed)
}

/// At library load: whether this process is the application `gpusan run` started, where
/// only that one is checked.
pub fn at_load() {
    let Some(parent) = std::env::var(gpusan_abi::env::ONLY_CHILD_OF).ok().filter(|v| !v.is_empty()) else {
        return;
    };
    // SAFETY: getppid has no preconditions.
    let ours = unsafe { libc::getppid() }.to_string();
    if ours != parent {
        stop_targeting();
    }
}

fn stop_targeting() {
    NOT_TARGETED.store(true, Ordering::Relaxed);
    FORWARD_ONLY.store(true, Ordering::Relaxed);
}

/// The driver is initialised: a `cuInit` succeeded, or it handed out memory (which it
/// does only once initialised).
pub fn initialised() {
    if !INITIALISED.load(Ordering::Relaxed) {
        INITIALISED.store(true, Ordering::Relaxed);
    }
}

/// Whether gpusan only forwards calls in this process (see the module's comment).
#[inline]
pub fn forward_only() -> bool {
    FORWARD_ONLY.load(Ordering::Relaxed)
}

/// In a child just made by `fork`, before it runs anything else.
pub fn in_child() {
    // A child of the application is another process than the application.
    if std::env::var_os(gpusan_abi::env::ONLY_CHILD_OF).is_some_and(|v| !v.is_empty()) {
        stop_targeting();
    }
    if INITIALISED.load(Ordering::Relaxed) {
        FORWARD_ONLY.store(true, Ordering::Relaxed);
    }
}
