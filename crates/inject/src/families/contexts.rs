//! Contexts: a context-wide synchronization (after which what kernels wrote is final), and
//! the calls that tear a context down (before which it must be read).

use crate::driver::hook::hooks;
use crate::driver::{CUcontext, CUdevice, CUresult};
use crate::routes::{after_sync, before_teardown};

hooks! {
    fn cuCtxSynchronize() => |real| ctx_synchronize(real);
    fn cuDevicePrimaryCtxRelease_v2(dev: CUdevice) => |real| primary_ctx_release(real, dev);
    fn cuDevicePrimaryCtxReset_v2(dev: CUdevice) => |real| primary_ctx_reset(real, dev);
    fn cuCtxDestroy_v2(ctx: CUcontext) => |real| ctx_destroy(real, ctx);
}

unsafe fn ctx_synchronize(real: unsafe extern "C" fn() -> CUresult) -> CUresult {
    after_sync(real())
}

unsafe fn primary_ctx_release(real: unsafe extern "C" fn(CUdevice) -> CUresult, dev: CUdevice) -> CUresult {
    before_teardown();
    real(dev)
}

unsafe fn primary_ctx_reset(real: unsafe extern "C" fn(CUdevice) -> CUresult, dev: CUdevice) -> CUresult {
    before_teardown();
    real(dev)
}

unsafe fn ctx_destroy(real: unsafe extern "C" fn(CUcontext) -> CUresult, ctx: CUcontext) -> CUresult {
    before_teardown();
    real(ctx)
}
