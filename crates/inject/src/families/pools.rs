//! Pool allocators' blocks (`include/gpusan_pools.h`): the C functions a pool calls, through
//! `dlsym(RTLD_DEFAULT, …)`, for every block it hands out and takes back (PyTorch's caching
//! allocator through its trace hook, CuPy's pools through a memory hook, and the NVTX
//! memory API through `doors::nvtx`). Each block becomes an allocation nested inside its
//! segment (`gpusan_runtime::registry::blocks`), so a kernel's access past a tensor inside
//! the pool's segment is out of bounds of that tensor.
//!
//! Called on every tensor allocation: one registry write lock and the call stack, no
//! driver call and no system call; the table reaches the GPU at the next launch, as after
//! any allocation. A block's free reaches kernels once those launched before it on its
//! stream are done (`routes::pool_frees`). Never a panic across the boundary: a caught
//! one answers [`INTERNAL`].

use std::ffi::c_int;

use gpusan_runtime::pool_blocks::{BlockFree, PoolSource};
use gpusan_runtime::registry::blocks::{NewBlock, Show};

use super::judge::site;
use crate::driver::boundary;
use crate::routes::canary_diag;
use crate::state::state;

/// Recorded.
pub const OK: c_int = 0;
/// gpusan keeps no books in this process (a child forked after CUDA started, or after an
/// internal error): the call did nothing.
pub const BYPASSED: c_int = 1;
/// A null pointer, a size of 0, or a range that wraps.
pub const INVALID: c_int = 2;
/// gpusan failed inside the call (its bookkeeping stops; the program goes on).
pub const INTERNAL: c_int = 3;
/// `free`: no block starts at the pointer.
pub const UNKNOWN: c_int = 4;
/// `free`: the block is already freed.
pub const FREED_TWICE: c_int = 5;

/// The C ABI's `source` of NVTX regions.
pub const SOURCE_NVTX: u32 = 4;
/// The stream of a free that names none (NVTX's): shown to kernels only at a context
/// synchronization (`routes::pool_frees`).
pub const UNKNOWN_STREAM: u64 = crate::routes::pool_frees::UNKNOWN_STREAM;

/// A block a pool handed out: `size` bytes asked for at `ptr`, on `stream`.
#[no_mangle]
pub extern "C" fn gpusan_pool_block_alloc(ptr: u64, size: u64, stream: u64, device: i32, source: u32) -> c_int {
    if boundary::bypassed() {
        return BYPASSED;
    }
    let since = canary_diag::start();
    let r = boundary::contain("gpusan_pool_block_alloc", || alloc(ptr, size, stream, device, source), || INTERNAL);
    canary_diag::end(canary_diag::Section::PoolHook, since);
    r
}

/// The pool took the block at `ptr` back, on `stream` (its memory free for the pool's next
/// block from there on in the stream's order).
#[no_mangle]
pub extern "C" fn gpusan_pool_block_free(ptr: u64, stream: u64, device: i32, source: u32) -> c_int {
    if boundary::bypassed() {
        return BYPASSED;
    }
    let since = canary_diag::start();
    let r = boundary::contain("gpusan_pool_block_free", || free(ptr, stream, device, source), || INTERNAL);
    canary_diag::end(canary_diag::Section::PoolHook, since);
    r
}

/// The host stack of a pool block's allocation or free, where `--pool-sites` asks for it:
/// unwinding at every tensor allocation costs more than the rest of the hook together.
fn block_site() -> gpusan_runtime::registry::SiteId {
    if state().options.pool_sites {
        site()
    } else {
        gpusan_runtime::registry::SiteId::UNKNOWN
    }
}

pub fn alloc(ptr: u64, size: u64, stream: u64, device: i32, source: u32) -> c_int {
    boundary::test_panic("pool_block");
    let new = NewBlock { base: ptr, size, source: PoolSource::from_code(source), stream, device, site: block_site() };
    match state().registry.insert_block(new) {
        Ok(id) => {
            if crate::routes::canary::active() && !canary_diag::diag().no_blocks {
                let padded = gpusan_runtime::pool_blocks::padding_of(source);
                crate::routes::canary::block_allocated(id, ptr, size, new.source, padded, stream);
            }
            OK
        }
        Err(_) => INVALID,
    }
}

pub fn free(ptr: u64, stream: u64, _device: i32, _source: u32) -> c_int {
    boundary::test_panic("pool_block");
    // No table on any GPU yet (no checked module): nothing can see the free early.
    let show = if crate::routes::mirror::active() { Show::Later } else { Show::Now };
    match state().registry.free_block(ptr, block_site(), stream, show) {
        BlockFree::Freed(b) => {
            if crate::routes::canary::active() {
                crate::routes::canary::block_freed(b.id, ptr);
            }
            OK
        }
        BlockFree::Again(_) => FREED_TWICE,
        BlockFree::Unknown => UNKNOWN,
    }
}
