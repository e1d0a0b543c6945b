//! Canary mode (`--mode canary`): no kernel of the program is touched. Each device
//! allocation is asked of the driver with padding after it (`routes::redzones`' policy and
//! accounting), and each pool block's rounding slack is used as is; the bytes from the
//! exact requested end hold a keyed hash (`gpusan_abi::canary`). A guard thread (one per
//! process) launches, every `--canary-interval-ms` and only once the previous scan is done,
//! a short update kernel (writes new canaries, empties freed entries) and a short scan
//! kernel on each context's own low-priority non-blocking stream (`canary_device`); a
//! persistent kernel would make the program's context synchronizations, `cudaFree` and
//! `cudaDeviceReset` wait forever. The guard thread runs in relaxed capture mode, so a
//! program capturing a graph in global mode is not disturbed, and launches nothing into
//! the program's streams, so graphs, events and synchronizations see nothing of it (it
//! records events of its own there, never while a capture runs, so that a canary in memory
//! a pool hands out is written only after the work queued before it).
//!
//! Frees: the entry is disarmed at once on the host (the scan of a pool block's slack may
//! race with the block's reuse: such records are dropped by generation,
//! `gpusan_runtime::canary`); a device allocation's memory stays in quarantine, and its
//! canary is checked one last time before the driver gets it back (with every canary in
//! the range disarmed first, under the lock the guard launches under, so no scan reads
//! memory given back). Context teardown and process exit stop the scans and run a final
//! one, bounded in time.
//!
//! Not guarded (listed in the report's coverage): host memory, VMM mappings, graph memory
//! made under capture, pool blocks with no slack (PyTorch's are padded in canary mode, so
//! few), NVTX regions, the device heap (`malloc` in kernels), and the bytes before an
//! allocation (a head pad would move the pointer the program gets, breaking IPC and range
//! queries; the bytes before an allocation are its lower neighbour's tail canary where the
//! driver packs them, the canary filling the driver's rounding). Known window: a kernel
//! that overflows before the canary was written is not seen.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::state::FastMap;
use gpusan_abi::canary::{Entry, ErrorRecord};
use gpusan_abi::Mode;
use gpusan_runtime::canary::{self as host, Arrays, StreamWaits, Tail, Verdict};
use gpusan_runtime::locks;
use gpusan_runtime::per_process::PerProcess;
use gpusan_runtime::pool_blocks::PoolSource;
use gpusan_runtime::registry::blocks::PoolPlace;
use gpusan_runtime::registry::{AllocKind, Allocation, Lookup};
use gpusan_runtime::report::{AllocInfo, CanaryCoverage, CanaryDetails, CanaryScan, Report, SegmentInfo};

use super::canary_device::{Device, InFlight};
use super::canary_diag::{self, diag, Section};
use crate::driver::real;
use crate::state::{quietly, state};

/// The report's note in every canary run: what the canaries cannot see.
pub const NOT_GUARDED: &str = "canary mode sees overwrites past the end of device allocations, pool blocks and \
     device-heap blocks (malloc in kernels: in modules with PTX, compared when a kernel frees the block) only: \
     reads, device-heap blocks of machine code or never freed, and bytes before an allocation other than its \
     lower neighbour's tail canary are not guarded; a canary longer than 64 bytes is checked at its first and last 32; and an \
     overflow made before a canary was written (a pool block's: until the program synchronizes the block's \
     stream, at most 32 scan intervals, unless the block was handed out again where it was) is not seen";

/// Keys of pool blocks: their registry id with this bit (device allocations are keyed by
/// their base, below 2^63).
const BLOCK: u64 = 1 << 63;
/// The scan number of one-off scans (checks before a free, final scans).
const ONCE: u32 = u32::MAX;
/// One periodic batch in this many is timed on the GPU (an event record more per batch).
const TIME_EVERY: u64 = 16;
/// While the program is idle the guard scans at rounds 1, 2, 4, … of the quiet spell, and
/// then every this many rounds (128 ms apart at the default interval).
const QUIET_MAX_SKIP: u32 = 32;
/// Batches a pool block's canary waits for the program to synchronize its stream before
/// the guard records an event of its own there instead: such an event, from the guard's
/// thread, cost a PyTorch training step 25% at one a millisecond on the H100
/// (bench/results/h100-issue17, call 12), and programs synchronize often (PyTorch at every
/// `.item()`).
const STREAM_PATIENCE: u32 = 32;
/// How long exit and teardown wait for a scan: never hang the program's exit.
const FINAL_WAIT: Duration = Duration::from_secs(2);

