//! Fence mode's tenant side (issue 18, `docs/fence-design.md` §1, §6): with
//! `GPUSAN_SERVER` set, the driver below every stand-in is the manager of `gpusan serve`.
//! [`function`] gives, for the driver functions forwarded, a function of this module with
//! the driver's signature, which `driver::resolve` hands out in place of the real one; the
//! stand-ins above (and their bookkeeping) run as in any other mode. The tenant never
//! makes a context of its own: its "context" is a token, its memory lies in the partition
//! the manager gave it, its modules are fenced by the manager.
//!
//! Forwarded today: what a driver-API program needs to allocate, copy, load PTX, launch and
//! synchronize ([`calls`]). Other driver functions reach the real driver, uninitialised in
//! a tenant, and fail there; the report names the manager's refusals ([`notes`]).
//! cudart's programs (which find the driver through `cuGetProcAddress`) are not forwarded
//! yet.

mod calls;
mod client;

use std::ffi::CStr;

pub use client::notes;

/// Whether this process is a fenced tenant (`GPUSAN_SERVER` names the manager's socket).
pub fn active() -> bool {
    client::server().is_some()
}

/// The forwarding function standing for the driver function `name`, in a tenant.
pub fn function(name: &CStr) -> Option<usize> {
    if !active() {
        return None;
    }
    calls::address(name.to_bytes())
}
