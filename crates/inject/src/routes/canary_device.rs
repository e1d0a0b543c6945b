//! Canary mode's device side in one context: gpusan's module of three kernels (the write
//! at allocation, the update and the scan, `canary/gpusan_canary.cu`), its stream
//! (non-blocking, the lowest priority), its events, the entry array, and the command and
//! error buffers in mapped host memory. Every call is the real driver's, made by the guard
//! thread (or, for a write at allocation or a check before a free, by the program's thread)
//! with the context current; no kernel goes to the program's streams, so the program's
//! synchronizations, captures and events see none of it (a context-wide synchronization
//! waits at most for one short scan). The resources live as long as the context (the
//! driver takes them with it).

use std::ffi::{c_int, c_void, CString};
use std::time::{Duration, Instant};

use gpusan_abi::canary::{self as abi, Command, Entry, ErrorRecord};

use crate::driver::{real, CUdeviceptr, CUresult, CUDA_SUCCESS};

/// The module, as `build.rs` compiled it (16-aligned, as a fatbin is read).
#[repr(C, align(16))]
struct Aligned<T: ?Sized>(T);
static MODULE: &Aligned<[u8]> = &Aligned(*include_bytes!(concat!(env!("OUT_DIR"), "/gpusan_canary.fatbin")));

const CU_STREAM_NON_BLOCKING: u32 = 1;
const CU_EVENT_DISABLE_TIMING: u32 = 2;
const CU_MEMHOSTALLOC_PORTABLE: u32 = 1;
const CU_MEMHOSTALLOC_DEVICEMAP: u32 = 2;
const CUDA_ERROR_NOT_READY: CUresult = 600;

/// Host memory the device reads and writes (`cuMemHostAlloc` mapped).
pub struct Mapped {
    pub host: usize,
    pub dev: CUdeviceptr,
    pub bytes: usize,
}

impl Mapped {
    fn new(bytes: usize) -> Option<Mapped> {
        let (alloc, device_ptr) = (real::cuMemHostAlloc()?, real::cuMemHostGetDevicePointer_v2()?);
        let mut host: *mut c_void = std::ptr::null_mut();
        let mut dev: CUdeviceptr = 0;
        // SAFETY: out-parameters of ours, the driver's signatures.
        unsafe {
            if alloc(&mut host, bytes, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP) != CUDA_SUCCESS {
                return None;
            }
            std::ptr::write_bytes(host as *mut u8, 0, bytes);
            if device_ptr(&mut dev, host, 0) != CUDA_SUCCESS {
                real::cuMemFreeHost().map(|f| f(host));
                return None;
            }
        }
        Some(Mapped { host: host as usize, dev, bytes })
    }

    fn free(&self) {
        // SAFETY: memory this struct allocated, freed once (by the owner's `free`).
        unsafe { real::cuMemFreeHost().map(|f| f(self.host as *mut c_void)) };
    }
}

/// What a scan launched and not yet read is.
#[derive(Clone, Copy, Debug)]
pub struct InFlight {
    pub scan: u32,
    /// A periodic batch (timed from [`Device::run_batch`]'s start event).
    pub timed: bool,
    /// The program's launches recorded when it was launched (`faults::launch_count`).
    pub upto: u64,
    pub at: Instant,
    /// CLOCK_REALTIME (µs since the epoch) just before it was launched: a finding's time.
    pub launched_unix_us: u64,
}

/// One context's device resources.
pub struct Device {
    write: usize,
    update: usize,
    scan: usize,
    /// The update and scan of a small batch in one launch ([`one_launch`]).
    batch: usize,
    pub stream: usize,
    event: usize,
    /// Recorded before a batch's first kernel: with [`Device::event`], the batch's GPU time.
    start: usize,
    /// Recorded on the program's stream after a stream-ordered allocation, waited for by
    /// the guard stream before its canary is written.
    order: usize,
    entries: CUdeviceptr,
    capacity: u32,
    /// Arrays replaced by larger ones: freed once no scan can read them.
    old: Vec<CUdeviceptr>,
    pub commands: Mapped,
    errors: Mapped,
    /// Entries of a one-off scan (a check before a free, the final scans).
    extra: Option<Mapped>,
    pub in_flight: Option<InFlight>,
    /// The program's launch count when the last batch was taken, and how many rounds since
    /// then found nothing changed (`routes::canary::tick`'s back-off).
    pub last_upto: Option<u64>,
    pub quiet_rounds: u32,
    /// A call failed (a fault in the context, a driver refusing): no more launches here.
    pub broken: bool,
}

