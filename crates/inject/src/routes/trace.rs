//! `gpusan trace` (issue 19): the run's trace (`docs/trace-format.md`) written as the program
//! runs: every allocation, pool block (a tensor) and free the registry sees, in the order it
//! sees them, and every kernel launch with its name and shape.
//!
//! The device's side, where the binary route patches the kernels (`gpusan trace`: `--mode
//! check --route binary`): every global, shared and local access, one record per warp, from
//! the patches into each context's trace buffer (`gpusan_abi::binary::TRACE_*`). After each
//! launch the run waits for the kernel and drains the buffer into the trace: a traced run
//! is serialized, one kernel at a time, so that every record belongs to the kernel just
//! launched and is resolved to the allocation (pool block first) the registry holds at that
//! address then. Records a full buffer dropped are counted. A long run can be traced in part
//! (`--sample-launches FIRST:EVERY`): a launch the sample leaves out gets its kernel's twin
//! params block, with no trace buffer (`binary.rs`), is not waited for and is not in the
//! trace. These are GPUArmor-HWOnly
//! traces (every access, no LOADMETA/MEMCHECK points): the check pass's points are not
//! traced yet. Not drained: launches during a stream capture (a synchronization would end
//! the capture), and graphs.
//!
//! Each process writes its own trace: the first at the path asked (`$GPUSAN_TRACE_OUT`), a
//! child made by `fork` or another process of the run at `PATH.PID`. A trace is finished
//! at exit; a process that dies first leaves a trace cut after its last whole chunk, which
//! `gpusan sim` reads up to there and says so.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::BufWriter;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use gpusan_runtime::locks;
use gpusan_runtime::per_process::PerProcess;
use gpusan_runtime::registry::{Allocation, Observer};
use gpusan_trace::{Event, KernelInfo, Meta, Writer};

use gpusan_abi::env::{LaunchSample, TRACE_OUT, TRACE_SAMPLE};

pub struct Trace {
    path: String,
    writer: Mutex<Option<Writer<BufWriter<File>>>>,
    /// Events written, once finished.
    finished: Mutex<Option<u64>>,
    kernels: AtomicU32,
    names: Mutex<HashMap<usize, String>>,
    /// Device records drained, and dropped by a full buffer.
    drained: std::sync::atomic::AtomicU64,
    dropped: std::sync::atomic::AtomicU64,
    /// `--sample-launches`: which launches are traced; each kernel's launches so far, and
    /// those left out.
    sample: Option<LaunchSample>,
    launches: Mutex<HashMap<usize, u64>>,
    left_out: std::sync::atomic::AtomicU64,
}

std::thread_local! {
    /// Whether the launch this thread is making is traced (set by [`launched`], read by
    /// [`after_launch`]; the binary route is told too, `binary::trace_sample`).
    static TAKEN: std::cell::Cell<bool> = const { std::cell::Cell::new(true) };
}

static TRACE: PerProcess<Option<Arc<Trace>>> = PerProcess::new(open);
/// Why this process's trace could not be made.
static FAILED: PerProcess<Mutex<Option<String>>> = PerProcess::new(|| Mutex::new(None));

fn open() -> Option<Arc<Trace>> {
    let path = std::env::var_os(TRACE_OUT)?;
    let create = |p: &std::ffi::OsStr| OpenOptions::new().write(true).create_new(true).open(p);
    let mut other = path.clone();
    other.push(format!(".{}", std::process::id()));
    let (file, at) = match create(&path) {
        Ok(f) => (Ok(f), path),
        Err(_) => (create(&other), other),
    };
    let at = at.to_string_lossy().into_owned();
    let file = match file {
        Ok(f) => f,
        Err(e) => {
            *locks::lock(FAILED.get()) = Some(format!("trace: not written: {at}: {e}"));
            return None;
        }
    };
    let program = std::env::args().collect::<Vec<_>>().join(" ");
    let sample = match std::env::var(TRACE_SAMPLE) {
        Ok(s) => match LaunchSample::parse(&s) {
            Ok(sample) => Some(sample),
            Err(why) => {
                // Every launch traced instead, and said (`gpusan run` checks the option first).
                *locks::lock(FAILED.get()) = Some(format!("trace: ${TRACE_SAMPLE} {why}: every launch traced"));
                None
            }
        },
        Err(_) => None,
    };
    let meta = Meta {
        program,
        sample_warps: 1,
        sample_launches: sample.map(|s| format!("{}:{}", s.first, s.every)).unwrap_or_default(),
        source: "gpusan trace (allocations, pool blocks, frees, launches; each warp's accesses where the binary route patched the kernels)".into(),
        ..Meta::default()
    };
    let writer = Writer::new(BufWriter::with_capacity(1 << 20, file), &meta, Default::default()).ok()?;
    // SAFETY: a function of ours with the signature atexit takes.
    unsafe { libc::atexit(finish_at_exit) };
    Some(Arc::new(Trace {
        path: at,
        writer: Mutex::new(Some(writer)),
        finished: Mutex::new(None),
        kernels: AtomicU32::new(0),
        names: Mutex::new(HashMap::new()),
        drained: Default::default(),
        dropped: Default::default(),
        sample,
        launches: Mutex::new(HashMap::new()),
        left_out: Default::default(),
    }))
}

