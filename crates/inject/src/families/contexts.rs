//! Contexts: the driver's initialisation (after which a forked child cannot use CUDA:
//! `driver::fork`), a context-wide synchronization (after which what kernels wrote is
//! final), and the calls that tear a context down (before which it must be read, and after
//! which nothing of it may be: the driver freed its memory and modules with it).

use crate::driver::hook::hooks;
use crate::driver::{fork, real, CUcontext, CUdevice, CUresult, CUDA_SUCCESS};
use crate::routes::{after_context_sync, before_sync, before_teardown};
use crate::state::quietly;

hooks! {
    fn cuInit(flags: u32) => |real| init(real, flags);
    fn cuCtxSynchronize() => |real| ctx_synchronize(real);
    // What cudart 13's `cudaDeviceSynchronize` calls (cuGetProcAddress answers it for
    // `cuCtxSynchronize` at version 13000): a context named, or the current one (null).
    fn cuCtxSynchronize_v2(ctx: CUcontext) => |real| ctx_synchronize_v2(real, ctx);
    fn cuDevicePrimaryCtxRelease_v2(dev: CUdevice) => |real| primary_ctx_release(real, dev);
    fn cuDevicePrimaryCtxReset_v2(dev: CUdevice) => |real| primary_ctx_reset(real, dev);
    // The names programs built before CUDA 11 call: the same teardown.
    fn cuDevicePrimaryCtxRelease(dev: CUdevice) => |real| primary_ctx_release(real, dev);
    fn cuDevicePrimaryCtxReset(dev: CUdevice) => |real| primary_ctx_reset(real, dev);
    fn cuCtxDestroy_v2(ctx: CUcontext) => |real| ctx_destroy(real, ctx);
}

unsafe fn init(real: unsafe extern "C" fn(u32) -> CUresult, flags: u32) -> CUresult {
    let r = real(flags);
    if r == CUDA_SUCCESS {
        fork::initialised();
    }
    r
}

unsafe fn ctx_synchronize(real: unsafe extern "C" fn() -> CUresult) -> CUresult {
    let began = before_sync();
    after_context_sync(real(), began)
}

unsafe fn ctx_synchronize_v2(real: unsafe extern "C" fn(CUcontext) -> CUresult, ctx: CUcontext) -> CUresult {
    let began = before_sync();
    let r = real(ctx);
    // The routes keep the current context's marks: the context named is made current for
    // them (nothing is pushed for the current one or for null).
    real::in_context(ctx as u64, || after_context_sync(r, began))
}

/// The primary context of `dev`, asked before a call that may end it (afterwards it is
/// gone, handle and all).
fn primary_of(dev: CUdevice) -> Option<u64> {
    quietly(|| real::primary_context(dev)).flatten()
}

unsafe fn primary_ctx_release(real: unsafe extern "C" fn(CUdevice) -> CUresult, dev: CUdevice) -> CUresult {
    before_teardown();
    let primary = primary_of(dev);
    // Canary mode's last scan of it, and no launch of the guard's while it goes.
    let r = crate::routes::canary::around_teardown(primary, || real(dev));
    // Only the last release destroys the context.
    if let (CUDA_SUCCESS, Some(ctx)) = (r, primary) {
        if quietly(|| real::primary_active(dev)).flatten() == Some(false) {
            context_gone(ctx);
        }
    }
    r
}

unsafe fn primary_ctx_reset(real: unsafe extern "C" fn(CUdevice) -> CUresult, dev: CUdevice) -> CUresult {
    before_teardown();
    let primary = primary_of(dev);
    let r = crate::routes::canary::around_teardown(primary, || real(dev));
    if let (CUDA_SUCCESS, Some(ctx)) = (r, primary) {
        context_gone(ctx);
    }
    r
}

unsafe fn ctx_destroy(real: unsafe extern "C" fn(CUcontext) -> CUresult, ctx: CUcontext) -> CUresult {
    before_teardown();
    let r = crate::routes::canary::around_teardown(Some(ctx as u64), || real(ctx));
    if r == CUDA_SUCCESS {
        context_gone(ctx as u64);
    }
    r
}

/// After the driver destroyed `ctx`: nothing of it may be read or freed again.
fn context_gone(ctx: u64) {
    crate::routes::context_gone(ctx);
    quietly(|| super::memory::context_gone(ctx));
}
