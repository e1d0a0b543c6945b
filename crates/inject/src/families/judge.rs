//! What every family's handlers share: judging a call's memory operands against the
//! registry (the call stack, the costly part, is captured only for a finding), and
//! recording what a call allocated.

use std::ffi::c_void;

use gpusan_runtime::checks::{Call, Mem};
use gpusan_runtime::registry::{AllocKind, Lookup, NewAlloc, SiteId};

use crate::driver::{current_context, real, CUDA_SUCCESS};
use crate::state::{quietly, state};

/// The program's call stack: from its first frame outside gpusan's library, however many
/// frames of gpusan's (stand-in, boundary, handler, bookkeeping) lie above it, after the
/// Python frames that led to the call when a Python interpreter runs the program.
#[inline(never)]
pub fn site() -> SiteId {
    let s = crate::pyframes::site(crate::driver::resolve::own_code());
    std::hint::black_box(s)
}

pub fn record_alloc(base: u64, size: u64, kind: AllocKind, site: SiteId) {
    crate::driver::fork::initialised();
    let (context, device) = current_context();
    let _ = state().registry.insert(NewAlloc { base, size, kind, device, context, site });
    // Graph memory is registered again at each launch of its graph: counted where its node
    // is made (`graphs::graph_alloc`).
    if crate::routes::canary::active() && kind != AllocKind::GraphNode {
        let why = match kind {
            AllocKind::HostPinned { .. } | AllocKind::HostRegistered => "host memory",
            AllocKind::Vmm => "VMM mapping (the program places those)",
            _ => "not padded",
        };
        crate::routes::canary::unguarded(why);
    }
}

/// As [`record_alloc`], for an allocation the driver made `redzone` bytes longer than asked
/// (`routes::redzones`).
pub fn record_padded_alloc(base: u64, size: u64, kind: AllocKind, site: SiteId, redzone: u64) {
    crate::driver::fork::initialised();
    let (context, device) = current_context();
    let inserted = state().registry.insert_with_redzone(NewAlloc { base, size, kind, device, context, site }, redzone);
    if inserted.is_ok() && crate::routes::canary::active() {
        crate::routes::canary::allocated(base, size, redzone, context, kind);
    }
}

/// Whether the driver knows `p` as device memory (`cuPointerGetAttribute`'s range).
/// Asked only for addresses the registry does not know, which is rare.
fn driver_knows(p: u64) -> bool {
    const RANGE_START_ADDR: i32 = 11;
    let Some(f) = real::cuPointerGetAttribute() else { return false };
    let mut start: u64 = 0;
    unsafe { f(&mut start as *mut u64 as *mut c_void, RANGE_START_ADDR, p) == CUDA_SUCCESS && start != 0 }
}

/// A pointer the API says is device memory: judged against the registry, unless gpusan
/// never saw it allocated and the driver vouches for it (module variables and the like).
/// Module variables are resolved (once per module and context) the first time an address
/// the registry does not know shows up, and the lookup retried.
pub fn device(p: u64) -> Mem {
    let known = |p| matches!(state().registry.lookup(p), Lookup::Live { .. } | Lookup::Freed { .. });
    if known(p) || (crate::variables::resolve() && known(p)) {
        return Mem::Device(p);
    }
    if driver_knows(p) {
        Mem::Untracked(p)
    } else {
        Mem::Device(p)
    }
}

/// A pointer passed where unified addressing allows host or device memory.
pub fn uva(p: u64) -> Mem {
    match state().registry.lookup(p) {
        Lookup::Live { alloc, .. } | Lookup::Freed { alloc, .. }
            if matches!(alloc.kind, AllocKind::HostPinned { .. } | AllocKind::HostRegistered) =>
        {
            Mem::Host(p)
        }
        Lookup::Live { .. } | Lookup::Freed { .. } => Mem::Device(p),
        Lookup::Outside { .. } => Mem::Host(p),
    }
}

thread_local! {
    /// Findings the driver-level checks made on this thread: a runtime-API callback (see
    /// `doors::sanitizer`) does not report a call again that a driver hook inside it reported.
    pub static FOUND_ON_THREAD: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Judges the call `call` describes, made under the guard (its operands are looked up in
/// the registry and may ask the driver); the call stack (the costly part) is captured only
/// for a finding.
pub fn check<'a>(api: &'static str, call: impl FnOnce() -> Call<'a>) {
    quietly(|| {
        let call = call();
        let st = state();
        let mut findings = gpusan_runtime::checks::check_call(&st.registry, api, &call);
        if !findings.is_empty() {
            let s = site();
            for f in &mut findings {
                f.name_variable(crate::variables::name_of);
                st.finding(f, s);
            }
            FOUND_ON_THREAD.with(|n| n.set(n.get() + findings.len() as u64));
        }
    });
}