#[derive(Default)]
struct Context {
    arrays: Arrays,
    /// Canaries of freed device allocations in quarantine, written: checked before the
    /// driver gets the memory back.
    held: HashMap<u64, Entry>,
    /// The command buffer of the batch in flight (host address): where a cancel is written.
    commands: usize,
    last_clean: Option<Instant>,
    /// The synchronization clock when the last context-wide synchronization of the
    /// program's that succeeded began ([`sync_clock`]).
    synced_at: u64,
}

#[derive(Default)]
struct Host {
    contexts: FastMap<u64, Context>,
    /// As [`Context::synced_at`], per stream (the legacy stream's handles as one).
    stream_synced_at: HashMap<u64, u64>,
    guarded: BTreeMap<String, u64>,
    unguarded: BTreeMap<String, u64>,
    /// Keys reported already: a canary stays overwritten, one finding is enough.
    reported: HashSet<u64>,
    scans: u64,
    dropped: u64,
    lost: u64,
    /// Canaries armed in a context where gpusan's module, stream or buffers could not be
    /// made: never scanned.
    not_scanned: u64,
    /// Periodic batches timed on the GPU, their total and longest time (µs).
    timed: u64,
    gpu_us: u64,
    gpu_us_max: u64,
}

struct Guard {
    host: Mutex<Host>,
    /// Device resources by context; held while launching, so a context is never torn down
    /// (nor memory given back) between a batch being taken and its scan launched.
    devices: Mutex<HashMap<u64, Device>>,
    secret: u64,
    epoch: Instant,
    started: AtomicBool,
    stop: AtomicBool,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    interval: Duration,
}

static GUARD: PerProcess<Guard> = PerProcess::new(Guard::new);

impl Guard {
    fn new() -> Guard {
        // `gpusan run` refused an invalid interval; one set by hand is the default.
        let us = std::env::var(gpusan_abi::env::CANARY_INTERVAL_MS)
            .ok()
            .and_then(|v| gpusan_abi::env::canary_interval_us(&v).ok())
            .unwrap_or(gpusan_abi::env::CANARY_INTERVAL_US_DEFAULT);
        Guard {
            host: Mutex::new(Host::default()),
            devices: Mutex::new(HashMap::new()),
            secret: secret(),
            epoch: Instant::now(),
            started: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            thread: Mutex::new(None),
            interval: Duration::from_micros(us),
        }
    }
}

/// A per-process random key (`getrandom`): without it data cannot forge a canary.
fn secret() -> u64 {
    let mut b = [0u8; 8];
    // SAFETY: a buffer of ours of that length.
    let n = unsafe { libc::getrandom(b.as_mut_ptr() as *mut libc::c_void, 8, 0) };
    if n == 8 {
        u64::from_le_bytes(b)
    } else {
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        gpusan_abi::canary::mix64(t.as_nanos() as u64 ^ u64::from(std::process::id()))
    }
}

/// CLOCK_REALTIME in microseconds since the Unix epoch: a finding's times, comparable with
/// the program's own clock.
fn unix_us() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64)
}

/// Whether this run is a canary run.
pub fn active() -> bool {
    state().options.mode == Mode::Canary
}

fn guard() -> &'static Guard {
    GUARD.get()
}

/// The host lock, taken on a program's thread (its wait timed under `GPUSAN_CANARY_DIAG=timing`).
fn program_lock(g: &Guard) -> std::sync::MutexGuard<'_, Host> {
    let since = canary_diag::start();
    let h = locks::lock(&g.host);
    canary_diag::end(Section::LockWait, since);
    h
}

fn count(map: &mut BTreeMap<String, u64>, what: &str) {
    // Every pool block passes here: no allocation once its kind has been seen.
    match map.get_mut(what) {
        Some(n) => *n += 1,
        None => {
            map.insert(what.to_string(), 1);
        }
    }
}

/// A device allocation was made, `pad` bytes longer than the `size` asked (0: not padded).
/// Its canary is written now, on the guard stream (the program's next kernel may overflow
/// at once); its entry goes with the next batch.
pub fn allocated(base: u64, size: u64, pad: u64, context: u64, kind: AllocKind) {
    let g = guard();
    if kind == AllocKind::Managed {
        // A scan reading its pages would migrate them to the GPU, again and again.
        count(&mut locks::lock(&g.host).unguarded, "managed memory (a scan would migrate its pages)");
        return;
    }
    if pad == 0 || pad > u64::from(u32::MAX) {
        count(&mut locks::lock(&g.host).unguarded, "no room for padding (a 2 MiB page it would cost)");
        return;
    }
    let after = match kind {
        AllocKind::Async { stream } | AllocKind::Pool { stream, .. } => Some(stream),
        _ => None,
    };
    // Should the write at allocation fail, the batch writes it, after the same place.
    let tail = Tail { key: base, start: base + size, len: pad as u32, stream: after, at: 0 };
    // Written before it is armed, under the lock the guard launches under: no scan can
    // read the bytes before the write kernel ran (both on the guard stream).
    let mut devices = locks::lock(&g.devices);
    let written = real::in_context(context, || {
        if let std::collections::hash_map::Entry::Vacant(v) = devices.entry(context) {
            if let Some(d) = Device::create() {
                v.insert(d);
            }
        }
        devices.get_mut(&context).is_some_and(|d| d.write_now(g.secret, tail.start, tail.len, after))
    });
    let mut h = locks::lock(&g.host);
    count(&mut h.guarded, kind.describe());
    h.contexts.entry(context).or_default().arrays.arm(tail, written);
    drop(h);
    drop(devices);
    start_thread();
}

