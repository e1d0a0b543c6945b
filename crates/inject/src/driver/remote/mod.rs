//! Fence mode's tenant side (issue 18, `docs/fence-design.md` §1, §6): with
//! `GPUSAN_SERVER` set, the driver below every stand-in is the manager of `gpusan serve`.
//! [`function`] gives, for the driver functions forwarded, a function of this module with
//! the driver's signature, which `driver::resolve` hands out in place of the real one; the
//! stand-ins above (and their bookkeeping) run as in any other mode. The tenant never
//! makes a context of its own: its "context" is a token, its memory lies in the partition
//! the manager gave it, its modules are fenced by the manager.
//!
//! Forwarded today ([`calls`]): what a driver-API program needs to allocate, copy, set,
//! load PTX and fatbins (their variables: `cuModuleGetGlobal`), launch (without waiting for the manager) and synchronize; device queries (its
//! partition is the memory it is told of); streams (tokens: all a tenant's streams are its
//! one stream in the manager) and events; `cuTensorMapEncodeTiled` and `…Im2col` (the
//! manager makes the map, on the tenant's partition only). A function is forwarded where a stand-in of
//! gpusan's or a door (`dlsym`, `cuGetProcAddress`) resolves it: a program linked against
//! the driver reaches only those gpusan stands in for. Other driver functions are not
//! found through gpusan (the real driver is never asked: it is never initialised in a
//! tenant), and the report names them and the manager's refusals ([`notes`]). A linked
//! program's direct calls of functions gpusan does not stand in for reach the real,
//! uninitialised driver and fail there. cudart's
//! programs are not served yet: they ask the driver for 7 private export tables
//! (`bench/results/fence/export-tables-call17.json`), which a tenant would have to emulate.

mod calls;
mod client;

use std::ffi::CStr;

pub use client::notes;

/// Whether this process is a fenced tenant (`GPUSAN_SERVER` names the manager's socket).
pub fn active() -> bool {
    client::server().is_some()
}

/// Whether `name` is a driver function (not NVRTC's, nvJitLink's or CUPTI's, which run in
/// the tenant's own process as they would anywhere).
pub fn is_driver_function(name: &CStr) -> bool {
    let n = name.to_bytes();
    n.starts_with(b"cu") && !n.starts_with(b"cupti")
}

/// A driver function looked up in a tenant that is not forwarded: its calls fail (as with
/// no driver), and the report says which.
pub fn not_forwarded(name: &CStr) {
    client::not_forwarded(&name.to_string_lossy());
}

/// The forwarding function standing for the driver function `name`, in a tenant.
pub fn function(name: &CStr) -> Option<usize> {
    if !active() {
        return None;
    }
    calls::address(name.to_bytes())
}
