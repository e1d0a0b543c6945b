//! CUPTI's switches, watched: a profiler (torch.profiler through Kineto, any tool built on
//! CUPTI) turns activity records on or subscribes to callbacks through these functions.
//! While gpusan's Compute Sanitizer API session is on, such a profiler may record no kernels
//! (seen on the H100), and the report says so: only when a profiler actually switched on,
//! not whenever `libcupti` is merely loaded (PyTorch loads it at import, so every PyTorch
//! run would carry a warning that does not apply).
//!
//! Each stand-in records the switch and hands the call to CUPTI's own function: the next
//! definition after gpusan's, or the loaded `libcupti` when it sits in a library's local
//! scope (Python loads PyTorch with `RTLD_LOCAL`). A call that finds no CUPTI at all (it
//! cannot happen: the caller was linked against it) gets `CUPTI_ERROR_UNKNOWN`.

use std::ffi::{c_int, c_void, CStr};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::driver::{boundary, resolve};

/// `CUPTI_ERROR_UNKNOWN`.
const UNKNOWN: c_int = 999;

static SWITCHED_ON: AtomicBool = AtomicBool::new(false);

/// Whether a profiler switched CUPTI on in this process.
pub fn switched_on() -> bool {
    SWITCHED_ON.load(Ordering::Relaxed)
}

/// CUPTI's own `name`, found now (these calls are rare: a profiler's start).
fn real(name: &CStr) -> Option<usize> {
    Some(resolve::find_now(name)).filter(|&f| f != 0)
}

/// `cuptiActivityEnable(kind)`.
#[no_mangle]
pub extern "C" fn cuptiActivityEnable(kind: c_int) -> c_int {
    SWITCHED_ON.store(true, Ordering::Relaxed);
    boundary::contain(
        "cuptiActivityEnable",
        || match real(c"cuptiActivityEnable") {
            // SAFETY: CUPTI's function of this signature (cupti_activity.h).
            Some(f) => unsafe { std::mem::transmute::<usize, unsafe extern "C" fn(c_int) -> c_int>(f)(kind) },
            None => UNKNOWN,
        },
        || UNKNOWN,
    )
}

/// `cuptiActivityEnableContext(context, kind)`.
#[no_mangle]
pub extern "C" fn cuptiActivityEnableContext(context: *mut c_void, kind: c_int) -> c_int {
    SWITCHED_ON.store(true, Ordering::Relaxed);
    boundary::contain(
        "cuptiActivityEnableContext",
        || match real(c"cuptiActivityEnableContext") {
            // SAFETY: CUPTI's function of this signature (cupti_activity.h).
            Some(f) => unsafe {
                std::mem::transmute::<usize, unsafe extern "C" fn(*mut c_void, c_int) -> c_int>(f)(context, kind)
            },
            None => UNKNOWN,
        },
        || UNKNOWN,
    )
}

/// `cuptiSubscribe(subscriber, callback, userdata)`.
#[no_mangle]
pub extern "C" fn cuptiSubscribe(subscriber: *mut c_void, callback: *mut c_void, userdata: *mut c_void) -> c_int {
    SWITCHED_ON.store(true, Ordering::Relaxed);
    boundary::contain(
        "cuptiSubscribe",
        || match real(c"cuptiSubscribe") {
            // SAFETY: CUPTI's function of this signature (cupti_events.h, cupti_callbacks.h).
            Some(f) => unsafe {
                type F = unsafe extern "C" fn(*mut c_void, *mut c_void, *mut c_void) -> c_int;
                std::mem::transmute::<usize, F>(f)(subscriber, callback, userdata)
            },
            None => UNKNOWN,
        },
        || UNKNOWN,
    )
}
