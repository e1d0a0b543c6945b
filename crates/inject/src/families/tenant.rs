//! Stand-ins that exist only for a fenced tenant (`--mode fence`): each passes its call
//! through unchanged, to the driver below it, which in a tenant is the manager
//! (`crate::driver::remote`). A program linked against the driver reaches its forwarding
//! functions only through an exported stand-in, so these are exported in every mode; but
//! the doors (`dlsym`, `cuGetProcAddress`) hand them out only in a tenant ([`handed_out`]),
//! so that cudart, PyTorch and Triton pay no stand-in frame for calls gpusan does nothing
//! with (events and stream waits come around every kernel of a multi-stream program).

use crate::driver::hook::hooks;
use crate::driver::{CUcontext, CUdevice, CUevent, CUstream};

hooks! {
    fn cuDeviceGet(device: *mut CUdevice, ordinal: i32);
    fn cuDeviceGetCount(count: *mut i32);
    fn cuDevicePrimaryCtxRetain(ctx: *mut CUcontext, dev: CUdevice);
    fn cuCtxCreate_v2(ctx: *mut CUcontext, flags: u32, dev: CUdevice);
    // CUDA 13's `cuCtxCreate` (cuda.h maps the name to it), with its creation parameters.
    fn cuCtxCreate_v4(ctx: *mut CUcontext, params: *mut std::ffi::c_void, flags: u32, dev: CUdevice);
    fn cuDeviceGetAttribute(value: *mut i32, attribute: i32, dev: CUdevice);
    fn cuDeviceGetName(name: *mut std::ffi::c_char, len: i32, dev: CUdevice);
    fn cuDriverGetVersion(version: *mut i32);
    fn cuDeviceTotalMem_v2(bytes: *mut usize, dev: CUdevice);
    fn cuCtxGetDevice(dev: *mut CUdevice);
    fn cuStreamCreate(stream: *mut CUstream, flags: u32);
    fn cuStreamCreateWithPriority(stream: *mut CUstream, flags: u32, priority: i32);
    fn cuStreamWaitEvent(stream: CUstream, event: CUevent, flags: u32);
    fn cuEventCreate(event: *mut CUevent, flags: u32);
    fn cuEventRecord(event: CUevent, stream: CUstream);
    fn cuEventDestroy_v2(event: CUevent);
    fn cuEventElapsedTime(ms: *mut f32, start: CUevent, end: CUevent);
    fn cuEventElapsedTime_v2(ms: *mut f32, start: CUevent, end: CUevent);
}

/// Whether the doors may hand out `name`'s stand-in: always, unless it is one of this
/// family's and this process is not a fenced tenant.
pub fn handed_out(name: &std::ffi::CStr) -> bool {
    crate::driver::remote::active() || !hooks().iter().any(|h| h.name == name)
}
