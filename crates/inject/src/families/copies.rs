//! Copies and sets: every operand judged against the registry before the call reaches the
//! driver (1-D, 2-D, 3-D, peer, unified-addressing copies; 1-D and 2-D sets).

// Handlers mirror the driver functions they stand for, arguments and all.
#![allow(clippy::too_many_arguments)]

use std::ffi::c_void;

use gpusan_runtime::checks::{Call, Extent, Mem, Pitched3D};

use super::judge::{check, device, uva};
use crate::driver::hook::hooks;
use crate::driver::{
    current_context, real, CUcontext, CUdeviceptr, CUresult, CUstream, Memcpy2D, Memcpy3D, CUDA_SUCCESS,
};
use crate::routes::after_sync;

hooks! {
    fn cuMemcpyHtoD_v2(dst: CUdeviceptr, src: *const c_void, n: usize) => |real| memcpy_htod(real, dst, src, n);
    fn cuMemcpyHtoD_v2_ptds(dst: CUdeviceptr, src: *const c_void, n: usize) => |real| memcpy_htod(real, dst, src, n);
    fn cuMemcpyDtoH_v2(dst: *mut c_void, src: CUdeviceptr, n: usize) => |real| memcpy_dtoh(real, dst, src, n);
    fn cuMemcpyDtoH_v2_ptds(dst: *mut c_void, src: CUdeviceptr, n: usize) => |real| memcpy_dtoh(real, dst, src, n);
    fn cuMemcpyDtoD_v2(dst: CUdeviceptr, src: CUdeviceptr, n: usize) => |real| memcpy_dtod(real, dst, src, n);
    fn cuMemcpyDtoD_v2_ptds(dst: CUdeviceptr, src: CUdeviceptr, n: usize) => |real| memcpy_dtod(real, dst, src, n);
    fn cuMemcpy(dst: CUdeviceptr, src: CUdeviceptr, n: usize) => |real| memcpy(real, dst, src, n);
    fn cuMemcpy_ptds(dst: CUdeviceptr, src: CUdeviceptr, n: usize) => |real| memcpy(real, dst, src, n);
    fn cuMemcpyAsync(dst: CUdeviceptr, src: CUdeviceptr, n: usize, stream: CUstream)
        => |real| memcpy_async(real, dst, src, n, stream);
    fn cuMemcpyAsync_ptsz(dst: CUdeviceptr, src: CUdeviceptr, n: usize, stream: CUstream)
        => |real| memcpy_async(real, dst, src, n, stream);
    fn cuMemcpyHtoDAsync_v2(dst: CUdeviceptr, src: *const c_void, n: usize, stream: CUstream)
        => |real| memcpy_htod_async(real, dst, src, n, stream);
    fn cuMemcpyHtoDAsync_v2_ptsz(dst: CUdeviceptr, src: *const c_void, n: usize, stream: CUstream)
        => |real| memcpy_htod_async(real, dst, src, n, stream);
    fn cuMemcpyDtoHAsync_v2(dst: *mut c_void, src: CUdeviceptr, n: usize, stream: CUstream)
        => |real| memcpy_dtoh_async(real, dst, src, n, stream);
    fn cuMemcpyDtoHAsync_v2_ptsz(dst: *mut c_void, src: CUdeviceptr, n: usize, stream: CUstream)
        => |real| memcpy_dtoh_async(real, dst, src, n, stream);
    fn cuMemcpyDtoDAsync_v2(dst: CUdeviceptr, src: CUdeviceptr, n: usize, stream: CUstream)
        => |real| memcpy_dtod_async(real, dst, src, n, stream);
    fn cuMemcpyDtoDAsync_v2_ptsz(dst: CUdeviceptr, src: CUdeviceptr, n: usize, stream: CUstream)
        => |real| memcpy_dtod_async(real, dst, src, n, stream);
    fn cuMemcpy2D_v2(p: *const Memcpy2D) => |real| memcpy_2d(real, p);
    fn cuMemcpy2D_v2_ptds(p: *const Memcpy2D) => |real| memcpy_2d(real, p);
    fn cuMemcpy2DUnaligned_v2(p: *const Memcpy2D) => |real| memcpy_2d(real, p);
    fn cuMemcpy2DUnaligned_v2_ptds(p: *const Memcpy2D) => |real| memcpy_2d(real, p);
    fn cuMemcpy2DAsync_v2(p: *const Memcpy2D, stream: CUstream) => |real| memcpy_2d_async(real, p, stream);
    fn cuMemcpy2DAsync_v2_ptsz(p: *const Memcpy2D, stream: CUstream) => |real| memcpy_2d_async(real, p, stream);

    fn cuMemcpy3D_v2(p: *const Memcpy3D) => |real| memcpy_3d(real, p);
    fn cuMemcpy3D_v2_ptds(p: *const Memcpy3D) => |real| memcpy_3d(real, p);
    fn cuMemcpy3DAsync_v2(p: *const Memcpy3D, stream: CUstream) => |real| memcpy_3d_async(real, p, stream);
    fn cuMemcpy3DAsync_v2_ptsz(p: *const Memcpy3D, stream: CUstream) => |real| memcpy_3d_async(real, p, stream);
    fn cuMemcpyPeer(dst: CUdeviceptr, dctx: CUcontext, src: CUdeviceptr, sctx: CUcontext, n: usize)
        => |real| memcpy_peer(real, dst, dctx, src, sctx, n);
    fn cuMemcpyPeer_ptds(dst: CUdeviceptr, dctx: CUcontext, src: CUdeviceptr, sctx: CUcontext, n: usize)
        => |real| memcpy_peer(real, dst, dctx, src, sctx, n);
    fn cuMemcpyPeerAsync(dst: CUdeviceptr, dctx: CUcontext, src: CUdeviceptr, sctx: CUcontext, n: usize, s: CUstream)
        => |real| memcpy_peer_async(real, dst, dctx, src, sctx, n, s);
    fn cuMemcpyPeerAsync_ptsz(dst: CUdeviceptr, dctx: CUcontext, src: CUdeviceptr, sctx: CUcontext, n: usize, s: CUstream)
        => |real| memcpy_peer_async(real, dst, dctx, src, sctx, n, s);

    fn cuMemsetD8_v2(dst: CUdeviceptr, v: u8, n: usize) => |real| memset("cuMemsetD8", 1, real, dst, v, n);
    fn cuMemsetD8_v2_ptds(dst: CUdeviceptr, v: u8, n: usize) => |real| memset("cuMemsetD8", 1, real, dst, v, n);
    fn cuMemsetD16_v2(dst: CUdeviceptr, v: u16, n: usize) => |real| memset("cuMemsetD16", 2, real, dst, v, n);
    fn cuMemsetD16_v2_ptds(dst: CUdeviceptr, v: u16, n: usize) => |real| memset("cuMemsetD16", 2, real, dst, v, n);
    fn cuMemsetD32_v2(dst: CUdeviceptr, v: u32, n: usize) => |real| memset("cuMemsetD32", 4, real, dst, v, n);
    fn cuMemsetD32_v2_ptds(dst: CUdeviceptr, v: u32, n: usize) => |real| memset("cuMemsetD32", 4, real, dst, v, n);
    fn cuMemsetD8Async(dst: CUdeviceptr, v: u8, n: usize, s: CUstream)
        => |real| memset_async("cuMemsetD8Async", 1, real, dst, v, n, s);
    fn cuMemsetD8Async_ptsz(dst: CUdeviceptr, v: u8, n: usize, s: CUstream)
        => |real| memset_async("cuMemsetD8Async", 1, real, dst, v, n, s);
    fn cuMemsetD16Async(dst: CUdeviceptr, v: u16, n: usize, s: CUstream)
        => |real| memset_async("cuMemsetD16Async", 2, real, dst, v, n, s);
    fn cuMemsetD16Async_ptsz(dst: CUdeviceptr, v: u16, n: usize, s: CUstream)
        => |real| memset_async("cuMemsetD16Async", 2, real, dst, v, n, s);
    fn cuMemsetD32Async(dst: CUdeviceptr, v: u32, n: usize, s: CUstream)
        => |real| memset_async("cuMemsetD32Async", 4, real, dst, v, n, s);
    fn cuMemsetD32Async_ptsz(dst: CUdeviceptr, v: u32, n: usize, s: CUstream)
        => |real| memset_async("cuMemsetD32Async", 4, real, dst, v, n, s);
    fn cuMemsetD2D8_v2(dst: CUdeviceptr, pitch: usize, v: u8, w: usize, h: usize)
        => |real| memset_2d("cuMemsetD2D8", 1, real, dst, pitch, v, w, h);
    fn cuMemsetD2D8_v2_ptds(dst: CUdeviceptr, pitch: usize, v: u8, w: usize, h: usize)
        => |real| memset_2d("cuMemsetD2D8", 1, real, dst, pitch, v, w, h);
    fn cuMemsetD2D16_v2(dst: CUdeviceptr, pitch: usize, v: u16, w: usize, h: usize)
        => |real| memset_2d("cuMemsetD2D16", 2, real, dst, pitch, v, w, h);
    fn cuMemsetD2D32_v2(dst: CUdeviceptr, pitch: usize, v: u32, w: usize, h: usize)
        => |real| memset_2d("cuMemsetD2D32", 4, real, dst, pitch, v, w, h);
    fn cuMemsetD2D8Async(dst: CUdeviceptr, pitch: usize, v: u8, w: usize, h: usize, s: CUstream)
        => |real| memset_2d_async("cuMemsetD2D8Async", 1, real, dst, pitch, v, w, h, s);
    fn cuMemsetD2D8Async_ptsz(dst: CUdeviceptr, pitch: usize, v: u8, w: usize, h: usize, s: CUstream)
        => |real| memset_2d_async("cuMemsetD2D8Async", 1, real, dst, pitch, v, w, h, s);
    fn cuMemsetD2D32Async(dst: CUdeviceptr, pitch: usize, v: u32, w: usize, h: usize, s: CUstream)
        => |real| memset_2d_async("cuMemsetD2D32Async", 4, real, dst, pitch, v, w, h, s);
}