/// An allocation canary mode does not guard, and why.
pub fn unguarded(why: &str) {
    count(&mut locks::lock(&guard().host).unguarded, why);
}

/// The program freed the device allocation at `base`: its canary is no longer scanned, and
/// is checked once more before the memory goes back to the driver.
pub fn freed(base: u64, context: u64) {
    let g = guard();
    let mut h = program_lock(g);
    let Some(ctx) = h.contexts.get_mut(&context) else { return };
    if let Some(d) = ctx.arrays.disarm(base) {
        cancel(ctx.commands, d.cancel);
        if d.written {
            ctx.held.insert(base, d.entry);
        }
    }
}

/// Cancels an arm handed to the update kernel (see `gpusan_runtime::canary`).
fn cancel(commands: usize, at: Option<usize>) {
    if let (Some(at), true) = (at, commands != 0) {
        let offset =
            at * gpusan_abi::canary::COMMAND_BYTES + std::mem::offset_of!(gpusan_abi::canary::Command, cancelled);
        let flag = (commands + offset) as *mut u32;
        // A context torn down behind gpusan's back took the buffer with it.
        if crate::driver::peek::readable(flag as *const u8, 4) {
            // SAFETY: the mapped command buffer of the batch in flight holds command `at`
            // (`Arrays::disarm` names only commands of that batch); the kernel reads it
            // volatile.
            unsafe { std::ptr::write_volatile(flag, 1) };
        }
    }
}

/// A pool handed out block `id` (`size` bytes at `base`, for `stream`; the pool was asked for
/// `padded` bytes more): its slack is its canary, written once the work queued on `stream`
/// so far is done (the pool's last user of the memory may still be running there), unless
/// the block it was before at this place and size left it in memory.
pub fn block_allocated(id: u64, base: u64, size: u64, source: PoolSource, padded: u64, stream: u64) {
    let context = context_of(base);
    let g = guard();
    let mut h = program_lock(g);
    let slack = host::pool_slack(source, base, size, padded);
    let ctx = h.contexts.entry(context).or_default();
    // Handed out again where it was, at the same size: its canary may be in memory already
    // (taken before the range is disarmed, which forgets what lies in it).
    let in_memory = slack.as_ref().is_ok_and(|&len| ctx.arrays.take_intact(base + size, len));
    // The pool reused this memory: canaries of blocks it displaced are gone with them.
    let end = base + size + u64::from(*slack.as_ref().unwrap_or(&0));
    for (_, d) in ctx.arrays.disarm_range(base, end) {
        cancel(ctx.commands, d.cancel);
    }
    match slack {
        Ok(len) => {
            let at = sync_clock();
            let tail = Tail { key: BLOCK | id, start: base + size, len, stream: Some(stream), at };
            // In memory: armed at once, nothing to write, no stream to wait for.
            ctx.arrays.arm(tail, in_memory);
            count(&mut h.guarded, "pool block");
        }
        Err(why) => count(&mut h.unguarded, why),
    }
    drop(h);
    start_thread();
}

/// The pool took block `id` back: its memory may be handed out at once.
pub fn block_freed(id: u64, base: u64) {
    let context = context_of(base);
    let g = guard();
    let mut h = program_lock(g);
    let reported = h.reported.contains(&(BLOCK | id));
    if let Some(ctx) = h.contexts.get_mut(&context) {
        // A canary reported overwritten is not what memory holds: not kept.
        let d = if reported { ctx.arrays.disarm(BLOCK | id) } else { ctx.arrays.take_back(BLOCK | id) };
        if let Some(d) = d {
            cancel(ctx.commands, d.cancel);
        }
    }
}

/// The order of pool blocks handed out and of the program's synchronizations begun, across
/// threads: a synchronization begun after a block was handed out waited for the work queued
/// before it.
static SYNC_CLOCK: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// A tick of the synchronization clock (taken before a synchronization is called).
pub fn sync_clock() -> u64 {
    SYNC_CLOCK.fetch_add(1, Ordering::SeqCst)
}

