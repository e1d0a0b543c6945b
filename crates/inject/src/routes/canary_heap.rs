//! Canary mode's device heap (`gpusan_passes::canary_heap`): a module whose kernels call
//! `malloc` or `free` is loaded rewritten, so that each block a kernel allocates has a
//! tail canary, compared when a kernel frees it. The module's secret and the address of
//! the records' buffer are written into its variables after the load; the guard reads the
//! buffer every round and at exit, and each record becomes a `canary_overwrite` finding
//! naming the device-heap block.
//!
//! The buffer is a page of the process's own memory registered with the driver (mapped,
//! portable), never unmapped: a context torn down takes its registration with it, not the
//! memory the guard reads. Records past its capacity are counted as lost.

use std::ffi::c_void;
use std::sync::atomic::{fence, AtomicU32, Ordering};
use std::sync::Mutex;

use gpusan_abi::canary::heap as abi;
use gpusan_runtime::locks;
use gpusan_runtime::per_process::PerProcess;
use gpusan_runtime::registry::AllocKind;
use gpusan_runtime::report::{AllocInfo, CanaryDetails, CanaryScan, Report, Stack};

use crate::driver::{real, CUdeviceptr, Loaded, CUDA_SUCCESS};
use crate::state::state;

const CU_MEMHOSTREGISTER_PORTABLE: u32 = 1;
const CU_MEMHOSTREGISTER_DEVICEMAP: u32 = 2;
/// `CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED`: registered in another context, portable.
const ALREADY_REGISTERED: u32 = 712;

/// The records' buffer and how far the guard has read it.
struct Buffer {
    host: usize,
    /// Its address for the kernels (the host address, under unified addressing).
    dev: CUdeviceptr,
    read: u32,
}

#[derive(Default)]
struct Heap {
    buffer: Option<Buffer>,
    /// Modules rewritten, and those whose PTX calls the heap but could not be (why).
    rewritten: u64,
    not_rewritten: Vec<String>,
    lost: u64,
}

static HEAP: PerProcess<Mutex<Heap>> = PerProcess::new(|| Mutex::new(Heap::default()));

fn with<R>(f: impl FnOnce(&mut Heap) -> R) -> R {
    f(&mut locks::lock(HEAP.get()))
}

/// The image to load instead of `image` (the caller's run is a canary run): its PTX
/// rewritten, NUL-terminated, when its kernels call the device heap; `None` to load it as
/// it is.
///
/// # Safety
/// `image` is what the program passed to a module load.
pub unsafe fn substitute(image: *const c_void) -> Option<Vec<u8>> {
    // Machine code only (no PTX) has no calls gpusan can rename: its blocks go unguarded,
    // as the report's note says of the device heap of machine code.
    let ptx = super::substitute::ptx_of(image, super::substitute::target_arch()).ok()?;
    // nvcc declares the heap's functions when a kernel calls them: a cheap test before the
    // parse.
    if !(ptx.contains(") malloc") || ptx.contains(".func free")) {
        return None;
    }
    match gpusan_passes::instrument(&ptx, &gpusan_passes::canary_heap::CanaryHeap) {
        Ok(out) if out.report.functions.is_empty() => None,
        Ok(out) => {
            let mut text = out.ptx.into_bytes();
            text.push(0);
            Some(text)
        }
        Err(e) => {
            with(|h| h.not_rewritten.push(format!("not rewritten: {e}")));
            None
        }
    }
}

/// The driver refused what [`substitute`] gave (the original is loaded instead).
pub fn refused(r: crate::driver::CUresult) {
    with(|h| h.not_rewritten.push(format!("the rewritten module was refused by the driver (error {r})")));
}

/// A module [`substitute`] gave was loaded: its secret and the buffer's address written.
pub fn loaded(module: Loaded, secret: u64) {
    let Some(dev) = buffer() else {
        with(|h| h.not_rewritten.push("the records' buffer could not be mapped".into()));
        return;
    };
    let ok = set(module, abi::SECRET_SYMBOL, secret) && set(module, abi::ERRORS_SYMBOL, dev);
    with(|h| {
        if ok {
            h.rewritten += 1;
        } else {
            h.not_rewritten.push("loaded rewritten, but its variables could not be written".into());
        }
    });
}