// ---- copies ------------------------------------------------------------------------

unsafe fn memcpy_htod(
    real: unsafe extern "C" fn(u64, *const c_void, usize) -> CUresult,
    dst: u64,
    src: *const c_void,
    n: usize,
) -> CUresult {
    check("cuMemcpyHtoD", || Call::Copy { dst: device(dst), src: Mem::Host(src as u64), count: n as u64 });
    real(dst, src, n)
}

unsafe fn memcpy_dtoh(
    real: unsafe extern "C" fn(*mut c_void, u64, usize) -> CUresult,
    dst: *mut c_void,
    src: u64,
    n: usize,
) -> CUresult {
    check("cuMemcpyDtoH", || Call::Copy { dst: Mem::Host(dst as u64), src: device(src), count: n as u64 });
    // A synchronous copy back is where most programs wait for their kernels.
    after_sync(real(dst, src, n))
}

unsafe fn memcpy_dtod(
    real: unsafe extern "C" fn(u64, u64, usize) -> CUresult,
    dst: u64,
    src: u64,
    n: usize,
) -> CUresult {
    check("cuMemcpyDtoD", || Call::Copy { dst: device(dst), src: device(src), count: n as u64 });
    real(dst, src, n)
}

unsafe fn memcpy(real: unsafe extern "C" fn(u64, u64, usize) -> CUresult, dst: u64, src: u64, n: usize) -> CUresult {
    check("cuMemcpy", || Call::Copy { dst: uva(dst), src: uva(src), count: n as u64 });
    real(dst, src, n)
}

