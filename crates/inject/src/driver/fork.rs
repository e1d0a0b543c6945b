//! CUDA across `fork`. A child made once the driver was initialised cannot use CUDA (NVIDIA:
//! any use before `exec` is undefined; in practice every call fails): there gpusan's
//! stand-ins only forward ([`forward_only`]), since the parent's allocations, modules and
//! contexts mean nothing in the child and judging its calls against them would invent
//! findings. A child made before initialisation (PyTorch's `multiprocessing` workers, whose
//! parent imported torch but never touched the GPU) initialises CUDA itself and is checked
//! like any process: its gpusan state starts empty (`gpusan_runtime::per_process`).

use std::sync::atomic::{AtomicBool, Ordering};

/// The driver was initialised in this process or in the one it was forked from.
static INITIALISED: AtomicBool = AtomicBool::new(false);
/// This process was forked after [`INITIALISED`] (or from such a process).
static FORWARD_ONLY: AtomicBool = AtomicBool::new(false);

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
    if INITIALISED.load(Ordering::Relaxed) {
        FORWARD_ONLY.store(true, Ordering::Relaxed);
    }
}