/// This process's trace, if the run asked for one.
pub fn get() -> Option<Arc<Trace>> {
    TRACE.get().clone()
}

impl Trace {
    fn push(&self, e: &Event) {
        if let Some(w) = locks::lock(&self.writer).as_mut() {
            // A write that fails (a full disk) loses the event; the program goes on.
            let _ = w.push(e);
        }
    }
}

/// What the registry tells the trace.
pub struct TraceObserver(pub Arc<Trace>);

/// This process's registry observer, if the run asked for a trace
/// (`state::observe_registries_with`).
pub fn observer() -> Option<Box<dyn Observer>> {
    get().map(|t| Box::new(TraceObserver(t)) as Box<dyn Observer>)
}

impl Observer for TraceObserver {
    fn allocated(&self, a: &Allocation) {
        self.0.push(&Event { epoch: 0, ..Event::alloc(a.id as u32, a.base, a.size) });
    }
    fn freed(&self, a: &Allocation) {
        self.0.push(&Event::free(a.id as u32));
    }
}

/// A kernel launched (its name known to coverage by now): in the trace, unless the sample
/// leaves it out.
pub fn launched(f: usize, grid: [u32; 3], block: [u32; 3]) {
    let Some(t) = TRACE.get().as_ref() else { return };
    let taken = t.sample.is_none_or(|s| {
        let mut launches = locks::lock(&t.launches);
        let n = launches.entry(f).or_default();
        *n += 1;
        s.takes(*n - 1)
    });
    TAKEN.with(|c| c.set(taken));
    if t.sample.is_some() {
        // The binary route gives a launch left out its kernel's block with no trace buffer.
        super::binary::trace_sample(taken);
    }
    if !taken {
        t.left_out.fetch_add(1, Ordering::Relaxed);
        return;
    }
    let kernel = t.kernels.fetch_add(1, Ordering::Relaxed);
    let name = locks::lock(&t.names).entry(f).or_insert_with(|| super::coverage::name_of(f)).clone();
    if let Some(w) = locks::lock(&t.writer).as_mut() {
        let _ = w.kernel_begin(&KernelInfo { kernel, name, grid, block });
    }
}

/// The launch just made is done with: where the binary route gave its kernel a trace buffer,
/// waits for it and drains every context's buffer into the trace, then ends the kernel.
pub fn after_launch() {
    let Some(t) = TRACE.get().as_ref() else { return };
    if !TAKEN.with(|c| c.replace(true)) {
        return;
    }
    let kernel = t.kernels.load(Ordering::Relaxed).saturating_sub(1);
    let buffers = super::binary::trace_buffers();
    if !buffers.is_empty() && !crate::capture::any() {
        for (context, buffer) in buffers {
            crate::driver::real::in_context(context, || drain(t, kernel, buffer));
        }
    }
    if let Some(w) = locks::lock(&t.writer).as_mut() {
        let _ = w.push(&Event::kernel_end(kernel));
    }
}