unsafe fn memcpy_async(
    real: unsafe extern "C" fn(u64, u64, usize, CUstream) -> CUresult,
    dst: u64,
    src: u64,
    n: usize,
    s: CUstream,
) -> CUresult {
    check("cuMemcpyAsync", || Call::Copy { dst: uva(dst), src: uva(src), count: n as u64 });
    real(dst, src, n, s)
}

unsafe fn memcpy_htod_async(
    real: unsafe extern "C" fn(u64, *const c_void, usize, CUstream) -> CUresult,
    dst: u64,
    src: *const c_void,
    n: usize,
    s: CUstream,
) -> CUresult {
    check("cuMemcpyHtoDAsync", || Call::Copy { dst: device(dst), src: Mem::Host(src as u64), count: n as u64 });
    real(dst, src, n, s)
}

unsafe fn memcpy_dtoh_async(
    real: unsafe extern "C" fn(*mut c_void, u64, usize, CUstream) -> CUresult,
    dst: *mut c_void,
    src: u64,
    n: usize,
    s: CUstream,
) -> CUresult {
    check("cuMemcpyDtoHAsync", || Call::Copy { dst: Mem::Host(dst as u64), src: device(src), count: n as u64 });
    real(dst, src, n, s)
}

unsafe fn memcpy_dtod_async(
    real: unsafe extern "C" fn(u64, u64, usize, CUstream) -> CUresult,
    dst: u64,
    src: u64,
    n: usize,
    s: CUstream,
) -> CUresult {
    check("cuMemcpyDtoDAsync", || Call::Copy { dst: device(dst), src: device(src), count: n as u64 });
    real(dst, src, n, s)
}

