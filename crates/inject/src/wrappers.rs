//! Wrappers for the driver functions gpusan watches. Each counts its calls and hands the
//! real function to its handler in [`crate::hooks`] (or simply forwards); the real address comes from whichever door handed the wrapper
//! out, or from `dlsym` on first use when the program linked against `libcuda` directly.

use std::collections::BTreeMap;
use std::ffi::{c_char, c_int, c_void, CStr};

use crate::hooks;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

type CUresult = c_int;
type Ptr = *mut c_void;

pub struct Hook {
    pub name: &'static CStr,
    pub wrapper: usize,
    pub real: &'static AtomicUsize,
    pub calls: &'static AtomicU64,
}

/// Sentinel for a driver export this driver does not have, so it is not looked up again.
const ABSENT: usize = usize::MAX;

pub fn real_or_resolve(real: &AtomicUsize, name: &CStr) -> usize {
    match real.load(Ordering::Acquire) {
        0 => {}
        ABSENT => return 0,
        p => return p,
    }
    let p = unsafe { crate::resolve::real_driver_symbol(name) };
    real.store(if p == 0 { ABSENT } else { p }, Ordering::Release);
    p
}

/// `fn name(args);` forwards and counts; `fn name(args) => |real| handler(real, args…);`
/// hands the typed real function to a handler in [`crate::hooks`].
macro_rules! wrappers {
    (@call $f:ident, [], $($arg:ident),*) => { $f($($arg),*) };
    (@call $f:ident, [$real:ident $handler:expr], $($arg:ident),*) => {{ let $real = $f; $handler }};
    ($( fn $name:ident ( $($arg:ident : $ty:ty),* $(,)? ) $(=> |$real:ident| $handler:expr)? ; )*) => {
        $(
            #[allow(non_snake_case)]
            mod $name {
                pub static REAL: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
                pub static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            }

            #[no_mangle]
            pub unsafe extern "C" fn $name($($arg: $ty),*) -> CUresult {
                $name::CALLS.fetch_add(1, Ordering::Relaxed);
                let real = real_or_resolve(&$name::REAL, unsafe { CStr::from_bytes_with_nul_unchecked(concat!(stringify!($name), "\0").as_bytes()) });
                if real == 0 {
                    return 3; // CUDA_ERROR_NOT_INITIALIZED: the driver is not loaded
                }
                let f: unsafe extern "C" fn($($ty),*) -> CUresult = std::mem::transmute(real);
                wrappers!(@call f, [$($real $handler)?], $($arg),*)
            }
        )*

        pub fn all() -> Vec<Hook> {
            vec![$(Hook {
                name: unsafe { CStr::from_bytes_with_nul_unchecked(concat!(stringify!($name), "\0").as_bytes()) },
                wrapper: $name as *const () as usize,
                real: &$name::REAL,
                calls: &$name::CALLS,
            }),*]
        }
    };
}

