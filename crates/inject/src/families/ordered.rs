//! Stream-ordered frees held in quarantine (`cuMemFreeAsync`, `cudaFreeAsync`): the pool
//! would hand the same address to the next `cuMemAllocAsync`, and a kernel still using the
//! freed pointer would then write into a live allocation, unseen. So the free does not reach
//! the driver at once: gpusan records an event on the program's stream where the free was
//! (the point in the stream after which the memory is free) and keeps the block. When the
//! quarantine lets it go, gpusan's own stream in the block's context waits on that event and
//! frees it there (`cuMemFreeAsync` on the private stream): stream order kept, no host
//! synchronization. A free gpusan cannot hold back (no event) reaches the driver at once,
//! as before.

use std::collections::HashMap;
use std::sync::Mutex;

use gpusan_runtime::locks;
use gpusan_runtime::per_process::PerProcess;
use gpusan_runtime::registry::Allocation;

use crate::driver::{real, CUdeviceptr, CUevent, CUresult, CUstream, CUDA_SUCCESS};

/// `CU_EVENT_DISABLE_TIMING`.
const DISABLE_TIMING: u32 = 2;

/// Held blocks: base → (event recorded where the program freed it, its context).
static HELD: PerProcess<Mutex<Option<HashMap<u64, (usize, u64)>>>> = PerProcess::new(|| Mutex::new(None));

fn with<R>(f: impl FnOnce(&mut HashMap<u64, (usize, u64)>) -> R) -> R {
    f(locks::lock(HELD.get()).get_or_insert_with(HashMap::new))
}

/// Holds the block at `base`, freed by the program on `stream`: `true` when held (the
/// program's free is then answered by gpusan), `false` when it must reach the driver now.
pub fn hold(base: CUdeviceptr, stream: CUstream) -> bool {
    let (Some(create), Some(record), Some(destroy)) =
        (real::cuEventCreate(), real::cuEventRecord(), real::cuEventDestroy_v2())
    else {
        return false;
    };
    let (context, _) = crate::driver::current_context();
    let mut event: CUevent = std::ptr::null_mut();
    // SAFETY: the driver's functions with an out-parameter of ours.
    unsafe {
        if create(&mut event, DISABLE_TIMING) != CUDA_SUCCESS || event.is_null() {
            return false;
        }
        if record(event, stream) != CUDA_SUCCESS {
            destroy(event);
            return false;
        }
    }
    with(|m| m.insert(base, (event as usize, context)));
    true
}

/// Gives a held block back to its pool, after the point in the program's stream where it
/// was freed. `None` when it is not held here (freed at once, or forgotten); else the
/// driver's answer.
pub fn release(a: &Allocation) -> Option<CUresult> {
    let (event, context) = with(|m| m.remove(&a.base))?;
    Some(real::in_context(context, || {
        let (Some(wait), Some(free), Some(destroy)) =
            (real::cuStreamWaitEvent(), real::cuMemFreeAsync(), real::cuEventDestroy_v2())
        else {
            return CUDA_SUCCESS;
        };
        let event = event as CUevent;
        // SAFETY: the driver's functions; the event and the block are the ones held.
        unsafe {
            let r = match crate::capture::own_stream() {
                Some(stream) if wait(stream, event, 0) == CUDA_SUCCESS => free(a.base, stream),
                // No stream of gpusan's: the legacy stream waits for every blocking stream.
                _ => {
                    let r = real::cuEventSynchronize().map_or(CUDA_SUCCESS, |s| s(event));
                    if r == CUDA_SUCCESS {
                        free(a.base, std::ptr::null_mut())
                    } else {
                        r
                    }
                }
            };
            destroy(event);
            r
        }
    }))
}

/// After blocks were given back to make room: the frees must have run before a retried
/// allocation can reuse their memory.
pub fn wait_for_releases() {
    if let (Some(stream), Some(sync)) = (crate::capture::own_stream(), real::cuStreamSynchronize()) {
        // SAFETY: gpusan's own stream.
        unsafe { sync(stream) };
    }
}

/// `context` is gone, and with it the events and blocks held of it.
pub fn context_gone(context: u64) {
    with(|m| m.retain(|_, (_, c)| *c != context));
}