fn side(mem_type: u32, host: u64, dev: u64, array: u64, x: usize, y: usize, pitch: usize) -> Mem {
    let offset = (y as u64).saturating_mul(pitch as u64).saturating_add(x as u64);
    match mem_type {
        1 => Mem::Host(host.wrapping_add(offset)),
        2 => device(dev.wrapping_add(offset)),
        3 => Mem::Array(array),
        _ => uva(dev.wrapping_add(offset)),
    }
}

unsafe fn check_2d(api: &'static str, p: *const Memcpy2D) {
    if p.is_null() {
        return;
    }
    let c = &*p;
    check(api, || Call::Copy2D {
        dst: side(c.dst_type, c.dst_host as u64, c.dst_device, c.dst_array as u64, c.dst_x, c.dst_y, c.dst_pitch),
        dpitch: c.dst_pitch as u64,
        src: side(c.src_type, c.src_host as u64, c.src_device, c.src_array as u64, c.src_x, c.src_y, c.src_pitch),
        spitch: c.src_pitch as u64,
        width: c.width as u64,
        height: c.height as u64,
    });
}

unsafe fn memcpy_2d(real: unsafe extern "C" fn(*const Memcpy2D) -> CUresult, p: *const Memcpy2D) -> CUresult {
    check_2d("cuMemcpy2D", p);
    real(p)
}

unsafe fn memcpy_2d_async(
    real: unsafe extern "C" fn(*const Memcpy2D, CUstream) -> CUresult,
    p: *const Memcpy2D,
    s: CUstream,
) -> CUresult {
    check_2d("cuMemcpy2DAsync", p);
    real(p, s)
}

// ---- sets --------------------------------------------------------------------------

unsafe fn memset<T: Copy>(
    api: &'static str,
    elem: u64,
    real: unsafe extern "C" fn(u64, T, usize) -> CUresult,
    dst: u64,
    v: T,
    n: usize,
) -> CUresult {
    check(api, || Call::Set { dst: device(dst), count: (n as u64).saturating_mul(elem) });
    real(dst, v, n)
}

unsafe fn memset_async<T: Copy>(
    api: &'static str,
    elem: u64,
    real: unsafe extern "C" fn(u64, T, usize, CUstream) -> CUresult,
    dst: u64,
    v: T,
    n: usize,
    s: CUstream,
) -> CUresult {
    check(api, || Call::Set { dst: device(dst), count: (n as u64).saturating_mul(elem) });
    real(dst, v, n, s)
}

unsafe fn memset_2d<T: Copy>(
    api: &'static str,
    elem: u64,
    real: unsafe extern "C" fn(u64, usize, T, usize, usize) -> CUresult,
    dst: u64,
    pitch: usize,
    v: T,
    w: usize,
    h: usize,
) -> CUresult {
    let width = (w as u64).saturating_mul(elem);
    check(api, || Call::Set2D { dst: device(dst), pitch: pitch as u64, width, height: h as u64 });
    real(dst, pitch, v, w, h)
}

unsafe fn memset_2d_async<T: Copy>(
    api: &'static str,
    elem: u64,
    real: unsafe extern "C" fn(u64, usize, T, usize, usize, CUstream) -> CUresult,
    dst: u64,
    pitch: usize,
    v: T,
    w: usize,
    h: usize,
    s: CUstream,
) -> CUresult {
    let width = (w as u64).saturating_mul(elem);
    check(api, || Call::Set2D { dst: device(dst), pitch: pitch as u64, width, height: h as u64 });
    real(dst, pitch, v, w, h, s)
}