wrappers! {
    fn cuMemAlloc_v2(dptr: *mut u64, size: usize) => |real| hooks::mem_alloc(real, dptr, size);
    fn cuMemAllocPitch_v2(dptr: *mut u64, pitch: *mut usize, width: usize, height: usize, elem: u32)
        => |real| hooks::mem_alloc_pitch(real, dptr, pitch, width, height, elem);
    fn cuMemAllocAsync(dptr: *mut u64, size: usize, stream: Ptr) => |real| hooks::mem_alloc_async(real, dptr, size, stream);
    fn cuMemAllocAsync_ptsz(dptr: *mut u64, size: usize, stream: Ptr) => |real| hooks::mem_alloc_async(real, dptr, size, stream);
    fn cuMemAllocFromPoolAsync(dptr: *mut u64, size: usize, pool: Ptr, stream: Ptr)
        => |real| hooks::mem_alloc_from_pool(real, dptr, size, pool, stream);
    fn cuMemAllocFromPoolAsync_ptsz(dptr: *mut u64, size: usize, pool: Ptr, stream: Ptr)
        => |real| hooks::mem_alloc_from_pool(real, dptr, size, pool, stream);
    fn cuMemAllocManaged(dptr: *mut u64, size: usize, flags: u32) => |real| hooks::mem_alloc_managed(real, dptr, size, flags);
    fn cuMemHostAlloc(pp: *mut Ptr, size: usize, flags: u32) => |real| hooks::mem_host_alloc(real, pp, size, flags);
    fn cuMemAllocHost_v2(pp: *mut Ptr, size: usize) => |real| hooks::mem_alloc_host(real, pp, size);
    fn cuMemFree_v2(dptr: u64) => |real| hooks::mem_free(real, dptr);
    fn cuMemFreeAsync(dptr: u64, stream: Ptr) => |real| hooks::mem_free_async(real, dptr, stream);
    fn cuMemFreeAsync_ptsz(dptr: u64, stream: Ptr) => |real| hooks::mem_free_async(real, dptr, stream);
    fn cuMemFreeHost(p: Ptr) => |real| hooks::mem_free_host(real, p);

    fn cuMemcpyHtoD_v2(dst: u64, src: *const c_void, n: usize) => |real| hooks::memcpy_htod(real, dst, src, n);
    fn cuMemcpyHtoD_v2_ptds(dst: u64, src: *const c_void, n: usize) => |real| hooks::memcpy_htod(real, dst, src, n);
    fn cuMemcpyDtoH_v2(dst: Ptr, src: u64, n: usize) => |real| hooks::memcpy_dtoh(real, dst, src, n);
    fn cuMemcpyDtoH_v2_ptds(dst: Ptr, src: u64, n: usize) => |real| hooks::memcpy_dtoh(real, dst, src, n);
    fn cuMemcpyDtoD_v2(dst: u64, src: u64, n: usize) => |real| hooks::memcpy_dtod(real, dst, src, n);
    fn cuMemcpyDtoD_v2_ptds(dst: u64, src: u64, n: usize) => |real| hooks::memcpy_dtod(real, dst, src, n);
    fn cuMemcpy(dst: u64, src: u64, n: usize) => |real| hooks::memcpy(real, dst, src, n);
    fn cuMemcpy_ptds(dst: u64, src: u64, n: usize) => |real| hooks::memcpy(real, dst, src, n);
    fn cuMemcpyAsync(dst: u64, src: u64, n: usize, stream: Ptr) => |real| hooks::memcpy_async(real, dst, src, n, stream);
    fn cuMemcpyAsync_ptsz(dst: u64, src: u64, n: usize, stream: Ptr) => |real| hooks::memcpy_async(real, dst, src, n, stream);
    fn cuMemcpyHtoDAsync_v2(dst: u64, src: *const c_void, n: usize, stream: Ptr)
        => |real| hooks::memcpy_htod_async(real, dst, src, n, stream);
    fn cuMemcpyHtoDAsync_v2_ptsz(dst: u64, src: *const c_void, n: usize, stream: Ptr)
        => |real| hooks::memcpy_htod_async(real, dst, src, n, stream);
    fn cuMemcpyDtoHAsync_v2(dst: Ptr, src: u64, n: usize, stream: Ptr) => |real| hooks::memcpy_dtoh_async(real, dst, src, n, stream);
    fn cuMemcpyDtoHAsync_v2_ptsz(dst: Ptr, src: u64, n: usize, stream: Ptr)
        => |real| hooks::memcpy_dtoh_async(real, dst, src, n, stream);
    fn cuMemcpyDtoDAsync_v2(dst: u64, src: u64, n: usize, stream: Ptr) => |real| hooks::memcpy_dtod_async(real, dst, src, n, stream);
    fn cuMemcpyDtoDAsync_v2_ptsz(dst: u64, src: u64, n: usize, stream: Ptr)
        => |real| hooks::memcpy_dtod_async(real, dst, src, n, stream);
    fn cuMemcpy2D_v2(p: *const hooks::Memcpy2D) => |real| hooks::memcpy_2d(real, p);
    fn cuMemcpy2D_v2_ptds(p: *const hooks::Memcpy2D) => |real| hooks::memcpy_2d(real, p);
    fn cuMemcpy2DUnaligned_v2(p: *const hooks::Memcpy2D) => |real| hooks::memcpy_2d(real, p);
    fn cuMemcpy2DUnaligned_v2_ptds(p: *const hooks::Memcpy2D) => |real| hooks::memcpy_2d(real, p);
    fn cuMemcpy2DAsync_v2(p: *const hooks::Memcpy2D, stream: Ptr) => |real| hooks::memcpy_2d_async(real, p, stream);
    fn cuMemcpy2DAsync_v2_ptsz(p: *const hooks::Memcpy2D, stream: Ptr) => |real| hooks::memcpy_2d_async(real, p, stream);

    fn cuMemcpy3D_v2(p: *const hooks::Memcpy3D) => |real| hooks::memcpy_3d(real, p);
    fn cuMemcpy3D_v2_ptds(p: *const hooks::Memcpy3D) => |real| hooks::memcpy_3d(real, p);
    fn cuMemcpy3DAsync_v2(p: *const hooks::Memcpy3D, stream: Ptr) => |real| hooks::memcpy_3d_async(real, p, stream);
    fn cuMemcpy3DAsync_v2_ptsz(p: *const hooks::Memcpy3D, stream: Ptr) => |real| hooks::memcpy_3d_async(real, p, stream);
    fn cuMemcpyPeer(dst: u64, dctx: Ptr, src: u64, sctx: Ptr, n: usize) => |real| hooks::memcpy_peer(real, dst, dctx, src, sctx, n);
    fn cuMemcpyPeer_ptds(dst: u64, dctx: Ptr, src: u64, sctx: Ptr, n: usize)
        => |real| hooks::memcpy_peer(real, dst, dctx, src, sctx, n);
    fn cuMemcpyPeerAsync(dst: u64, dctx: Ptr, src: u64, sctx: Ptr, n: usize, s: Ptr)
        => |real| hooks::memcpy_peer_async(real, dst, dctx, src, sctx, n, s);
    fn cuMemcpyPeerAsync_ptsz(dst: u64, dctx: Ptr, src: u64, sctx: Ptr, n: usize, s: Ptr)
        => |real| hooks::memcpy_peer_async(real, dst, dctx, src, sctx, n, s);
    fn cuMemHostRegister_v2(p: Ptr, size: usize, flags: u32) => |real| hooks::mem_host_register(real, p, size, flags);
    fn cuMemHostUnregister(p: Ptr) => |real| hooks::mem_host_unregister(real, p);
    fn cuMemMap(ptr: u64, size: usize, offset: usize, handle: u64, flags: u64) => |real| hooks::mem_map(real, ptr, size, offset, handle, flags);
    fn cuMemUnmap(ptr: u64, size: usize) => |real| hooks::mem_unmap(real, ptr, size);

    fn cuMemsetD8_v2(dst: u64, v: u8, n: usize) => |real| hooks::memset("cuMemsetD8", 1, real, dst, v, n);
    fn cuMemsetD8_v2_ptds(dst: u64, v: u8, n: usize) => |real| hooks::memset("cuMemsetD8", 1, real, dst, v, n);
    fn cuMemsetD16_v2(dst: u64, v: u16, n: usize) => |real| hooks::memset("cuMemsetD16", 2, real, dst, v, n);
    fn cuMemsetD16_v2_ptds(dst: u64, v: u16, n: usize) => |real| hooks::memset("cuMemsetD16", 2, real, dst, v, n);
    fn cuMemsetD32_v2(dst: u64, v: u32, n: usize) => |real| hooks::memset("cuMemsetD32", 4, real, dst, v, n);
    fn cuMemsetD32_v2_ptds(dst: u64, v: u32, n: usize) => |real| hooks::memset("cuMemsetD32", 4, real, dst, v, n);
    fn cuMemsetD8Async(dst: u64, v: u8, n: usize, s: Ptr) => |real| hooks::memset_async("cuMemsetD8Async", 1, real, dst, v, n, s);
    fn cuMemsetD8Async_ptsz(dst: u64, v: u8, n: usize, s: Ptr)
        => |real| hooks::memset_async("cuMemsetD8Async", 1, real, dst, v, n, s);
    fn cuMemsetD16Async(dst: u64, v: u16, n: usize, s: Ptr) => |real| hooks::memset_async("cuMemsetD16Async", 2, real, dst, v, n, s);
    fn cuMemsetD16Async_ptsz(dst: u64, v: u16, n: usize, s: Ptr)
        => |real| hooks::memset_async("cuMemsetD16Async", 2, real, dst, v, n, s);
    fn cuMemsetD32Async(dst: u64, v: u32, n: usize, s: Ptr) => |real| hooks::memset_async("cuMemsetD32Async", 4, real, dst, v, n, s);
    fn cuMemsetD32Async_ptsz(dst: u64, v: u32, n: usize, s: Ptr)
        => |real| hooks::memset_async("cuMemsetD32Async", 4, real, dst, v, n, s);
    fn cuMemsetD2D8_v2(dst: u64, pitch: usize, v: u8, w: usize, h: usize)
        => |real| hooks::memset_2d("cuMemsetD2D8", 1, real, dst, pitch, v, w, h);
    fn cuMemsetD2D8_v2_ptds(dst: u64, pitch: usize, v: u8, w: usize, h: usize)
        => |real| hooks::memset_2d("cuMemsetD2D8", 1, real, dst, pitch, v, w, h);
    fn cuMemsetD2D16_v2(dst: u64, pitch: usize, v: u16, w: usize, h: usize)
        => |real| hooks::memset_2d("cuMemsetD2D16", 2, real, dst, pitch, v, w, h);
    fn cuMemsetD2D32_v2(dst: u64, pitch: usize, v: u32, w: usize, h: usize)
        => |real| hooks::memset_2d("cuMemsetD2D32", 4, real, dst, pitch, v, w, h);
    fn cuMemsetD2D8Async(dst: u64, pitch: usize, v: u8, w: usize, h: usize, s: Ptr)
        => |real| hooks::memset_2d_async("cuMemsetD2D8Async", 1, real, dst, pitch, v, w, h, s);
    fn cuMemsetD2D8Async_ptsz(dst: u64, pitch: usize, v: u8, w: usize, h: usize, s: Ptr)
        => |real| hooks::memset_2d_async("cuMemsetD2D8Async", 1, real, dst, pitch, v, w, h, s);
    fn cuMemsetD2D32Async(dst: u64, pitch: usize, v: u32, w: usize, h: usize, s: Ptr)
        => |real| hooks::memset_2d_async("cuMemsetD2D32Async", 4, real, dst, pitch, v, w, h, s);

    // Module loads: replaced by instrumented builds when the mode instruments kernels.
    fn cuModuleLoadData(module: *mut Ptr, image: *const c_void) => |real| hooks::module_load_data(real, module, image);
    fn cuModuleLoadDataEx(module: *mut Ptr, image: *const c_void, n: u32, options: *mut c_int, values: *mut Ptr)
        => |real| hooks::module_load_data_ex(real, module, image, n, options, values);
    fn cuModuleLoadFatBinary(module: *mut Ptr, fatbin: *const c_void) => |real| hooks::module_load_fat_binary(real, module, fatbin);
    fn cuLibraryLoadData(lib: *mut Ptr, code: *const c_void, jo: *mut c_int, jv: *mut Ptr, njo: u32, lo: *mut c_int, lv: *mut Ptr, nlo: u32)
        => |real| hooks::library_load_data(real, lib, code, jo, jv, njo, lo, lv, nlo);

    // Module variables: their bounds become known when the program asks for their address.
    fn cuLibraryGetGlobal(dptr: *mut u64, bytes: *mut usize, lib: Ptr, name: *const c_char)
        => |real| hooks::library_get_global(real, dptr, bytes, lib, name);
    fn cuModuleGetGlobal_v2(dptr: *mut u64, bytes: *mut usize, module: Ptr, name: *const c_char)
        => |real| hooks::module_get_global(real, dptr, bytes, module, name);

    // Watched: launches reach the substituted modules' kernels by construction.
    fn cuModuleGetFunction(f: *mut Ptr, module: Ptr, name: *const c_char);
    fn cuLibraryGetKernel(k: *mut Ptr, lib: Ptr, name: *const c_char);
    fn cuLaunchKernel(f: Ptr, gx: u32, gy: u32, gz: u32, bx: u32, by: u32, bz: u32, shmem: u32, stream: Ptr, params: *mut Ptr, extra: *mut Ptr)
        => |real| hooks::launch_kernel(real, f, [gx, gy, gz], [bx, by, bz], shmem, stream, params, extra);
    fn cuLaunchKernel_ptsz(f: Ptr, gx: u32, gy: u32, gz: u32, bx: u32, by: u32, bz: u32, shmem: u32, stream: Ptr, params: *mut Ptr, extra: *mut Ptr)
        => |real| hooks::launch_kernel(real, f, [gx, gy, gz], [bx, by, bz], shmem, stream, params, extra);
    fn cuLaunchKernelEx(config: *const c_void, f: Ptr, params: *mut Ptr, extra: *mut Ptr)
        => |real| hooks::launch_kernel_ex(real, config, f, params, extra);
    fn cuLaunchKernelEx_ptsz(config: *const c_void, f: Ptr, params: *mut Ptr, extra: *mut Ptr)
        => |real| hooks::launch_kernel_ex(real, config, f, params, extra);
    fn cuLaunchCooperativeKernel(f: Ptr, gx: u32, gy: u32, gz: u32, bx: u32, by: u32, bz: u32, shmem: u32, stream: Ptr, params: *mut Ptr)
        => |real| hooks::launch_cooperative(real, f, [gx, gy, gz], [bx, by, bz], shmem, stream, params);
    // Graph memory nodes.
    fn cuGraphAddMemAllocNode(node: *mut Ptr, graph: Ptr, deps: *const Ptr, n: usize, params: *mut hooks::MemAllocNodeParams)
        => |real| hooks::graph_add_mem_alloc_node(real, node, graph, deps, n, params);
    fn cuGraphAddMemFreeNode(node: *mut Ptr, graph: Ptr, deps: *const Ptr, n: usize, dptr: u64)
        => |real| hooks::graph_add_mem_free_node(real, node, graph, deps, n, dptr);
    fn cuGraphDestroy(graph: Ptr) => |real| hooks::graph_destroy(real, graph);
    fn cuDeviceGraphMemTrim(device: c_int) => |real| hooks::device_graph_mem_trim(real, device);
    fn cuGraphLaunch(exec: Ptr, stream: Ptr) => |real| hooks::graph_launch(real, exec, stream);
    // Stream capture: while a stream captures, gpusan's own calls must not break it.
    fn cuStreamBeginCapture(stream: Ptr) => |real| hooks::begin_capture(stream, || real(stream));
    fn cuStreamBeginCapture_ptsz(stream: Ptr) => |real| hooks::begin_capture(stream, || real(stream));
    fn cuStreamBeginCapture_v2(stream: Ptr, mode: c_int) => |real| hooks::begin_capture(stream, || real(stream, mode));
    fn cuStreamBeginCapture_v2_ptsz(stream: Ptr, mode: c_int) => |real| hooks::begin_capture(stream, || real(stream, mode));
    fn cuStreamBeginCaptureToGraph(stream: Ptr, graph: Ptr, deps: *const Ptr, data: *const c_void, n: usize, mode: c_int)
        => |real| hooks::begin_capture(stream, || real(stream, graph, deps, data, n, mode));
    fn cuStreamBeginCaptureToGraph_ptsz(stream: Ptr, graph: Ptr, deps: *const Ptr, data: *const c_void, n: usize, mode: c_int)
        => |real| hooks::begin_capture(stream, || real(stream, graph, deps, data, n, mode));
    fn cuStreamEndCapture(stream: Ptr, graph: *mut Ptr) => |real| hooks::end_capture(stream, || real(stream, graph));
    fn cuStreamEndCapture_ptsz(stream: Ptr, graph: *mut Ptr) => |real| hooks::end_capture(stream, || real(stream, graph));
    fn cuGraphLaunch_ptsz(exec: Ptr, stream: Ptr) => |real| hooks::graph_launch(real, exec, stream);
    fn cuCtxSynchronize() => |real| hooks::ctx_synchronize(real);
    fn cuEventSynchronize(event: Ptr) => |real| hooks::event_synchronize(real, event);
    fn cuDevicePrimaryCtxRelease_v2(dev: c_int) => |real| hooks::primary_ctx_release(real, dev);
    fn cuDevicePrimaryCtxReset_v2(dev: c_int) => |real| hooks::primary_ctx_reset(real, dev);
    fn cuCtxDestroy_v2(ctx: Ptr) => |real| hooks::ctx_destroy(real, ctx);
    fn cuStreamSynchronize(stream: Ptr) => |real| hooks::stream_synchronize(real, stream);
    fn cuStreamSynchronize_ptsz(stream: Ptr) => |real| hooks::stream_synchronize(real, stream);
}

pub fn by_name(name: &[u8]) -> Option<Hook> {
    all().into_iter().find(|h| h.name.to_bytes() == name)
}

/// The wrapper standing for the driver function at `addr`, if any.
pub fn by_real_address(addr: usize) -> Option<Hook> {
    all().into_iter().find(|h| real_or_resolve(h.real, h.name) == addr)
}

pub fn call_counts() -> BTreeMap<String, u64> {
    all()
        .into_iter()
        .filter_map(|h| {
            let n = h.calls.load(Ordering::Relaxed);
            (n > 0).then(|| (h.name.to_string_lossy().into_owned(), n))
        })
        .collect()
}