// SAFETY: the handles are the driver's, used under the guard's lock only.
unsafe impl Send for Device {}

fn function(module: usize, name: &str) -> Option<usize> {
    let get = real::cuModuleGetFunction()?;
    let name = CString::new(name).ok()?;
    let mut f: *mut c_void = std::ptr::null_mut();
    // SAFETY: an out-parameter of ours, a NUL-terminated name.
    (unsafe { get(&mut f, module as *mut c_void, name.as_ptr()) } == CUDA_SUCCESS).then_some(f as usize)
}

/// Whether a batch of `commands` commands and `count` entries runs as one launch of the
/// batch kernel (`GPUSAN_CANARY_DIAG=two_kernels`: never, for comparison): the guard's
/// rounds then cost the program's GPU one kernel each, and its thread one launch.
fn one_launch(commands: usize, count: u32) -> bool {
    let diag = super::canary_diag::diag();
    // `empty_kernels` launches the batch kernel with nothing in it (its driver calls alone).
    (count != 0 || diag.empty_kernels)
        && commands <= abi::BATCH_MAX_COMMANDS
        && count <= abi::BATCH_MAX_ENTRIES
        && !diag.two_kernels
}

impl Device {
    /// Loads the module and makes the stream, event and buffers, in the current context.
    pub fn create() -> Option<Device> {
        let mut module: *mut c_void = std::ptr::null_mut();
        // SAFETY: the embedded fatbin, aligned; an out-parameter of ours.
        if unsafe { real::cuModuleLoadData()?(&mut module, MODULE.0.as_ptr() as *const c_void) } != CUDA_SUCCESS {
            return None;
        }
        let module = module as usize;
        let write = function(module, abi::WRITE_KERNEL)?;
        let (update, scan) = (function(module, abi::UPDATE_KERNEL)?, function(module, abi::SCAN_KERNEL)?);
        let batch = function(module, abi::BATCH_KERNEL)?;
        let (mut least, mut greatest): (c_int, c_int) = (0, 0);
        // SAFETY: out-parameters of ours. The lowest priority is the range's "least" value.
        unsafe { real::cuCtxGetStreamPriorityRange().map(|f| f(&mut least, &mut greatest)) };
        let mut stream: *mut c_void = std::ptr::null_mut();
        // SAFETY: as above; a non-blocking stream, which the legacy stream does not wait for.
        let made = unsafe {
            match real::cuStreamCreateWithPriority() {
                Some(f) => f(&mut stream, CU_STREAM_NON_BLOCKING, least),
                None => real::cuStreamCreate()?(&mut stream, CU_STREAM_NON_BLOCKING),
            }
        };
        if made != CUDA_SUCCESS {
            return None;
        }
        // Timed: a scan's GPU time is what detection latency is made of (GMOD's measure).
        let (mut event, mut start): (*mut c_void, *mut c_void) = (std::ptr::null_mut(), std::ptr::null_mut());
        // SAFETY: out-parameters of ours.
        unsafe {
            let create = real::cuEventCreate()?;
            if create(&mut event, 0) != CUDA_SUCCESS || create(&mut start, 0) != CUDA_SUCCESS {
                return None;
            }
        }
        let mut order: *mut c_void = std::ptr::null_mut();
        // SAFETY: an out-parameter of ours.
        if unsafe { real::cuEventCreate()?(&mut order, CU_EVENT_DISABLE_TIMING) } != CUDA_SUCCESS {
            return None;
        }
        let errors = Mapped::new(abi::ERRORS_BYTES)?;
        let commands = Mapped::new(64 * abi::COMMAND_BYTES)?;
        Some(Device {
            write,
            update,
            scan,
            batch,
            stream: stream as usize,
            event: event as usize,
            start: start as usize,
            order: order as usize,
            entries: 0,
            capacity: 0,
            old: Vec::new(),
            commands,
            errors,
            extra: None,
            in_flight: None,
            last_upto: None,
            quiet_rounds: 0,
            broken: false,
        })
    }

