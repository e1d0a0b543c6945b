//! Memory of another process (`cudaIpcOpenMemHandle`, how NCCL and PyTorch's
//! `torch.multiprocessing` share device buffers between processes): registered where it is
//! opened, with the size of the exporter's allocation, so that copies into it are judged
//! and kernels checked against it; its close is judged as a free and held back in
//! quarantine like one, so that a use after the close finds it still mapped and marked
//! freed. The exporter's frees are not seen here (another process's registry).

use gpusan_runtime::registry::{AllocKind, FreeApi};

use super::judge::{record_alloc, site};
use super::memory::{free_common, Release};
use crate::driver::hook::hooks;
use crate::driver::types::CUipcMemHandle;
use crate::driver::{real, CUdeviceptr, CUresult, CUDA_SUCCESS};
use crate::state::quietly;

hooks! {
    fn cuIpcOpenMemHandle_v2(dptr: *mut CUdeviceptr, handle: CUipcMemHandle, flags: u32)
        => |real| open(real, dptr, handle, flags);
    // The name programs built before CUDA 11 call: the same function.
    fn cuIpcOpenMemHandle(dptr: *mut CUdeviceptr, handle: CUipcMemHandle, flags: u32)
        => |real| open(real, dptr, handle, flags);
    fn cuIpcCloseMemHandle(dptr: CUdeviceptr) => |real| close(real, dptr);
}

unsafe fn open(
    real: unsafe extern "C" fn(*mut CUdeviceptr, CUipcMemHandle, u32) -> CUresult,
    dptr: *mut CUdeviceptr,
    handle: CUipcMemHandle,
    flags: u32,
) -> CUresult {
    let r = real(dptr, handle, flags);
    if r == CUDA_SUCCESS && !dptr.is_null() {
        let p = *dptr;
        quietly(|| {
            // The exporter's allocation, as the driver maps it: its size is the range's.
            let range = real::cuMemGetAddressRange_v2()?;
            let (mut base, mut size) = (0u64, 0usize);
            (range(&mut base, &mut size, p) == CUDA_SUCCESS && base == p && size > 0).then_some(())?;
            record_alloc(p, size as u64, AllocKind::IpcImport, site());
            Some(())
        });
    }
    r
}

unsafe fn close(real: unsafe extern "C" fn(CUdeviceptr) -> CUresult, dptr: CUdeviceptr) -> CUresult {
    free_common(FreeApi::IpcClose, "cuIpcCloseMemHandle", dptr, Release::Deferred, || real(dptr))
}
