//! The tracer's state: the live objects and read-only regions, each thread's buffer of
//! events, and the trace being written.
//!
//! Locks, always taken in this order: a thread's own buffer, then the object map (read), then
//! the writer. `on_free` takes the object map alone, then the thread list and each buffer.
//! Every entry point first marks the thread busy, so that the tracer's own allocations (Rust's,
//! which reach the wrapped `malloc` too) and anything it calls are not traced.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::BufWriter;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, Once, RwLock};

use gpusan_trace::{Access, Event, Meta, Op, Space, Writer};

/// What an access does.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Load,
    Store,
}

/// `warp` of an access in a CPU trace: flags (a CPU trace has no warps).
pub const READ_ONLY: u32 = 1;
/// `epoch` of an allocation in a CPU trace: a region marked read-only, not an object.
pub const REGION: u32 = 1;

/// `kernel` of every event in a CPU trace: microseconds since the trace began (wrapping after
/// 71 minutes), so that a replay can see where a thread waited.
fn now_us() -> u32 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    START.get_or_init(std::time::Instant::now).elapsed().as_micros() as u32
}

/// Events a thread holds before it hands them to the writer.
const BUFFER: usize = 8192;

static ENABLED: AtomicBool = AtomicBool::new(false);
static INIT: Once = Once::new();
static NEXT_ID: AtomicU32 = AtomicU32::new(1);
static NEXT_TID: AtomicU32 = AtomicU32::new(0);
static MAPS: RwLock<Maps> = RwLock::new(Maps { objects: BTreeMap::new(), read_only: BTreeMap::new() });
static OUT: Mutex<Option<Writer<BufWriter<File>>>> = Mutex::new(None);
static THREADS: Mutex<Vec<Arc<Thread>>> = Mutex::new(Vec::new());

thread_local! {
    static BUSY: Cell<bool> = const { Cell::new(false) };
    static ME: Local = Local::new();
}

/// Live ranges by base: (end, id).
struct Maps {
    objects: BTreeMap<u64, (u64, u32)>,
    read_only: BTreeMap<u64, (u64, u32)>,
}

fn find(map: &BTreeMap<u64, (u64, u32)>, addr: u64) -> Option<(u64, u32)> {
    map.range(..=addr).next_back().filter(|(_, (end, _))| addr < *end).map(|(base, (_, id))| (*base, *id))
}

struct Thread {
    tid: u32,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    events: Vec<Event>,
    /// An 8-byte store whose value is read at the thread's next event (the instrumentation
    /// calls before the store), or made by `on_free` before the memory goes.
    pending: Option<(u64, Option<Event>)>,
}

/// The thread's entry in [`THREADS`]; its buffer is written when the thread ends.
struct Local(Arc<Thread>);

impl Local {
    fn new() -> Local {
        let t = Arc::new(Thread { tid: NEXT_TID.fetch_add(1, Ordering::Relaxed), inner: Mutex::new(Inner::default()) });
        if let Ok(mut all) = THREADS.lock() {
            all.push(t.clone());
        }
        Local(t)
    }
}

impl Drop for Local {
    fn drop(&mut self) {
        let _busy = Busy::enter();
        if let Ok(mut inner) = self.0.inner.lock() {
            settle(&mut inner, self.0.tid);
            // The thread's end: a replay waits for it no more.
            if ENABLED.load(Ordering::Acquire) {
                let e = Event { kernel: now_us(), ..Event::warp_done(0, self.0.tid, 0, 0) };
                inner.events.push(e);
            }
            flush(&mut inner);
        }
        if let Ok(mut all) = THREADS.lock() {
            all.retain(|t| !Arc::ptr_eq(t, &self.0));
        }
    }
}

/// The thread is inside the tracer while this lives.
struct Busy(bool);

impl Busy {
    /// `None` if the thread is inside already (the tracer's own allocation) or is ending.
    fn enter() -> Option<Busy> {
        BUSY.try_with(|b| if b.replace(true) { None } else { Some(Busy(true)) }).ok().flatten()
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        if self.0 {
            let _ = BUSY.try_with(|b| b.set(false));
        }
    }
}