/// The program synchronized `stream` (its context, for `None`) in a call begun at clock
/// `began`, and it succeeded.
pub fn synchronized(stream: Option<u64>, began: u64) {
    let g = guard();
    let mut h = program_lock(g);
    match stream {
        // The per-thread stream names a different stream on each thread.
        Some(2) => {}
        Some(s) => {
            let mark = h.stream_synced_at.entry(crate::driver::legacy_as_one(s)).or_default();
            *mark = (*mark).max(began);
        }
        None => {
            let context = crate::driver::current_context().0;
            if let Some(ctx) = h.contexts.get_mut(&context) {
                ctx.synced_at = ctx.synced_at.max(began);
            }
        }
    }
}

/// The context of the segment holding `addr`, else the current one.
fn context_of(addr: u64) -> u64 {
    match state().registry.lookup(addr) {
        Lookup::Live { alloc, .. } | Lookup::Freed { alloc, .. } => alloc.context,
        Lookup::Outside { .. } => crate::driver::current_context().0,
    }
}

/// The driver is about to get `a`'s memory back: every canary in it is disarmed (no scan
/// may read it after), and `a`'s own canary is checked one last time, waited for. A
/// stream-ordered release (`ordered`: freed on gpusan's stream after the program's free)
/// must not stall the program's thread on a low-priority scan: it is not checked again,
/// and the returned event (the guard's last scan, which may still read the memory) is
/// for the free to wait for on the GPU.
pub fn before_release(a: &Allocation, ordered: bool) -> Option<usize> {
    let g = guard();
    let mut devices = locks::lock(&g.devices);
    let held = {
        let mut h = locks::lock(&g.host);
        let ctx = h.contexts.get_mut(&a.context)?;
        let disarmed = ctx.arrays.disarm_range(a.base, a.end().saturating_add(a.redzone));
        for (_, d) in &disarmed {
            cancel(ctx.commands, d.cancel);
        }
        let held = ctx.held.remove(&a.base);
        if disarmed.is_empty() && held.is_none() {
            // No canary of it was armed, or its scans are long done (disarmed at its free,
            // held back since): nothing to wait for.
            return None;
        }
        let reported = h.reported.contains(&a.base);
        held.filter(|_| !reported && !ordered)
    };
    let dev = devices.get_mut(&a.context)?;
    if ordered {
        return dev.in_flight.map(|_| dev.event());
    }
    // A scan launched before the disarm may still read the memory: done before the free.
    let found = real::in_context(a.context, || {
        let deadline = Instant::now() + FINAL_WAIT;
        let periodic = finish_in_flight(g, a.context, dev, deadline);
        let once = held.map(|e| scan_once(g, dev, &[(a.base, e)], deadline)).unwrap_or_default();
        (periodic, once)
    });
    drop(devices);
    report_all(a.context, found.0, CanaryScan::Periodic, None);
    // The registry may have forgotten it already (given back at once).
    report_all(a.context, found.1, CanaryScan::BeforeFree, Some(a));
    None
}

/// When a finding's scan was launched and its records read (`unix_us`).
#[derive(Clone, Copy, Debug)]
struct When {
    launched_unix_us: u64,
    drained_unix_us: u64,
}

/// A finding to report: the key, its entry, the record, when.
type Found = Vec<(u64, Entry, ErrorRecord, When)>;

/// Waits for the scan in flight in `context` (if any) and reads its records: the
/// overwritten canaries, each disarmed (reported once); records of entries disarmed or
/// reused since are dropped.
fn finish_in_flight(g: &Guard, context: u64, dev: &mut Device, deadline: Instant) -> Found {
    let Some(flight) = dev.in_flight else { return Vec::new() };
    if !dev.wait(deadline) {
        return Vec::new();
    }
    dev.in_flight = None;
    if dev.broken {
        // A fault in the context, or the context gone: its buffers may be gone with it.
        return Vec::new();
    }
    dev.free_old();
    let (records, lost) = dev.take_records();
    let when = When { launched_unix_us: flight.launched_unix_us, drained_unix_us: unix_us() };
    let us = flight.timed.then(|| dev.batch_us()).flatten();
    let mut h = locks::lock(&g.host);
    h.lost += lost;
    if let Some(us) = us {
        h.timed += 1;
        h.gpu_us += us;
        h.gpu_us_max = h.gpu_us_max.max(us);
    }
    let mut found = Vec::new();
    let mut dropped = 0;
    if let Some(ctx) = h.contexts.get_mut(&context) {
        ctx.arrays.batch_done();
        for r in records.iter().filter(|r| r.scan == flight.scan) {
            match ctx.arrays.record(r) {
                Verdict::Overwritten { key, entry } => {
                    if let Some(d) = ctx.arrays.disarm(key) {
                        cancel(ctx.commands, d.cancel);
                    }
                    found.push((key, entry, *r, when));
                }
                Verdict::Dropped => dropped += 1,
            }
        }
        ctx.commands = 0;
        if found.is_empty() {
            ctx.last_clean = Some(flight.at);
            super::faults::scanned_clean(context, flight.upto);
        }
    }
    h.dropped += dropped;
    for (key, _, _, _) in &found {
        h.reported.insert(*key);
    }
    found
}

