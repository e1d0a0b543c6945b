//! The API families: one file per family of driver functions, each holding the stand-ins it
//! exports (declared with `hooks!`) and their handlers. A handler calls the real function
//! exactly as the program asked and does gpusan's bookkeeping around it under `quietly`;
//! what concerns kernels it hands to the routes (`crate::routes`).
//!
//! A new family (NVRTC, `cuLink*`/nvJitLink, an allocator's hooks) is a new file here with
//! its own `hooks!` block, listed in [`hooks`] so the doors can hand its stand-ins out.
//! [`pools`] exports functions of gpusan's own instead (`include/gpusan_pools.h`), which pool
//! allocators call.

pub mod contexts;
pub mod copies;
pub mod export_tables;
pub mod graphs;
pub mod ipc;
pub mod jitlink;
pub mod judge;
pub mod labels;
pub mod launches;
pub mod link;
pub mod managed;
pub mod memory;
pub mod modules;
pub mod nvrtc;
pub mod ordered;
pub mod pools;
pub mod streams;
pub mod tenant;
pub mod tensormaps;

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use crate::driver::Hook;

/// Every stand-in of every family.
pub fn hooks() -> Vec<Hook> {
    let mut all = memory::hooks();
    all.extend(copies::hooks());
    all.extend(modules::hooks());
    all.extend(launches::hooks());
    all.extend(graphs::hooks());
    all.extend(ipc::hooks());
    all.extend(managed::hooks());
    all.extend(streams::hooks());
    all.extend(contexts::hooks());
    all.extend(tensormaps::hooks());
    all.extend(nvrtc::hooks());
    all.extend(link::hooks());
    all.extend(jitlink::hooks());
    all.extend(export_tables::hooks());
    all.extend(tenant::hooks());
    all
}

pub fn by_name(name: &[u8]) -> Option<Hook> {
    hooks().into_iter().find(|h| h.name.to_bytes() == name)
}

/// The stand-in for the driver function at `addr`, if any.
pub fn by_real_address(addr: usize) -> Option<Hook> {
    // `cuGetProcAddress` answers with driver functions only: the libraries' stand-ins
    // (NVRTC, nvJitLink) are not looked up, which would look for their library each time.
    hooks().into_iter().filter(|h| !crate::driver::resolve::loaded_late(h.name)).find(|h| h.real.driver(h.name) == addr)
}

/// How often each stand-in was called (those called at all).
pub fn call_counts() -> BTreeMap<String, u64> {
    hooks()
        .into_iter()
        .filter_map(|h| {
            let n = h.calls.existing().map_or(0, |c| c.load(Ordering::Relaxed));
            (n > 0).then(|| (h.name.to_string_lossy().into_owned(), n))
        })
        .collect()
}
