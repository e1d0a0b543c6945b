//! Memory of another process (`cudaIpcOpenMemHandle`, how NCCL and PyTorch's
//! `torch.multiprocessing` share device buffers between processes): registered where it is
//! opened, with the size of the exporter's allocation, so that copies into it are judged
//! and kernels checked against it; its last close is judged as a free and stays in the
//! registry as freed memory (in quarantine), so that a later copy through the stale pointer
//! is a use after free. The close itself reaches the driver at once: an exporter may free
//! its memory once every importer closed it, and holding the mapping back would keep
//! memory the exporter already gave back. The exporter's frees are not seen here (another
//! process's registry).
//!
//! The driver counts opens of one handle in a context and hands back the same pointer:
//! only the close that matches the first open ends the import.

use std::collections::HashMap;
use std::sync::Mutex;

use gpusan_runtime::locks;
use gpusan_runtime::per_process::PerProcess;
use gpusan_runtime::registry::{AllocKind, FreeApi, Lookup};

use super::judge::{record_alloc, site};
use super::memory::{free_common, Release};
use crate::driver::hook::hooks;
use crate::driver::types::CUipcMemHandle;
use crate::driver::{real, CUdeviceptr, CUresult, CUDA_SUCCESS};
use crate::state::{quietly, state};

hooks! {
    fn cuIpcOpenMemHandle_v2(dptr: *mut CUdeviceptr, handle: CUipcMemHandle, flags: u32)
        => |real| open(real, dptr, handle, flags);
    // The name programs built before CUDA 11 call: the same function.
    fn cuIpcOpenMemHandle(dptr: *mut CUdeviceptr, handle: CUipcMemHandle, flags: u32)
        => |real| open(real, dptr, handle, flags);
    fn cuIpcCloseMemHandle(dptr: CUdeviceptr) => |real| close(real, dptr);
}

/// Opens not yet closed, by the pointer the driver handed out (registered imports only).
static OPENS: PerProcess<Mutex<HashMap<u64, u32>>> = PerProcess::new(Default::default);
/// Imports whose size the driver did not say: not registered, so not judged.
static UNREGISTERED: PerProcess<std::sync::atomic::AtomicU64> = PerProcess::new(Default::default);

/// The report's word on imports gpusan could not bound, if any.
pub fn unregistered_note() -> Option<String> {
    let n = UNREGISTERED.get().load(std::sync::atomic::Ordering::Relaxed);
    (n > 0).then(|| {
        format!("{n} IPC open(s) (cudaIpcOpenMemHandle) went unchecked: the driver did not give the allocation's range")
    })
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
            let mut opens = locks::lock(OPENS.get());
            if let Some(n) = opens.get_mut(&p) {
                // The same handle again: the driver counted it.
                *n += 1;
                return;
            }
            // Opened again after its close: the freed import goes, this one is registered.
            if let Lookup::Freed { alloc, .. } = state().registry.lookup(p) {
                if alloc.base == p && alloc.kind == AllocKind::IpcImport {
                    state().registry.forget(p);
                }
            }
            // The exporter's allocation, as the driver maps it: its size is the range's.
            let (mut base, mut size) = (0u64, 0usize);
            let known = real::cuMemGetAddressRange_v2()
                .is_some_and(|range| range(&mut base, &mut size, p) == CUDA_SUCCESS && base == p && size > 0);
            if known {
                record_alloc(p, size as u64, AllocKind::IpcImport, site());
                opens.insert(p, 1);
            } else {
                UNREGISTERED.get().fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        });
    }
    r
}

unsafe fn close(real: unsafe extern "C" fn(CUdeviceptr) -> CUresult, dptr: CUdeviceptr) -> CUresult {
    let last = quietly(|| {
        let mut opens = locks::lock(OPENS.get());
        match opens.get_mut(&dptr) {
            Some(n) if *n > 1 => {
                *n -= 1;
                false
            }
            Some(_) => {
                opens.remove(&dptr);
                true
            }
            // Not an import gpusan registered (its size unknown), or closed already: the
            // driver answers, and a second close is judged below.
            None => {
                matches!(state().registry.lookup(dptr), Lookup::Freed { alloc, .. } if alloc.base == dptr && alloc.kind == AllocKind::IpcImport)
            }
        }
    });
    if last.unwrap_or(false) {
        free_common(FreeApi::IpcClose, "cuIpcCloseMemHandle", dptr, Release::Immediate, || real(dptr))
    } else {
        real(dptr)
    }
}
