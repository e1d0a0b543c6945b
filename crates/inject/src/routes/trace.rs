//! `gpusan trace` (issue 19): the run's trace (`docs/trace-format.md`) written as the program
//! runs: every allocation, pool block (a tensor) and free the registry sees, in the order it
//! sees them, and every kernel launch with its name and shape.
//!
//! Not yet: the device's side (each warp's accesses, and the LOADMETA and MEMCHECK points of
//! the check pass), which needs a pass of its own. The trace says so in its metadata
//! (`source`), and the characterization of such a trace has allocations and kernels but no
//! accesses.
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

use gpusan_abi::env::TRACE_OUT;

pub struct Trace {
    path: String,
    writer: Mutex<Option<Writer<BufWriter<File>>>>,
    /// Events written, once finished.
    finished: Mutex<Option<u64>>,
    kernels: AtomicU32,
    names: Mutex<HashMap<usize, String>>,
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
    let meta = Meta {
        program,
        sample_warps: 1,
        source: "gpusan trace (host events: allocations, pool blocks, frees, launches; no device accesses yet)".into(),
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

/// A kernel launched (its name known to coverage by now).
pub fn launched(f: usize, grid: [u32; 3], block: [u32; 3]) {
    let Some(t) = TRACE.get().as_ref() else { return };
    let kernel = t.kernels.fetch_add(1, Ordering::Relaxed);
    let name = locks::lock(&t.names).entry(f).or_insert_with(|| super::coverage::name_of(f)).clone();
    if let Some(w) = locks::lock(&t.writer).as_mut() {
        let _ = w.kernel_begin(&KernelInfo { kernel, name, grid, block });
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
            Some(n) => format!(
                "trace: {n} events written to {} (allocations, pool blocks, frees and launches: the device's accesses \
                 are not traced yet)",
                t.path
            ),
            None => format!("trace: {} was not finished (see gpusan sim: it reads a cut trace up to its cut)", t.path),
        });
    }
    out
}