/// Scans `entries` once, now, and waits for it: those found overwritten.
fn scan_once(g: &Guard, dev: &mut Device, entries: &[(u64, Entry)], deadline: Instant) -> Found {
    if dev.broken || entries.is_empty() {
        return Vec::new();
    }
    let only: Vec<Entry> = entries.iter().map(|(_, e)| *e).collect();
    let launched_unix_us = unix_us();
    if !dev.scan_once(g.secret, &only, ONCE) {
        return Vec::new();
    }
    dev.in_flight = Some(InFlight { scan: ONCE, timed: false, upto: 0, at: Instant::now(), launched_unix_us });
    locks::lock(&g.host).scans += 1;
    if !dev.wait(deadline) {
        return Vec::new();
    }
    dev.in_flight = None;
    let (records, _) = dev.take_records();
    let when = When { launched_unix_us, drained_unix_us: unix_us() };
    let mut h = locks::lock(&g.host);
    let mut found = Vec::new();
    for r in records.iter().filter(|r| r.scan == ONCE) {
        if let Some((key, e)) = entries.get(r.index as usize) {
            if e.generation == r.generation && h.reported.insert(*key) {
                found.push((*key, *e, *r, when));
            }
        }
    }
    found
}

/// One round of the guard in `context`: the last scan's records read, the next batch and
/// scan launched. Returns what was found. The host lock is held only while the batch is
/// taken and staged: the program's allocations and frees take it, and must not wait for
/// the guard's driver calls.
fn tick(g: &Guard, context: u64, dev: &mut Device) -> Found {
    if dev.broken || !dev.done() {
        return Vec::new();
    }
    let found = finish_in_flight(g, context, dev, Instant::now());
    if dev.broken {
        return found;
    }
    let upto = super::faults::launch_count();
    let held = canary_diag::start();
    let mut h = locks::lock(&g.host);
    let timed = h.scans.is_multiple_of(TIME_EVERY);
    let Host { contexts, stream_synced_at, .. } = &mut *h;
    let Some(ctx) = contexts.get_mut(&context) else { return found };
    // Nothing launched and nothing to change since the last scan: the program is idle (a
    // server between requests). Its canaries are still scanned, less and less often, since
    // a kernel launched before the last scan may still be running.
    if ctx.arrays.unchanged() && dev.last_upto == Some(upto) {
        dev.quiet_rounds = dev.quiet_rounds.saturating_add(1);
        if !scans_when_quiet(dev.quiet_rounds) {
            return found;
        }
    } else {
        dev.quiet_rounds = 0;
    }
    dev.last_upto = Some(upto);
    // While a capture runs, nothing goes to the program's streams (it would be captured).
    let context_synced = ctx.synced_at;
    let synced = |stream: u64, at: u64| {
        context_synced > at
            || (stream != 2 && stream_synced_at.get(&crate::driver::legacy_as_one(stream)).is_some_and(|&m| m > at))
    };
    let batch = ctx.arrays.take_batch_with(StreamWaits {
        capturing: crate::capture::any(),
        synced: &synced,
        patience: STREAM_PATIENCE,
    });
    if batch.count == 0 && batch.commands.is_empty() {
        return found;
    }
    if !dev.ensure_capacity(batch.capacity) || !dev.ensure_commands(batch.commands.len()) {
        dev.broken = true;
        return found;
    }
    if diag().no_kernels {
        ctx.arrays.batch_done();
        return found;
    }
    // Staged under the same lock as disarms: from here on a cancel is written into this
    // buffer, which the update kernel reads when it runs.
    dev.stage_commands(&batch.commands);
    ctx.commands = dev.commands.host;
    drop(h);
    canary_diag::end(Section::GuardHold, held);
    if !diag().no_wait && !dev.wait_for(&batch.streams) {
        dev.broken = true;
        return found;
    }
    let launched_unix_us = unix_us();
    let (commands, count) = if diag().empty_kernels { (0, 0) } else { (batch.commands.len(), batch.count) };
    if dev.run_batch(g.secret, commands, count, batch.scan, timed) {
        dev.in_flight = Some(InFlight { scan: batch.scan, timed, upto, at: Instant::now(), launched_unix_us });
        locks::lock(&g.host).scans += 1;
    }
    found
}