    /// The event recorded after the last scan launched.
    pub fn event(&self) -> usize {
        self.event
    }

    /// The GPU time of the last batch (its update and scan kernels), in microseconds, when
    /// the driver can tell (call once its event is done).
    pub fn batch_us(&self) -> Option<u64> {
        let f = real::cuEventElapsedTime()?;
        let mut ms = 0f32;
        // SAFETY: our two events, both recorded on our stream, the second done.
        let r = unsafe { f(&mut ms, self.start as *mut c_void, self.event as *mut c_void) };
        (r == CUDA_SUCCESS && ms >= 0.0).then(|| (f64::from(ms) * 1000.0).round() as u64)
    }

    /// Whether the last scan launched is done (a failed query breaks the context's guard).
    pub fn done(&mut self) -> bool {
        if self.in_flight.is_none() {
            return true;
        }
        // SAFETY: our event.
        match unsafe { real::cuEventQuery().map(|f| f(self.event as *mut c_void)) } {
            Some(CUDA_SUCCESS) => true,
            Some(CUDA_ERROR_NOT_READY) => false,
            _ => {
                self.broken = true;
                true
            }
        }
    }

    /// Waits (polling, never past `deadline`) for the last scan: false if it is not done.
    pub fn wait(&mut self, deadline: Instant) -> bool {
        while !self.done() {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_micros(50));
        }
        true
    }

    /// The records written since the last read (the count reset for the next scan), and how
    /// many were claimed past the buffer's capacity.
    pub fn take_records(&mut self) -> (Vec<ErrorRecord>, u64) {
        let p = self.errors.host as *mut u8;
        // A context torn down behind gpusan's back took the buffer with it.
        if !crate::driver::peek::readable(p, abi::ERRORS_BYTES) {
            self.broken = true;
            return (Vec::new(), 0);
        }
        // SAFETY: the mapped buffer of ours, `ERRORS_BYTES` long; volatile: the device wrote it.
        let count = unsafe { std::ptr::read_volatile(p as *const u32) } as usize;
        let len = abi::ERRORS_HEADER_BYTES + count.min(abi::ERROR_CAPACITY) * abi::ERROR_RECORD_BYTES;
        // SAFETY: as above, within the buffer.
        let bytes: Vec<u8> = (0..len).map(|i| unsafe { std::ptr::read_volatile(p.add(i)) }).collect();
        let (count, records) = gpusan_runtime::canary::read_records(&bytes);
        // SAFETY: as above: the count, reset for the next scan.
        unsafe { std::ptr::write_volatile(p as *mut u32, 0) };
        (records, u64::from(count).saturating_sub(abi::ERROR_CAPACITY as u64))
    }

    /// Makes the entry array hold `capacity` slots (a new array: the old one is freed later).
    pub fn ensure_capacity(&mut self, capacity: u32) -> bool {
        if capacity <= self.capacity {
            return true;
        }
        let Some(alloc) = real::cuMemAlloc_v2() else { return false };
        let mut p: CUdeviceptr = 0;
        // SAFETY: an out-parameter of ours.
        if unsafe { alloc(&mut p, capacity as usize * abi::ENTRY_BYTES) } != CUDA_SUCCESS {
            return false;
        }
        if self.entries != 0 {
            self.old.push(self.entries);
        }
        self.entries = p;
        self.capacity = capacity;
        true
    }

    /// Room for `n` commands in the command buffer (replaced when too small; the caller
    /// holds it only between two batches, none in flight).
    pub fn ensure_commands(&mut self, n: usize) -> bool {
        let bytes = n * abi::COMMAND_BYTES;
        if bytes <= self.commands.bytes {
            return true;
        }
        let Some(new) = Mapped::new(bytes.next_power_of_two()) else { return false };
        self.commands.free();
        self.commands = new;
        true
    }

    /// Frees what earlier scans may have read (none is in flight now).
    pub fn free_old(&mut self) {
        for p in std::mem::take(&mut self.old) {
            // SAFETY: arrays of ours no launch in flight reads.
            unsafe { real::cuMemFree_v2().map(|f| f(p)) };
        }
    }

    fn launch(&mut self, f: usize, blocks: u32, params: &mut [*mut c_void]) -> bool {
        let Some(launch) = real::cuLaunchKernel() else { return false };
        let threads = abi::BLOCK_THREADS;
        // SAFETY: our kernel, its parameters as `gpusan_canary.cu` declares them.
        let r = unsafe {
            launch(
                f as *mut c_void,
                blocks.max(1),
                1,
                1,
                threads,
                1,
                1,
                0,
                self.stream as *mut c_void,
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        };
        if r != CUDA_SUCCESS {
            self.broken = true;
        }
        r == CUDA_SUCCESS
    }

    /// Writes the canary `[start, start + len)` now, on the guard stream (before any later
    /// batch and scan). A stream-ordered allocation's memory is the program's only from
    /// its place in `after` on (the pool may hand out memory whose last user's kernels are
    /// still queued there): the write waits for that place, through an event.
    pub fn write_now(&mut self, secret: u64, start: u64, len: u32, after: Option<u64>) -> bool {
        if self.broken {
            return false;
        }
        if let Some(stream) = after {
            if !self.wait_for(&[stream]) {
                return false;
            }
        }
        let (mut s, mut st, mut n) = (secret, start, len);
        let mut params: [*mut c_void; 3] = [&mut s as *mut u64 as _, &mut st as *mut u64 as _, &mut n as *mut u32 as _];
        self.launch(self.write, len.div_ceil(abi::BLOCK_THREADS).min(8), &mut params)
    }

    /// Makes the guard stream wait for the work queued so far in each of `streams` (the
    /// program's: an event of ours recorded there, which the program never sees).
    pub fn wait_for(&mut self, streams: &[u64]) -> bool {
        let (Some(record), Some(wait)) = (real::cuEventRecord(), real::cuStreamWaitEvent()) else { return false };
        streams.iter().all(|&stream| {
            // `CU_STREAM_PER_THREAD` would name the guard thread's own: the legacy stream,
            // which waits for every blocking stream, stands for the program thread's.
            let stream = if stream == 2 { 1 } else { stream };
            // SAFETY: our event, the program's stream, our stream.
            unsafe {
                record(self.order as *mut c_void, stream as *mut c_void) == CUDA_SUCCESS
                    && wait(self.stream as *mut c_void, self.order as *mut c_void, 0) == CUDA_SUCCESS
            }
        })
    }

    /// Copies `commands` into the command buffer, which no kernel reads now (`ensure_commands`
    /// made room): done under the lock disarms take, so that a cancel of one of them, from
    /// then on, is a write into the buffer the update kernel will read.
    pub fn stage_commands(&mut self, commands: &[Command]) {
        // SAFETY: the buffer holds them (`ensure_commands`), and no kernel reads it now.
        unsafe { std::ptr::copy_nonoverlapping(commands.as_ptr(), self.commands.host as *mut Command, commands.len()) };
    }

    /// Writes the `commands` staged ([`Device::stage_commands`]: this many) then scans `count`
    /// entries, in one launch when the batch is small ([`one_launch`]); the event marks the
    /// end. `timed`: the batch's GPU time is measured (an event more, so not every batch:
    /// [`Device::batch_us`]).
    pub fn run_batch(&mut self, secret: u64, commands: usize, count: u32, scan: u32, timed: bool) -> bool {
        if timed {
            // SAFETY: our event and stream.
            let r = unsafe { real::cuEventRecord().map(|f| f(self.start as *mut c_void, self.stream as *mut c_void)) };
            if r != Some(CUDA_SUCCESS) {
                self.broken = true;
                return false;
            }
        }
        if one_launch(commands, count) {
            let (mut s, mut e, mut c) = (secret, self.entries, self.commands.dev);
            let (mut n, mut k, mut errors, mut sc) = (commands as u32, count, self.errors.dev, scan);
            let mut params: [*mut c_void; 7] = [
                &mut s as *mut u64 as _,
                &mut e as *mut u64 as _,
                &mut c as *mut u64 as _,
                &mut n as *mut u32 as _,
                &mut k as *mut u32 as _,
                &mut errors as *mut u64 as _,
                &mut sc as *mut u32 as _,
            ];
            let blocks = if super::canary_diag::diag().wide_batch { count.div_ceil(abi::BLOCK_THREADS) } else { 1 };
            return self.launch(self.batch, blocks, &mut params) && self.record();
        }
        if commands != 0 {
            let (mut s, mut e, mut c, mut n) = (secret, self.entries, self.commands.dev, commands as u32);
            let warps_per_block = abi::BLOCK_THREADS / 32;
            let blocks = (n.div_ceil(warps_per_block)).min(64);
            let mut params: [*mut c_void; 4] =
                [&mut s as *mut u64 as _, &mut e as *mut u64 as _, &mut c as *mut u64 as _, &mut n as *mut u32 as _];
            if !self.launch(self.update, blocks, &mut params) {
                return false;
            }
        }
        self.scan_entries(secret, self.entries, count, scan) && self.record()
    }

    fn scan_entries(&mut self, secret: u64, entries: CUdeviceptr, count: u32, scan: u32) -> bool {
        if count == 0 {
            return true;
        }
        let (mut s, mut e, mut n, mut errors, mut sc) = (secret, entries, count, self.errors.dev, scan);
        let blocks = count.div_ceil(abi::BLOCK_THREADS).min(abi::SCAN_MAX_BLOCKS);
        let mut params: [*mut c_void; 5] = [
            &mut s as *mut u64 as _,
            &mut e as *mut u64 as _,
            &mut n as *mut u32 as _,
            &mut errors as *mut u64 as _,
            &mut sc as *mut u32 as _,
        ];
        self.launch(self.scan, blocks, &mut params)
    }

    fn record(&mut self) -> bool {
        // SAFETY: our event and stream.
        let r = unsafe { real::cuEventRecord().map(|f| f(self.event as *mut c_void, self.stream as *mut c_void)) };
        if r != Some(CUDA_SUCCESS) {
            self.broken = true;
        }
        r == Some(CUDA_SUCCESS)
    }

    /// Scans `entries` (copied to mapped memory the kernel reads) once, now: the caller
    /// waits for it (`wait`) and reads its records, whose index is into `entries`.
    pub fn scan_once(&mut self, secret: u64, entries: &[Entry], scan: u32) -> bool {
        if entries.is_empty() {
            return true;
        }
        let bytes = entries.len() * abi::ENTRY_BYTES;
        if self.extra.as_ref().is_none_or(|m| m.bytes < bytes) {
            let Some(m) = Mapped::new(bytes.next_power_of_two().max(4096)) else { return false };
            if let Some(old) = self.extra.replace(m) {
                old.free();
            }
        }
        let Some(extra) = &self.extra else { return false };
        let (host, dev) = (extra.host, extra.dev);
        // SAFETY: the buffer holds them; no kernel reads it now (the caller waited).
        unsafe { std::ptr::copy_nonoverlapping(entries.as_ptr(), host as *mut Entry, entries.len()) };
        self.scan_entries(secret, dev, entries.len() as u32, scan) && self.record()
    }

    /// Device memory the guard holds here (the entry arrays).
    pub fn array_bytes(&self) -> u64 {
        u64::from(self.capacity) * abi::ENTRY_BYTES as u64
    }
}
