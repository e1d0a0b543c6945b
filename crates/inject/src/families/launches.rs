//! Kernel and graph launches: before one runs, the routes bring what its kernels read up to
//! date (`routes::launching`, `routes::before_launch_on`: the device ABI's allocation
//! table), count and log it. A graph's launch
//! allocates its memory again first (`graphs::launching`), and the memory of other graphs
//! that its free nodes free is freed after (`graphs::launched`). A graph's upload brings
//! them up to date too: the binary route gives patched kernels their params there.

// Handlers mirror the driver functions they stand for, arguments and all.
#![allow(clippy::too_many_arguments)]

use std::ffi::c_void;

use crate::driver::hook::hooks;
use crate::driver::{CUfunction, CUgraphExec, CUresult, CUstream};
use crate::routes::{before_launch_on, launching};

hooks! {
    fn cuLaunchKernel(f: CUfunction, gx: u32, gy: u32, gz: u32, bx: u32, by: u32, bz: u32, shmem: u32, stream: CUstream, params: *mut *mut c_void, extra: *mut *mut c_void)
        => |real| launch_kernel(real, f, [gx, gy, gz], [bx, by, bz], shmem, stream, params, extra);
    fn cuLaunchKernel_ptsz(f: CUfunction, gx: u32, gy: u32, gz: u32, bx: u32, by: u32, bz: u32, shmem: u32, stream: CUstream, params: *mut *mut c_void, extra: *mut *mut c_void)
        => |real| launch_kernel(real, f, [gx, gy, gz], [bx, by, bz], shmem, stream, params, extra);
    fn cuLaunchKernelEx(config: *const c_void, f: CUfunction, params: *mut *mut c_void, extra: *mut *mut c_void)
        => |real| launch_kernel_ex(real, config, f, params, extra);
    fn cuLaunchKernelEx_ptsz(config: *const c_void, f: CUfunction, params: *mut *mut c_void, extra: *mut *mut c_void)
        => |real| launch_kernel_ex(real, config, f, params, extra);
    fn cuLaunchCooperativeKernel(f: CUfunction, gx: u32, gy: u32, gz: u32, bx: u32, by: u32, bz: u32, shmem: u32, stream: CUstream, params: *mut *mut c_void)
        => |real| launch_cooperative(real, f, [gx, gy, gz], [bx, by, bz], shmem, stream, params);
    fn cuGraphLaunch(exec: CUgraphExec, stream: CUstream) => |real| graph_launch(real, exec, stream);
    fn cuGraphLaunch_ptsz(exec: CUgraphExec, stream: CUstream) => |real| graph_launch(real, exec, stream);
    // An upload gives the binary route's patched kernels in the graph their params blocks
    // (the Compute Sanitizer's node callbacks, where no driver call may be made): the
    // context's table and error buffer must be there first.
    fn cuGraphUpload(exec: CUgraphExec, stream: CUstream) => |real| { before_launch_on(stream); real(exec, stream) };
    fn cuGraphUpload_ptsz(exec: CUgraphExec, stream: CUstream) => |real| { before_launch_on(stream); real(exec, stream) };
}

type Params = *mut *mut c_void;

/// The launch [`launching`] prepared was made.
fn launched<R>(r: R) -> R {
    crate::routes::launch_made();
    r
}

unsafe fn launch_kernel(
    real: unsafe extern "C" fn(CUfunction, u32, u32, u32, u32, u32, u32, u32, CUstream, Params, Params) -> CUresult,
    f: CUfunction,
    grid: [u32; 3],
    block: [u32; 3],
    shmem: u32,
    stream: CUstream,
    params: Params,
    extra: Params,
) -> CUresult {
    if crate::routes::canary_diag::diag().bare_launch {
        return real(f, grid[0], grid[1], grid[2], block[0], block[1], block[2], shmem, stream, params, extra);
    }
    let run = launching(f, grid, block, stream);
    launched(real(run, grid[0], grid[1], grid[2], block[0], block[1], block[2], shmem, stream, params, extra))
}

unsafe fn launch_kernel_ex(
    real: unsafe extern "C" fn(*const c_void, CUfunction, Params, Params) -> CUresult,
    config: *const c_void,
    f: CUfunction,
    params: Params,
    extra: Params,
) -> CUresult {
    if crate::routes::canary_diag::diag().bare_launch {
        return real(config, f, params, extra);
    }
    // CUlaunchConfig: six grid/block dimensions and the shared memory size (seven u32s),
    // then the stream at offset 32.
    let stream =
        if config.is_null() { std::ptr::null_mut() } else { *(config.cast::<u8>().add(32) as *const CUstream) };
    let dims = |at: usize| if config.is_null() { [0; 3] } else { *(config.cast::<u8>().add(at) as *const [u32; 3]) };
    let run = launching(f, dims(0), dims(12), stream);
    launched(real(config, run, params, extra))
}

unsafe fn launch_cooperative(
    real: unsafe extern "C" fn(CUfunction, u32, u32, u32, u32, u32, u32, u32, CUstream, Params) -> CUresult,
    f: CUfunction,
    grid: [u32; 3],
    block: [u32; 3],
    shmem: u32,
    stream: CUstream,
    params: Params,
) -> CUresult {
    let run = launching(f, grid, block, stream);
    launched(real(run, grid[0], grid[1], grid[2], block[0], block[1], block[2], shmem, stream, params))
}

unsafe fn graph_launch(
    real: unsafe extern "C" fn(CUgraphExec, CUstream) -> CUresult,
    exec: CUgraphExec,
    stream: CUstream,
) -> CUresult {
    // The graph's allocations first: the launch's table must have them.
    let launch = crate::state::quietly(|| super::graphs::launching(exec)).flatten();
    // Launched into a capturing stream, the graph becomes a child node of the capture.
    before_launch_on(stream);
    crate::state::quietly(|| crate::routes::faults::graph_launched(exec as usize, stream as usize));
    let r = real(exec, stream);
    if r == crate::driver::CUDA_SUCCESS {
        crate::state::quietly(|| crate::routes::coverage::graph_launched(exec as usize, stream));
    }
    // What its free nodes freed of other graphs' memory (or, refused, what it did not allocate).
    if let Some(after) = launch.and_then(|l| crate::state::quietly(|| super::graphs::launched(l, stream, r))) {
        super::memory::after_graph_launch(after);
    }
    r
}
