//! Test marks (`gpusan_set_label`, the one C function of this family): a program names
//! what it is doing now, a pytest test id say, and the findings drained after carry the
//! name (the report's `label`, "during: …" in text). Kernels run asynchronously, so their
//! records are read first, with every context gpusan checks synchronized: a finding of
//! the test that ends lands in that test, not in the next.
//!
//! Safe from any thread and before gpusan started (then a no-op that says so); the program
//! finds it with `dlsym(RTLD_DEFAULT, "gpusan_set_label")`, absent without gpusan.

use std::ffi::{c_char, c_int, CStr};

use crate::driver::{boundary, real, CUDA_SUCCESS};
use crate::routes::{faults, mirror};
use crate::state::{quietly, state};

/// Longer labels are cut (at a character boundary): a label is a name, not a log.
const MAX_LABEL: usize = 4096;

/// Sets the label findings carry from now on; `label` null clears it. Returns 0 when set,
/// 1 when gpusan's bookkeeping is off in this process (a child forked after CUDA started,
/// or after an internal error), 2 when the label is not valid UTF-8.
///
/// # Safety
/// `label` is null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn gpusan_set_label(label: *const c_char) -> c_int {
    let label = if label.is_null() {
        None
    } else {
        match unsafe { CStr::from_ptr(label) }.to_str() {
            Ok(l) => Some(cut(l).to_string()),
            Err(_) => return 2,
        }
    };
    boundary::contain("gpusan_set_label", || set(label), || 1)
}

fn set(label: Option<String>) -> c_int {
    let done = quietly(|| {
        drain_kernels();
        state().set_label(label);
    });
    if done.is_some() {
        0
    } else {
        1
    }
}

/// What kernels launched so far recorded, read under the label they ran under. A context
/// whose stream is being captured is not synchronized (that would end the capture): its
/// records are read as they are.
fn drain_kernels() {
    if !mirror::active() {
        return;
    }
    if !crate::capture::any() {
        if let Some(sync) = real::cuCtxSynchronize() {
            for context in mirror::contexts() {
                real::in_context(context, || {
                    // SAFETY: the driver's `cuCtxSynchronize`, in the context pushed above.
                    let r = unsafe { sync() };
                    if r == CUDA_SUCCESS {
                        faults::synced_context();
                    } else {
                        // A kernel of the test that ends faulted: its finding is that test's.
                        faults::seen("cuCtxSynchronize", r);
                    }
                });
            }
        }
    }
    mirror::drain();
}

fn cut(label: &str) -> &str {
    if label.len() <= MAX_LABEL {
        return label;
    }
    let mut end = MAX_LABEL;
    while !label.is_char_boundary(end) {
        end -= 1;
    }
    &label[..end]
}