/// Waits for the current context's work, then moves `buffer`'s records into the trace and
/// empties it.
fn drain(t: &Trace, kernel: u32, buffer: u64) {
    use gpusan_abi::binary::{
        TRACE_CURSOR, TRACE_HEADER_BYTES, TRACE_HI, TRACE_LANES, TRACE_LO, TRACE_OP, TRACE_RECORD_BYTES, TRACE_SM,
        TRACE_WARP,
    };
    use gpusan_runtime::registry::blocks::PoolPlace;
    use gpusan_runtime::registry::Lookup;
    let (Some(sync), Some(dtoh), Some(htod)) = (
        crate::driver::real::cuCtxSynchronize(),
        crate::driver::real::cuMemcpyDtoH_v2(),
        crate::driver::real::cuMemcpyHtoD_v2(),
    ) else {
        return;
    };
    let mut cursor = [0u8; 8];
    // SAFETY: the driver's functions; a buffer of ours, the trace buffer's header.
    let ok = unsafe {
        sync() == crate::driver::CUDA_SUCCESS
            && dtoh(cursor.as_mut_ptr().cast(), buffer + TRACE_CURSOR.offset as u64, 8) == crate::driver::CUDA_SUCCESS
    };
    if !ok {
        return;
    }
    let reserved = u64::from_le_bytes(cursor);
    if reserved == 0 {
        return;
    }
    let n = reserved.min(super::binary::TRACE_RECORDS);
    t.dropped.fetch_add(reserved - n, Ordering::Relaxed);
    let mut bytes = vec![0u8; (n * TRACE_RECORD_BYTES) as usize];
    let zero = [0u8; 8];
    // SAFETY: as above; `bytes` holds the `n` records read.
    let ok = unsafe {
        dtoh(bytes.as_mut_ptr().cast(), buffer + TRACE_HEADER_BYTES, bytes.len()) == crate::driver::CUDA_SUCCESS
            && htod(buffer + TRACE_CURSOR.offset as u64, zero.as_ptr().cast(), 8) == crate::driver::CUDA_SUCCESS
    };
    if !ok {
        return;
    }
    let registry = &crate::state::state().registry;
    let field = |r: &[u8], f: gpusan_abi::Field| -> u64 {
        r[f.offset..f.end()].iter().rev().fold(0u64, |v, &b| v << 8 | u64::from(b))
    };
    let mut events = Vec::with_capacity(n as usize);
    for r in bytes.chunks_exact(TRACE_RECORD_BYTES as usize) {
        let (lo, hi) = (field(r, TRACE_LO), field(r, TRACE_HI));
        let op = gpusan_trace::Op(field(r, TRACE_OP) as u8);
        // The allocation: a pool's block (a tensor) before its segment.
        let alloc = if op.space() != gpusan_trace::Space::Global {
            0
        } else {
            match registry.pool_place(lo) {
                PoolPlace::Block(a) => a.id,
                _ => match registry.lookup(lo) {
                    Lookup::Live { alloc, .. } | Lookup::Freed { alloc, .. } => alloc.id,
                    Lookup::Outside { .. } => 0,
                },
            }
        };
        events.push(Event {
            lanes: field(r, TRACE_LANES) as u8,
            ..Event::access(
                kernel,
                field(r, TRACE_SM) as u32,
                field(r, TRACE_WARP) as u32,
                op,
                lo,
                hi.saturating_sub(lo),
                alloc as u32,
            )
        });
    }
    t.drained.fetch_add(n, Ordering::Relaxed);
    if let Some(w) = locks::lock(&t.writer).as_mut() {
        for e in &events {
            let _ = w.push(e);
        }
    }
}

extern "C" fn finish_at_exit() {
    crate::driver::boundary::enter("exit", || {
        if let Some(Some(t)) = TRACE.existing() {
            if let Some(w) = locks::lock(&t.writer).take() {
                let events = w.events();
                if w.finish().is_ok() {
                    *locks::lock(&t.finished) = Some(events);
                }
            }
        }
    });
}

/// The report's word on the trace: where it went and what it holds, or why there is none.
pub fn notes() -> Vec<String> {
    let mut out: Vec<String> = locks::lock(FAILED.get()).iter().cloned().collect();
    if let Some(Some(t)) = TRACE.existing() {
        out.push(match *locks::lock(&t.finished) {
            Some(n) => {
                let (drained, dropped) = (t.drained.load(Ordering::Relaxed), t.dropped.load(Ordering::Relaxed));
                if drained + dropped == 0 {
                    format!(
                        "trace: {n} events written to {} (allocations, pool blocks, frees and launches; no kernel's \
                         accesses: they are traced where the binary route patches kernels, `gpusan trace`)",
                        t.path
                    )
                } else {
                    format!(
                        "trace: {n} events written to {}, {drained} of them warps' accesses ({dropped} dropped by a \
                         full buffer)",
                        t.path
                    )
                }
            }
            None => format!("trace: {} was not finished (see gpusan sim: it reads a cut trace up to its cut)", t.path),
        });
        if let Some(s) = t.sample {
            out.push(format!(
                "trace: launches sampled (each kernel's first {}, then one in {}): {} traced, {} left out",
                s.first,
                s.every,
                t.kernels.load(Ordering::Relaxed),
                t.left_out.load(Ordering::Relaxed)
            ));
        }
    }
    out
}