/// Writes `value` into the module's `u64` variable `name` (a library's: in the current
/// context, where asking for it loads the library's module).
fn set(module: Loaded, name: &str, value: u64) -> bool {
    let Some((at, 8)) = crate::capture::global_of(module, name) else { return false };
    // SAFETY: 8 bytes of ours copied to a variable of 8 bytes.
    unsafe { crate::capture::htod(at, &value as *const u64 as *const c_void, 8) }
}

/// The buffer's device address, mapped now if it is not yet.
fn buffer() -> Option<CUdeviceptr> {
    with(|h| {
        if let Some(b) = &h.buffer {
            return Some(b.dev);
        }
        let bytes = abi::BUFFER_BYTES.next_multiple_of(4096);
        // SAFETY: a fresh anonymous mapping of ours, never unmapped.
        let host = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if host == libc::MAP_FAILED {
            return None;
        }
        let (register, device_ptr) = (real::cuMemHostRegister_v2()?, real::cuMemHostGetDevicePointer_v2()?);
        let mut dev: CUdeviceptr = 0;
        // SAFETY: our mapping, its whole length; an out-parameter of ours.
        let ok = unsafe {
            let r = register(host, bytes, CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP);
            (r == CUDA_SUCCESS || r as u32 == ALREADY_REGISTERED) && device_ptr(&mut dev, host, 0) == CUDA_SUCCESS
        };
        if !ok {
            return None;
        }
        h.buffer = Some(Buffer { host: host as usize, dev, read: 0 });
        Some(dev)
    })
}

/// The records written since the last call, as findings (the guard calls this every round
/// and at exit; `epoch`: when the guard started; `unix_us`: now, the findings' time).
pub fn drain(secret: u64, epoch: std::time::Instant, unix_us: u64) {
    let records = with(|h| {
        let Some(b) = h.buffer.as_mut() else { return Vec::new() };
        // SAFETY: the buffer is ours and lives as long as the process.
        let count = unsafe { &*(b.host as *const AtomicU32) }.load(Ordering::Acquire);
        let whole = count.min(abi::RECORDS);
        let mut out = Vec::new();
        while b.read < whole {
            let at = b.host + (abi::HEADER_BYTES + b.read * abi::RECORD_BYTES) as usize;
            // SAFETY: within the buffer; the kernel sets the last word once the rest is written.
            let done = unsafe { &*((at + 24) as *const AtomicU32) }.load(Ordering::Acquire);
            if done == 0 {
                break;
            }
            fence(Ordering::Acquire);
            // SAFETY: as above.
            let word = |o: usize| unsafe { std::ptr::read_volatile((at + o) as *const u64) };
            let half = |o: usize| unsafe { std::ptr::read_volatile((at + o) as *const u32) };
            out.push((word(0), word(8), half(16), half(20), half(28) as u8));
            b.read += 1;
        }
        h.lost = u64::from(count.saturating_sub(abi::RECORDS));
        out
    });
    let now = std::time::Instant::now();
    for (base, size, first, bad, found) in records {
        let key = abi::heap_key(secret, base, size);
        let expected = (key >> (8 * (first % 8))) as u8;
        let details = CanaryDetails {
            allocation: AllocInfo {
                id: 0,
                base,
                size,
                kind: AllocKind::DeviceHeap,
                device: crate::driver::current_context().1,
                freed: true,
                alloc_stack: Stack::default(),
                free_stack: None,
                segment: None,
            },
            next: None,
            address: base + size + u64::from(first),
            offset_past_end: u64::from(first),
            bad_bytes: u64::from(bad),
            canary_bytes: u64::from(abi::CANARY_BYTES),
            expected,
            found,
            scan: CanaryScan::DeviceFree,
            detected_ms: now.duration_since(epoch).as_millis() as u64,
            // The canary is compared by the kernel that frees the block, not scanned.
            since_clean_scan_ms: 0,
            detected_unix_us: unix_us,
            scan_launched_unix_us: 0,
            scan_gpu_ns: None,
            // The record does not say which kernel freed the block.
            kernels: Vec::new(),
        };
        state().report(Report::canary(details));
    }
}

/// For the report: modules rewritten, why others were not, records lost.
pub fn summary() -> (u64, Vec<String>, u64) {
    with(|h| (h.rewritten, h.not_rewritten.clone(), h.lost))
}