/// Whether the `quiet`th round of a quiet spell scans (see [`QUIET_MAX_SKIP`]).
fn scans_when_quiet(quiet: u32) -> bool {
    if quiet <= QUIET_MAX_SKIP {
        quiet.is_power_of_two()
    } else {
        quiet.is_multiple_of(QUIET_MAX_SKIP)
    }
}

/// The context the guard thread set current last (0: none known; forgotten when a context
/// goes away, since a new one may get its handle).
static CURRENT: AtomicU64 = AtomicU64::new(0);

/// Every context's round; a context's device resources are made at its first.
fn tick_all(g: &Guard) {
    // Contexts with something to scan (a context whose blocks all went unguarded needs no
    // module of gpusan's).
    let mut contexts: Vec<u64> =
        locks::lock(&g.host).contexts.iter().filter(|(_, c)| c.arrays.slots() > 0).map(|(k, _)| *k).collect();
    contexts.extend(locks::lock(&g.devices).keys().filter(|k| !contexts.contains(k)).copied().collect::<Vec<_>>());
    for context in contexts {
        let mut devices = locks::lock(&g.devices);
        // The guard thread is gpusan's: it keeps the context it scans current, rather than
        // pushing and popping it every round (two driver calls less per round), and sets it
        // only when it scans another (a process with one context: once).
        if CURRENT.load(Ordering::Acquire) != context {
            // SAFETY: a context the program made, set on gpusan's own thread.
            let set = unsafe { real::cuCtxSetCurrent().map(|f| f(context as crate::driver::CUcontext)) };
            CURRENT.store(if set == Some(crate::driver::CUDA_SUCCESS) { context } else { 0 }, Ordering::Release);
        }
        let found = real::in_context(context, || {
            if let std::collections::hash_map::Entry::Vacant(v) = devices.entry(context) {
                match Device::create() {
                    Some(d) => {
                        v.insert(d);
                    }
                    None => {
                        let mut h = locks::lock(&g.host);
                        if let Some(ctx) = h.contexts.remove(&context) {
                            h.not_scanned += ctx.arrays.live() as u64;
                        }
                        return Vec::new();
                    }
                }
            }
            devices.get_mut(&context).map(|d| tick(g, context, d)).unwrap_or_default()
        });
        drop(devices);
        report_all(context, found, CanaryScan::Periodic, None);
    }
}

fn start_thread() {
    let g = guard();
    if g.started.swap(true, Ordering::AcqRel) {
        return;
    }
    // Before CUDA's own exit handlers (registered earlier, run later): the final scan
    // needs the contexts.
    // SAFETY: a function of ours with the signature atexit takes.
    unsafe { libc::atexit(canary_at_exit) };
    let spawned = std::thread::Builder::new().name("gpusan-canary".into()).spawn(|| {
        // Relaxed capture mode: a program capturing in global mode is not disturbed by the
        // guard's calls (it launches nothing into captured streams).
        let mut mode: std::ffi::c_int = 2; // CU_STREAM_CAPTURE_MODE_RELAXED
                                           // SAFETY: an in-out parameter of ours.
        unsafe { real::cuThreadExchangeStreamCaptureMode().map(|f| f(&mut mode)) };
        let g = guard();
        // Parked rather than asleep: exit unparks it, whatever the interval.
        let mut next = Instant::now() + g.interval;
        while !g.stop.load(Ordering::Acquire) {
            let now = Instant::now();
            if now < next {
                std::thread::park_timeout(next - now);
                continue;
            }
            next = now + g.interval;
            let round = canary_diag::start();
            if quietly(|| tick_all(g)).is_none() {
                break;
            }
            canary_diag::end(Section::GuardRound, round);
            quietly(|| super::canary_heap::drain(g.secret, g.epoch, unix_us()));
        }
    });
    if let Ok(h) = spawned {
        *locks::lock(&g.thread) = Some(h);
    }
}

extern "C" fn canary_at_exit() {
    crate::driver::boundary::enter("exit", at_exit);
}

