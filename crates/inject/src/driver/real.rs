//! The driver functions gpusan calls for its own work, each declared once with its exact
//! signature. `real::cuStreamCreate()` resolves the real export the first time (never
//! gpusan's stand-in) and returns it typed, or `None` where the driver lacks it. The
//! program's calls reach the driver through the stand-ins' own slots ([`super::hook`]),
//! not through these.
//!
//! A function gpusan needs is added here, never converted from an address where it is used.

#![allow(non_snake_case)]

use std::ffi::{c_char, c_int, c_void};

use super::resolve::{typed, Slot};
use super::types::{
    CUcontext, CUdevice, CUdeviceptr, CUevent, CUfunction, CUgraph, CUgraphNode, CUkernel, CUlibrary, CUlinkState,
    CUmemHandle, CUmodule, CUresult, CUstream, CUstreamCaptureStatus, KernelNodeParams, MemAccessDesc,
    MemAllocNodeParams, MemAllocationProp, CUDA_SUCCESS,
};

/// `fn name(arg: type, …);` declares `pub fn name() -> Option<unsafe extern "C" fn(type, …) ->
/// CUresult>`, resolved once.
macro_rules! real_functions {
    ($( $(#[$doc:meta])* fn $name:ident($($arg:ident: $ty:ty),* $(,)?); )*) => {
        $(
            $(#[$doc])*
            pub fn $name() -> Option<unsafe extern "C" fn($($ty),*) -> CUresult> {
                static SLOT: Slot = Slot::new();
                let name = concat!(stringify!($name), "\0");
                // SAFETY: the name is NUL-terminated above; the signature is the driver's.
                unsafe { typed(SLOT.driver(std::ffi::CStr::from_bytes_with_nul_unchecked(name.as_bytes()))) }
            }
        )*
    };
}

real_functions! {
    // Contexts.
    fn cuCtxGetCurrent(ctx: *mut CUcontext);
    fn cuCtxPushCurrent_v2(ctx: CUcontext);
    fn cuCtxPopCurrent_v2(ctx: *mut CUcontext);
    fn cuCtxSetCurrent(ctx: CUcontext);
    fn cuCtxGetDevice(device: *mut CUdevice);
    fn cuCtxSynchronize();
    /// Whether a stream's work is done, without waiting (a fault shows here as elsewhere).
    fn cuStreamQuery(stream: CUstream);
    fn cuPointerGetAttribute(data: *mut c_void, attribute: c_int, ptr: CUdeviceptr);
    fn cuDeviceGetAttribute(value: *mut c_int, attribute: c_int, device: CUdevice);
    fn cuDevicePrimaryCtxGetState(device: CUdevice, flags: *mut u32, active: *mut c_int);
    fn cuDevicePrimaryCtxRetain(ctx: *mut CUcontext, device: CUdevice);
    fn cuDevicePrimaryCtxRelease_v2(device: CUdevice);

    // Memory.
    fn cuMemAlloc_v2(dptr: *mut CUdeviceptr, bytes: usize);
    fn cuMemFree_v2(dptr: CUdeviceptr);
    fn cuMemHostAlloc(pp: *mut *mut c_void, bytes: usize, flags: u32);
    fn cuMemHostGetDevicePointer_v2(dptr: *mut CUdeviceptr, p: *mut c_void, flags: u32);
    fn cuMemHostRegister_v2(p: *mut c_void, bytes: usize, flags: u32);
    fn cuMemFreeHost(p: *mut c_void);
    fn cuMemGetAddressRange_v2(base: *mut CUdeviceptr, size: *mut usize, dptr: CUdeviceptr);

    // Virtual memory management (the device table's memory).
    fn cuMemGetAllocationGranularity(granularity: *mut usize, prop: *const MemAllocationProp, option: u32);
    fn cuMemAddressReserve(ptr: *mut CUdeviceptr, size: usize, alignment: usize, addr: CUdeviceptr, flags: u64);
    fn cuMemAddressFree(ptr: CUdeviceptr, size: usize);
    fn cuMemCreate(handle: *mut CUmemHandle, size: usize, prop: *const MemAllocationProp, flags: u64);
    fn cuMemRelease(handle: CUmemHandle);
    fn cuMemMap(ptr: CUdeviceptr, size: usize, offset: usize, handle: CUmemHandle, flags: u64);
    fn cuMemUnmap(ptr: CUdeviceptr, size: usize);
    fn cuMemSetAccess(ptr: CUdeviceptr, size: usize, desc: *const MemAccessDesc, count: usize);

    // Copies.
    fn cuMemcpyHtoD_v2(dst: CUdeviceptr, src: *const c_void, bytes: usize);
    fn cuMemcpyHtoDAsync_v2(dst: CUdeviceptr, src: *const c_void, bytes: usize, stream: CUstream);
    fn cuMemcpyDtoH_v2(dst: *mut c_void, src: CUdeviceptr, bytes: usize);
    fn cuMemcpyDtoHAsync_v2(dst: *mut c_void, src: CUdeviceptr, bytes: usize, stream: CUstream);

    // Kernels: what a handle the program launches is.
    fn cuFuncGetName(name: *mut *const c_char, f: CUfunction);
    fn cuFuncGetModule(module: *mut CUmodule, f: CUfunction);
    fn cuKernelGetName(name: *mut *const c_char, k: CUkernel);
    fn cuKernelGetLibrary(library: *mut CUlibrary, k: CUkernel);
    fn cuKernelGetFunction(f: *mut CUfunction, k: CUkernel);
    /// The unchecked copies of kernels (`routes::window`).
    fn cuModuleGetFunction(f: *mut CUfunction, module: CUmodule, name: *const c_char);
    fn cuLibraryGetKernel(k: *mut CUkernel, library: CUlibrary, name: *const c_char);

    // Modules.
    fn cuModuleLoadData(module: *mut CUmodule, image: *const c_void);
    /// gpusan's own kernels (canary mode's update and scan, `routes::canary`).
    fn cuLaunchKernel(
        f: CUfunction,
        gx: u32,
        gy: u32,
        gz: u32,
        bx: u32,
        by: u32,
        bz: u32,
        shared: u32,
        stream: CUstream,
        params: *mut *mut c_void,
        extra: *mut *mut c_void,
    );
    fn cuLibraryLoadData(
        library: *mut CUlibrary,
        code: *const c_void,
        jit_options: *mut c_int,
        jit_values: *mut *mut c_void,
        n_jit: u32,
        library_options: *mut c_int,
        library_values: *mut *mut c_void,
        n_library: u32,
    );
    fn cuModuleGetGlobal_v2(dptr: *mut CUdeviceptr, bytes: *mut usize, module: CUmodule, name: *const c_char);
    fn cuLibraryGetGlobal(dptr: *mut CUdeviceptr, bytes: *mut usize, library: CUlibrary, name: *const c_char);

    // The linker: cubins built from instrumented PTX, and PTX a program links.
    fn cuLinkCreate_v2(n: u32, options: *mut c_int, values: *mut *mut c_void, state: *mut CUlinkState);
    fn cuLinkAddData_v2(
        state: CUlinkState,
        kind: c_int,
        data: *mut c_void,
        size: usize,
        name: *const c_char,
        n: u32,
        options: *mut c_int,
        values: *mut *mut c_void,
    );
    fn cuLinkComplete(state: CUlinkState, cubin: *mut *mut c_void, size: *mut usize);
    fn cuLinkDestroy(state: CUlinkState);

    // Events (stream-ordered frees held back: `families::ordered`; pool blocks' frees
    // shown to kernels: `routes::pool_frees`).
    fn cuEventCreate(event: *mut CUevent, flags: u32);
    fn cuEventRecord(event: CUevent, stream: CUstream);
    fn cuEventSynchronize(event: CUevent);
    fn cuEventQuery(event: CUevent);
    /// Canary mode's scans, timed on the GPU (`routes::canary`).
    fn cuEventElapsedTime(ms: *mut f32, start: CUevent, end: CUevent);
    fn cuStreamWaitEvent(stream: CUstream, event: CUevent, flags: u32);
    fn cuMemFreeAsync(dptr: CUdeviceptr, stream: CUstream);

    // Streams and capture.
    fn cuStreamCreate(stream: *mut CUstream, flags: u32);
    /// Canary mode's guard stream: the lowest priority (`routes::canary`).
    fn cuStreamCreateWithPriority(stream: *mut CUstream, flags: u32, priority: c_int);
    fn cuCtxGetStreamPriorityRange(least: *mut c_int, greatest: *mut c_int);
    fn cuStreamDestroy_v2(stream: CUstream);
    fn cuStreamSynchronize(stream: CUstream);
    fn cuStreamIsCapturing(stream: CUstream, status: *mut CUstreamCaptureStatus);
    fn cuStreamGetCaptureInfo_v2(
        stream: CUstream,
        status: *mut CUstreamCaptureStatus,
        id: *mut u64,
        graph: *mut CUgraph,
        deps: *mut *const CUgraphNode,
        count: *mut usize,
    );
    fn cuThreadExchangeStreamCaptureMode(mode: *mut c_int);

    // Graphs: what an instantiated graph allocates and frees.
    fn cuGraphGetNodes(graph: CUgraph, nodes: *mut CUgraphNode, count: *mut usize);
    fn cuGraphNodeGetType(node: CUgraphNode, kind: *mut c_int);
    fn cuGraphMemAllocNodeGetParams(node: CUgraphNode, params: *mut MemAllocNodeParams);
    fn cuGraphMemFreeNodeGetParams(node: CUgraphNode, dptr: *mut CUdeviceptr);
    fn cuGraphChildGraphNodeGetGraph(node: CUgraphNode, graph: *mut CUgraph);
    // … and which kernels each launch runs (the report's coverage).
    fn cuGraphKernelNodeGetParams_v2(node: CUgraphNode, params: *mut KernelNodeParams);
}

/// Runs `f` with `context` current (pushed, then popped), unless it is current already or
/// unknown (0). Memory is given back in the context that owns it: the driver frees in the
/// current one, and a thread may have none.
pub fn in_context<R>(context: u64, f: impl FnOnce() -> R) -> R {
    let mut current: CUcontext = std::ptr::null_mut();
    let (Some(get), Some(push), Some(pop)) = (cuCtxGetCurrent(), cuCtxPushCurrent_v2(), cuCtxPopCurrent_v2()) else {
        return f();
    };
    // SAFETY: the driver's functions, with the arguments its API describes.
    unsafe {
        if context == 0 || (get(&mut current) == CUDA_SUCCESS && current as u64 == context) {
            return f();
        }
        if push(context as CUcontext) != CUDA_SUCCESS {
            return f();
        }
    }
    // Popped even if `f` panics: the program's thread must be left in its own context.
    struct Pop(unsafe extern "C" fn(*mut CUcontext) -> CUresult);
    impl Drop for Pop {
        fn drop(&mut self) {
            let mut popped: CUcontext = std::ptr::null_mut();
            // SAFETY: the driver's `cuCtxPopCurrent_v2`, undoing the push above.
            unsafe { (self.0)(&mut popped) };
        }
    }
    let _pop = Pop(pop);
    super::boundary::test_panic("in_context");
    f()
}

/// The current context's handle (0: none), without asking for its device.
pub fn current_context_handle() -> u64 {
    let mut ctx: CUcontext = std::ptr::null_mut();
    if let Some(f) = cuCtxGetCurrent() {
        // SAFETY: an out-parameter of ours.
        unsafe { f(&mut ctx) };
    }
    ctx as u64
}

/// The current context and its device, for the registry (0 and -1 without one).
pub fn current_context() -> (u64, i32) {
    let (mut ctx, mut dev): (CUcontext, CUdevice) = (std::ptr::null_mut(), -1);
    let (get_ctx, get_dev) = (cuCtxGetCurrent(), cuCtxGetDevice());
    unsafe {
        if let Some(f) = get_ctx {
            f(&mut ctx);
        }
        if let Some(f) = get_dev.filter(|_| !ctx.is_null()) {
            f(&mut dev);
        }
    }
    (ctx as u64, dev)
}

/// The compute capability of `device` as one number (90 for 9.0), if the driver says.
pub fn device_arch(device: CUdevice) -> Option<u32> {
    const MAJOR: c_int = 75; // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
    const MINOR: c_int = 76;
    let f = cuDeviceGetAttribute()?;
    let (mut major, mut minor) = (0, 0);
    // SAFETY: two out-parameters of ours, the driver's signature.
    let ok = unsafe { f(&mut major, MAJOR, device) == CUDA_SUCCESS && f(&mut minor, MINOR, device) == CUDA_SUCCESS };
    (ok && major > 0 && minor >= 0).then(|| major as u32 * 10 + minor as u32)
}

/// Whether the primary context of `device` exists now (`None`: the driver did not say).
pub fn primary_active(device: CUdevice) -> Option<bool> {
    let f = cuDevicePrimaryCtxGetState()?;
    let (mut flags, mut active) = (0u32, 0);
    // SAFETY: two out-parameters of ours, the driver's signature.
    (unsafe { f(device, &mut flags, &mut active) } == CUDA_SUCCESS).then_some(active != 0)
}

/// The primary context of `device` while it exists: its handle, asked for with a reference
/// taken and given back at once (never the last one, so the context stays as it was; and
/// none is taken when the context does not exist, which retaining would create).
pub fn primary_context(device: CUdevice) -> Option<u64> {
    if primary_active(device) != Some(true) {
        return None;
    }
    let (retain, release) = (cuDevicePrimaryCtxRetain()?, cuDevicePrimaryCtxRelease_v2()?);
    let mut ctx: CUcontext = std::ptr::null_mut();
    // SAFETY: an out-parameter of ours; the reference taken is given back below.
    unsafe {
        if retain(&mut ctx, device) != CUDA_SUCCESS {
            return None;
        }
        release(device);
    }
    (!ctx.is_null()).then_some(ctx as u64)
}