// ---- 3-D and peer copies ---------------------------------------------------------------

fn base_of(mem_type: u32, host: u64, dev: u64, array: u64) -> Mem {
    match mem_type {
        1 => Mem::Host(host),
        2 => device(dev),
        3 => Mem::Array(array),
        _ => uva(dev),
    }
}

unsafe fn check_3d(api: &'static str, p: *const Memcpy3D) {
    if p.is_null() {
        return;
    }
    let c = &*p;
    check(api, || {
        let src = Pitched3D {
            mem: base_of(c.src_type, c.src_host as u64, c.src_device, c.src_array as u64),
            pitch: c.src_pitch as u64,
            rows: c.src_height as u64,
            pos: [c.src_x as u64, c.src_y as u64, c.src_z as u64],
        };
        let dst = Pitched3D {
            mem: base_of(c.dst_type, c.dst_host as u64, c.dst_device, c.dst_array as u64),
            pitch: c.dst_pitch as u64,
            rows: c.dst_height as u64,
            pos: [c.dst_x as u64, c.dst_y as u64, c.dst_z as u64],
        };
        let extent = Extent { width: c.width as u64, height: c.height as u64, depth: c.depth as u64 };
        Call::Copy3D { dst, src, extent }
    });
}

unsafe fn memcpy_3d(real: unsafe extern "C" fn(*const Memcpy3D) -> CUresult, p: *const Memcpy3D) -> CUresult {
    check_3d("cuMemcpy3D", p);
    real(p)
}

unsafe fn memcpy_3d_async(
    real: unsafe extern "C" fn(*const Memcpy3D, CUstream) -> CUresult,
    p: *const Memcpy3D,
    s: CUstream,
) -> CUresult {
    check_3d("cuMemcpy3DAsync", p);
    real(p, s)
}

unsafe fn memcpy_peer(
    real: unsafe extern "C" fn(u64, CUcontext, u64, CUcontext, usize) -> CUresult,
    dst: u64,
    dst_ctx: CUcontext,
    src: u64,
    src_ctx: CUcontext,
    n: usize,
) -> CUresult {
    check("cuMemcpyPeer", || peer(dst, dst_ctx, src, src_ctx, n as u64));
    real(dst, dst_ctx, src, src_ctx, n)
}

unsafe fn memcpy_peer_async(
    real: unsafe extern "C" fn(u64, CUcontext, u64, CUcontext, usize, CUstream) -> CUresult,
    dst: u64,
    dst_ctx: CUcontext,
    src: u64,
    src_ctx: CUcontext,
    n: usize,
    s: CUstream,
) -> CUresult {
    check("cuMemcpyPeerAsync", || peer(dst, dst_ctx, src, src_ctx, n as u64));
    real(dst, dst_ctx, src, src_ctx, n, s)
}

/// A peer copy: each side judged against its allocation and against the device of the
/// context the call names for it, where gpusan tracks both sides (memory only the driver
/// knows, an IPC mapping say, is not judged).
fn peer(dst: u64, dst_ctx: CUcontext, src: u64, src_ctx: CUcontext, count: u64) -> Call<'static> {
    match (device(dst), device(src), device_of(dst_ctx), device_of(src_ctx)) {
        (Mem::Device(dst), Mem::Device(src), Some(dst_device), Some(src_device)) => {
            Call::CopyPeer { dst, dst_device, src, src_device, count }
        }
        (dst, src, ..) => Call::Copy { dst, src, count },
    }
}

/// The device of context `ctx`, asked with it made current for the moment; none where it
/// cannot be made current (the current context's device would be a wrong answer).
fn device_of(ctx: CUcontext) -> Option<i32> {
    let (push, pop) = (real::cuCtxPushCurrent_v2()?, real::cuCtxPopCurrent_v2()?);
    if ctx.is_null() || unsafe { push(ctx) } != CUDA_SUCCESS {
        return None;
    }
    let dev = current_context().1;
    let mut popped: CUcontext = std::ptr::null_mut();
    // SAFETY: undoes the push above.
    unsafe { pop(&mut popped) };
    (dev >= 0).then_some(dev)
}
