//! Where a GPU fault shows: every stand-in's real result passes [`seen`], and a sticky
//! kernel error (`gpusan_runtime::fault::fault_name`) goes to the handler the routes set
//! (`routes::faults::seen`, which makes it a finding once per context). The bottom layer
//! only carries the result up: the check is one comparison on every call.

use std::sync::OnceLock;

use super::types::CUresult;

static HANDLER: OnceLock<fn(&'static str, CUresult)> = OnceLock::new();

/// Sets what [`seen`] calls with a fault: the stand-in's name and the error.
pub fn set_handler(handler: fn(&'static str, CUresult)) {
    let _ = HANDLER.set(handler);
}

/// The result `r` of the real function behind stand-in `entry`.
#[inline]
pub fn seen(entry: &'static str, r: CUresult) {
    if matches!(r, 226 | 700..=721) && gpusan_runtime::fault::fault_name(r).is_some() {
        if let Some(f) = HANDLER.get() {
            f(entry, r);
        }
    }
}