/// Stops the guard thread (waiting a bounded time) and scans every context one last time.
pub fn at_exit() {
    quietly(|| {
        let g = guard();
        if !g.started.load(Ordering::Acquire) || g.stop.swap(true, Ordering::AcqRel) {
            return;
        }
        let handle = locks::lock(&g.thread).take();
        if let Some(h) = handle {
            h.thread().unpark();
            let deadline = Instant::now() + FINAL_WAIT;
            while !h.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        let contexts: Vec<u64> = locks::lock(&g.devices).keys().copied().collect();
        for context in contexts {
            final_scan(context, CanaryScan::AtExit);
        }
        super::canary_heap::drain(g.secret, g.epoch, unix_us());
    });
}

/// A module `canary_heap` rewrote was loaded: its variables set, and the guard started
/// (it reads the device heap's records).
pub fn heap_module_loaded(module: crate::driver::Loaded) {
    super::canary_heap::loaded(module, guard().secret);
    start_thread();
}

/// The program tears `context` down through `destroy` (the driver's call, made exactly
/// once whatever happens here): its last scan first, and the guard held off it until the
/// call returned, so nothing is launched into a context being destroyed. A primary
/// context's release that was not the last leaves it guarded as before.
pub fn around_teardown<R>(context: Option<u64>, destroy: impl FnOnce() -> R) -> R {
    let Some(context) = context.filter(|_| quietly(active).unwrap_or(false)) else { return destroy() };
    let g = guard();
    // The guard thread may be wedged in a driver call holding it: never hang here.
    let mut devices = quietly(|| locks::lock_within(&g.devices, FINAL_WAIT)).flatten();
    let found = devices.as_mut().and_then(|d| quietly(|| last_scan(g, context, d))).unwrap_or_default();
    let r = destroy();
    drop(devices);
    quietly(|| report_all(context, found, CanaryScan::ContextTeardown, None));
    r
}

/// Forgets `context` (the driver destroyed it with everything of gpusan's in it).
pub fn context_gone(context: u64) {
    CURRENT.store(0, Ordering::Release);
    let g = guard();
    let dev = locks::lock(&g.devices).remove(&context);
    // The driver freed its memory: nothing to give back, nothing to read.
    std::mem::forget(dev);
    locks::lock(&g.host).contexts.remove(&context);
}

/// At exit: every context's last scan.
fn final_scan(context: u64, scan: CanaryScan) {
    let g = guard();
    let Some(mut devices) = locks::lock_within(&g.devices, FINAL_WAIT) else { return };
    let found = last_scan(g, context, &mut devices);
    drop(devices);
    report_all(context, found, scan, None);
}

/// The last scan of `context`: pending canaries written, every armed one scanned, and the
/// held ones (freed, in quarantine) once; waited for within [`FINAL_WAIT`].
fn last_scan(g: &Guard, context: u64, devices: &mut HashMap<u64, Device>) -> Found {
    let Some(dev) = devices.get_mut(&context) else { return Vec::new() };
    real::in_context(context, || {
        let deadline = Instant::now() + FINAL_WAIT;
        let mut found = finish_in_flight(g, context, dev, deadline);
        found.extend(tick(g, context, dev));
        found.extend(finish_in_flight(g, context, dev, deadline));
        let held: Vec<(u64, Entry)> = {
            let h = locks::lock(&g.host);
            let ctx = h.contexts.get(&context);
            ctx.map(|c| c.held.iter().map(|(k, e)| (*k, *e)).filter(|(k, _)| !h.reported.contains(k)).collect())
                .unwrap_or_default()
        };
        found.extend(scan_once(g, dev, &held, deadline));
        found
    })
}

fn report_all(context: u64, found: Found, scan: CanaryScan, known: Option<&Allocation>) {
    for (key, entry, record, when) in found {
        // An allocation the registry no longer knows was displaced: its memory is another's
        // now, and the record is dropped as one of a reuse race.
        if !report(context, Seen { key, entry, record, when, scan }, known) {
            locks::lock(&guard().host).dropped += 1;
        }
    }
}

/// A canary found overwritten: its key and entry, the scan's record, when, and which scan.
struct Seen {
    key: u64,
    entry: Entry,
    record: ErrorRecord,
    when: When,
    scan: CanaryScan,
}

/// The finding for the canary `seen` (a device allocation the registry no longer holds is
/// `known`).
fn report(context: u64, seen: Seen, known: Option<&Allocation>) -> bool {
    let Seen { key, entry, record: ref r, when, scan } = seen;
    let g = guard();
    let registry = &state().registry;
    let start = entry.tail_start;
    let end = start + u64::from(entry.tail_len);
    let (allocation, next) = if key & BLOCK != 0 {
        let Some(block) = registry.block(key & !BLOCK) else { return false };
        let mut info = AllocInfo::from(&block);
        info.segment = registry.segment_of(&block).map(|s| SegmentInfo::from(&s));
        let next = match registry.pool_place(end) {
            PoolPlace::Block(b) if b.base >= start && b.base != block.base => Some(AllocInfo::from(&b)),
            _ => None,
        };
        (info, next)
    } else {
        let alloc = match (registry.lookup(key), known) {
            (Lookup::Live { alloc, .. } | Lookup::Freed { alloc, .. }, _) if alloc.base == key => alloc,
            (_, Some(a)) if a.base == key => *a,
            _ => return false,
        };
        let next = match registry.lookup(end) {
            Lookup::Live { alloc: b, .. } | Lookup::Freed { alloc: b, .. } if b.base != alloc.base => Some(b),
            Lookup::Outside { above: Some(b), .. } if b.base.saturating_sub(end) < 512 => Some(b),
            _ => None,
        };
        (AllocInfo::from(&alloc), next.map(|b| AllocInfo::from(&b)))
    };
    let last_clean = locks::lock(&g.host).contexts.get(&context).and_then(|c| c.last_clean);
    let now = Instant::now();
    let details = CanaryDetails {
        allocation,
        next,
        address: r.address,
        offset_past_end: r.address.saturating_sub(start),
        bad_bytes: u64::from(r.bad),
        canary_bytes: u64::from(entry.tail_len),
        expected: r.expected,
        found: r.found,
        scan,
        detected_ms: now.duration_since(g.epoch).as_millis() as u64,
        since_clean_scan_ms: last_clean.map_or(0, |t| now.duration_since(t).as_millis() as u64),
        detected_unix_us: when.drained_unix_us,
        scan_launched_unix_us: when.launched_unix_us,
        scan_gpu_ns: (r.gpu_ns != 0).then_some(r.gpu_ns),
        kernels: super::faults::since_clean_scan(context),
    };
    state().report(Report::canary(details));
    true
}

/// The report's canary section (a canary run only).
pub fn coverage() -> Option<CanaryCoverage> {
    if !active() {
        return None;
    }
    let h = locks::lock(&guard().host);
    Some(CanaryCoverage {
        guarded: h.guarded.clone(),
        unguarded: h.unguarded.clone(),
        scans: h.scans,
        interval_us: guard().interval.as_micros() as u64,
    })
}

/// The report's notes on the device heap: modules whose kernels call it that gpusan could
/// not rewrite (their blocks go unguarded), and records lost.
pub fn heap_notes() -> Vec<String> {
    if !quietly(active).unwrap_or(false) {
        return Vec::new();
    }
    let (rewritten, not, lost) = super::canary_heap::summary();
    let mut notes = Vec::new();
    if !not.is_empty() {
        notes.push(format!(
            "canary mode: the device heap of {} module(s) whose kernels call it is not guarded: {}",
            not.len(),
            not.join("; ")
        ));
    }
    if lost > 0 {
        notes.push(format!(
            "canary mode: {lost} device-heap canary finding(s) lost (more than {} in the run; {rewritten} module(s) rewritten)",
            gpusan_abi::canary::heap::RECORDS
        ));
    }
    notes
}

/// The report's note when some canaries were never scanned (gpusan's kernels could not be
/// set up in their context).
pub fn failure_note() -> Option<String> {
    if !quietly(active).unwrap_or(false) {
        return None;
    }
    let n = locks::lock(&guard().host).not_scanned;
    (n > 0).then(|| {
        format!(
            "canary mode: gpusan's kernels could not be set up in a context (module, stream or buffers refused by \
             the driver): {n} canaries there were never scanned"
        )
    })
}

/// The report's counters of canary mode.
pub fn counters() -> Vec<(&'static str, u64)> {
    if !quietly(active).unwrap_or(false) {
        return Vec::new();
    }
    let g = guard();
    let device_bytes: u64 = locks::lock(&g.devices).values().map(Device::array_bytes).sum();
    let h = locks::lock(&g.host);
    let live: u64 = h.contexts.values().map(|c| c.arrays.live() as u64).sum();
    let host_bytes: u64 = h.contexts.values().map(|c| c.arrays.bytes().0).sum();
    vec![
        ("canary_guarded", h.guarded.values().sum()),
        ("canary_unguarded", h.unguarded.values().sum()),
        ("canary_live", live),
        ("canary_scans", h.scans),
        ("canary_records_dropped", h.dropped),
        ("canary_records_lost", h.lost),
        ("canary_scans_timed", h.timed),
        ("canary_scan_gpu_us_total", h.gpu_us),
        ("canary_scan_gpu_us_max", h.gpu_us_max),
        ("canary_array_bytes", device_bytes),
        ("canary_host_bytes", host_bytes),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_idle_program_is_scanned_at_doubling_gaps_then_every_max_skip_rounds() {
        let scanned: Vec<u32> = (1..=200).filter(|&q| scans_when_quiet(q)).collect();
        assert_eq!(scanned, [1, 2, 4, 8, 16, 32, 64, 96, 128, 160, 192]);
    }
}