pub fn init() {
    let Some(_busy) = Busy::enter() else { return };
    INIT.call_once(|| {
        let path = std::env::var_os("GPUSAN_CPUTRACE").unwrap_or_else(|| "cputrace.gstrace".into());
        let program = std::fs::read("/proc/self/cmdline")
            .map(|b| {
                b.split(|c| *c == 0)
                    .filter(|a| !a.is_empty())
                    .map(String::from_utf8_lossy)
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default();
        now_us();
        let meta = Meta { program, source: "gpusan cputrace".into(), ..Meta::default() };
        match File::create(&path).and_then(|f| Writer::new(BufWriter::new(f), &meta, Default::default())) {
            Ok(w) => {
                if let Ok(mut out) = OUT.lock() {
                    *out = Some(w);
                }
                ENABLED.store(true, Ordering::Release);
                // SAFETY: `finish` and `forked` are plain functions that never unwind.
                unsafe {
                    libc::atexit(finish);
                    libc::pthread_atfork(None, None, Some(forked));
                }
            }
            Err(e) => {
                eprintln!("gpusan cputrace: cannot write {}: {e}; the program runs untraced", path.to_string_lossy())
            }
        }
    });
}

/// In a forked child: nothing more is traced, and the parent's trace, whose file the child
/// shares, is left to the parent (not written to, not finished at the child's exit).
extern "C" fn forked() {
    ENABLED.store(false, Ordering::Release);
    if let Ok(mut out) = OUT.try_lock() {
        std::mem::forget(out.take());
    }
}

/// At exit: every thread's events, then the end record.
extern "C" fn finish() {
    let _busy = Busy::enter();
    ENABLED.store(false, Ordering::Release);
    if let Ok(all) = THREADS.lock() {
        for t in all.iter() {
            if let Ok(mut inner) = t.inner.lock() {
                settle(&mut inner, t.tid);
                flush(&mut inner);
            }
        }
    }
    if let Some(w) = OUT.lock().ok().and_then(|mut o| o.take()) {
        if let Err(e) = w.finish() {
            eprintln!("gpusan cputrace: the trace could not be finished: {e}");
        }
    }
}

/// Runs `f` on this thread's buffer, unless the tracer is off or already busy here.
fn with_thread(f: impl FnOnce(&mut Inner, u32)) {
    if !ENABLED.load(Ordering::Acquire) {
        return;
    }
    let Some(_busy) = Busy::enter() else { return };
    let _ = ME.try_with(|me| {
        if let Ok(mut inner) = me.0.inner.lock() {
            settle(&mut inner, me.0.tid);
            f(&mut inner, me.0.tid);
        }
    });
}

fn push(inner: &mut Inner, mut e: Event) {
    e.kernel = now_us();
    inner.events.push(e);
    if inner.events.len() >= BUFFER {
        flush(inner);
    }
}

fn flush(inner: &mut Inner) {
    if let Ok(mut out) = OUT.lock() {
        if let Some(w) = out.as_mut() {
            for e in &inner.events {
                if let Err(err) = w.push(e) {
                    eprintln!("gpusan cputrace: writing the trace failed: {err}; tracing stops");
                    *out = None;
                    ENABLED.store(false, Ordering::Release);
                    break;
                }
            }
        }
    }
    inner.events.clear();
}

/// The pending store's event, its value read now unless `on_free` read it before.
fn settle(inner: &mut Inner, tid: u32) {
    if let Some((addr, made)) = inner.pending.take() {
        let e = made.unwrap_or_else(|| access(tid, addr, 8, Kind::Store));
        push(inner, e);
    }
}

/// An access's event, the value read from memory for an 8-byte one.
fn access(tid: u32, addr: u64, size: u64, kind: Kind) -> Event {
    let access = if kind == Kind::Load { Access::Load } else { Access::Store };
    let width = size.clamp(1, 1 << 15).next_power_of_two() as u32;
    let mut e = Event::access(0, tid, 0, Op::new(Space::Global, access, width), addr, size, 0);
    e.lanes = 1;
    // SAFETY: the program accesses these 8 bytes right before (a load) or right after (a
    // store) this call, and frees go through `on_free`, which reads pending stores first.
    let value = (size == 8).then(|| unsafe { std::ptr::read_unaligned(addr as *const u64) });
    if let Ok(maps) = MAPS.read() {
        e.alloc = find(&maps.objects, addr).map_or(0, |(_, id)| id);
        if find(&maps.read_only, addr).is_some() {
            e.warp = READ_ONLY;
        }
        if let Some((base, id)) = value.and_then(|v| find(&maps.objects, v)) {
            e.epoch = id;
            e.count = value.unwrap_or(0) - base;
        }
    }
    e
}

pub fn on_access(addr: u64, size: u64, kind: Kind) {
    with_thread(|inner, tid| {
        if kind == Kind::Store && size == 8 {
            inner.pending = Some((addr, None));
        } else {
            push(inner, access(tid, addr, size, kind));
        }
    });
}

pub fn on_alloc(base: u64, size: u64) {
    if base == 0 {
        return;
    }
    with_thread(|inner, tid| {
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut maps) = MAPS.write() {
            maps.objects.insert(base, (base + size.max(1), id));
        }
        push(inner, Event { sm: tid, ..Event::alloc(id, base, size) });
    });
}

pub fn on_read_only(base: u64, size: u64) {
    if size == 0 {
        return;
    }
    with_thread(|inner, tid| {
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut maps) = MAPS.write() {
            maps.read_only.insert(base, (base + size, id));
        }
        push(inner, Event { sm: tid, epoch: REGION, ..Event::alloc(id, base, size) });
    });
}

pub fn on_free(base: u64) {
    let mut range = None;
    with_thread(|inner, tid| {
        let Ok(mut maps) = MAPS.write() else { return };
        let Some((end, id)) = maps.objects.remove(&base) else { return };
        push(inner, Event { sm: tid, ..Event::free(id) });
        let regions: Vec<u64> = maps.read_only.range(base..end).map(|(b, _)| *b).collect();
        for b in regions {
            if let Some((_, r)) = maps.read_only.remove(&b) {
                push(inner, Event { sm: tid, ..Event::free(r) });
            }
        }
        range = Some(base..end);
    });
    // Other threads' stores into the object, not yet read: read now, before it goes.
    let Some(range) = range else { return };
    let Some(_busy) = Busy::enter() else { return };
    let Ok(all) = THREADS.lock() else { return };
    for t in all.iter() {
        let Ok(mut inner) = t.inner.lock() else { continue };
        if let Some((addr, made @ None)) = &mut inner.pending {
            if range.contains(addr) {
                *made = Some(access(t.tid, *addr, 8, Kind::Store));
            }
        }
    }
}
