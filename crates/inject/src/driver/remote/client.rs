//! The tenant's connection to its manager: made at the first forwarded call, one request at
//! a time (the manager serves a tenant's calls in order; launches are sent without waiting), made again in a forked child (a
//! socket shared by two processes would interleave their frames).
//!
//! Launches that follow each other closely are queued and written together (one system
//! call for many: a program launching back to back pays a frame's encoding per launch, not
//! a write), in front of the next request that waits for an answer, or once the queue is
//! full, or by the flusher thread at most [`BATCH_GAP`] after the first was queued, so a
//! launch never waits for the program's next call. A launch after a pause is written at
//! once.

use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use gpusan_runtime::locks;
use gpusan_runtime::per_process::PerProcess;
use gpusan_serve::protocol::{append_frame, read_frame, write_frame, Reply, Request, VERSION};

/// The partition asked for when `GPUSAN_FENCE_MEMORY_LOG2` says nothing: 1 GiB.
const DEFAULT_LOG2: u32 = 30;
/// Refusals kept for the report.
const NOTES_KEPT: usize = 20;

/// CUDA_ERROR_NOT_INITIALIZED-like answer when the manager cannot be reached:
/// CUDA_ERROR_NO_DEVICE (the tenant has no GPU of its own).
pub const NO_MANAGER: i32 = 100;

pub struct Partition {
    pub base: u64,
    pub size: u64,
}

/// The bulk segment's size: copies larger go through it in pieces. The manager pins it, so
/// it counts whole in the manager's resident memory: at 32 MiB that was 38 MB of the
/// manager's per tenant on the H100 (bench/results/fence, call 20); a piece costs a round
/// trip (tens of µs) against a millisecond of copying 8 MiB.
const SEGMENT: usize = 8 << 20;

/// A launch sent within this long of the last write is queued; a queued launch is written
/// about this long after it was queued (the flusher's timer slack is cut to 1 µs): a burst
/// of launches, made a microsecond or less apart, is written in pieces of up to
/// [`BATCH_LAUNCHES`], and a launch waits at most this long for the GPU.
pub const BATCH_GAP: Duration = Duration::from_micros(10);
/// A queue this many launches long, or this many bytes, is written at once.
const BATCH_LAUNCHES: usize = 64;
const BATCH_BYTES: usize = 64 << 10;

#[derive(Default)]
struct Conn {
    stream: Option<UnixStream>,
    partition: Option<Partition>,
    /// The shared bulk segment (address, length), mapped here and in the manager.
    segment: Option<(usize, usize)>,
    /// Why the manager could not be reached, once tried.
    failed: Option<String>,
    /// Launch frames not written yet, how many, and since when.
    queued: Vec<u8>,
    queued_launches: usize,
    queued_since: Option<Instant>,
    /// The last write to the manager.
    last_write: Option<Instant>,
}

impl Conn {
    /// Writes what is queued followed by `frame` (either may be empty) in one write.
    fn write(&mut self, frame: &[u8]) -> Result<(), i32> {
        use std::io::Write;
        let Some(s) = self.stream.as_mut() else { return Err(NO_MANAGER) };
        let written = if self.queued.is_empty() {
            s.write_all(frame)
        } else {
            self.queued.extend_from_slice(frame);
            s.write_all(&self.queued)
        };
        self.queued.clear();
        self.queued_launches = 0;
        self.queued_since = None;
        self.last_write = Some(Instant::now());
        written.map_err(|why| self.lost(why))
    }

    /// The connection failed: every later call answers [`NO_MANAGER`].
    fn lost(&mut self, why: impl std::fmt::Display) -> i32 {
        self.stream = None;
        self.failed = Some(format!("the connection failed: {why}"));
        NO_MANAGER
    }
}

/// CUDA_ERROR_INVALID_VALUE: a request too large for a frame.
const TOO_LARGE: i32 = 1;

/// Appends `request`'s frame to `buf` (which an error leaves as it was).
fn append(buf: &mut Vec<u8>, request: &Request) -> Result<(), i32> {
    append_frame(buf, request).map_err(|why| {
        note(format!("fence: not sent: {why}"));
        TOO_LARGE
    })
}

static CONN: PerProcess<Mutex<Conn>> = PerProcess::new(Default::default);
static NOTES: PerProcess<Mutex<Vec<String>>> = PerProcess::new(Default::default);

/// The manager's socket, if this process is a tenant.
pub fn server() -> Option<&'static PathBuf> {
    static SERVER: OnceLock<Option<PathBuf>> = OnceLock::new();
    SERVER
        .get_or_init(|| std::env::var_os(gpusan_abi::env::SERVER).filter(|v| !v.is_empty()).map(PathBuf::from))
        .as_ref()
}

/// The manager's refusals, in words, for the report (the first few).
pub fn notes() -> Vec<String> {
    let mut out: Vec<String> = locks::lock(NOTES.get()).clone();
    if let Some(why) = &locks::lock(CONN.get()).failed {
        out.insert(0, format!("fence: the manager was not reached: {why}"));
    }
    let missing = locks::lock(NOT_FORWARDED.get());
    if !missing.is_empty() {
        let shown: Vec<&str> = missing.iter().take(NOTES_KEPT).map(String::as_str).collect();
        let more = missing.len().saturating_sub(NOTES_KEPT);
        out.push(format!(
            "fence: driver functions the tenant (or gpusan in it) looked up that the manager does not serve, so their \
             calls failed as with no driver: {}{}",
            shown.join(", "),
            if more > 0 { format!(" and {more} more") } else { String::new() }
        ));
    }
    out
}

fn note(text: String) {
    let mut n = locks::lock(NOTES.get());
    if n.len() < NOTES_KEPT {
        n.push(text);
    }
}

fn connect(c: &mut Conn) -> Result<(), i32> {
    if c.stream.is_some() {
        return Ok(());
    }
    if c.failed.is_some() {
        return Err(NO_MANAGER);
    }
    let Some(path) = server() else { return Err(NO_MANAGER) };
    let log2 =
        std::env::var(gpusan_abi::env::FENCE_MEMORY_LOG2).ok().and_then(|v| v.parse().ok()).unwrap_or(DEFAULT_LOG2);
    let name = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "tenant".into());
    let attempt = || -> Result<(UnixStream, Partition), String> {
        let mut s = UnixStream::connect(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let hello = Request::Hello { version: VERSION, pid: std::process::id(), name, memory_log2: log2 };
        write_frame(&mut s, &hello).map_err(|e| e.to_string())?;
        match read_frame(&mut s).map_err(|e| e.to_string())? {
            Reply::Hello { partition_base, partition_size, .. } => {
                Ok((s, Partition { base: partition_base, size: partition_size }))
            }
            Reply::Error { message, .. } => Err(format!("it refused the tenant: {message}")),
            other => Err(format!("it answered Hello with {other:?}")),
        }
    };
    match attempt() {
        Ok((s, p)) => {
            c.segment = segment(&s);
            c.stream = Some(s);
            c.partition = Some(p);
            Ok(())
        }
        Err(why) => {
            c.failed = Some(why);
            Err(NO_MANAGER)
        }
    }
}

/// Whether this process has reached its manager (a tenant's context exists from then on).
pub fn connected() -> bool {
    locks::lock(CONN.get()).stream.is_some()
}

/// Connects, if not yet: the tenant's partition.
pub fn hello() -> Result<(u64, u64), i32> {
    let mut c = locks::lock(CONN.get());
    connect(&mut c)?;
    Ok(c.partition.as_ref().map(|p| (p.base, p.size)).unwrap_or_default())
}

/// A shared segment for bulk data, given to the manager with its descriptor; `None` (copies
/// then travel in the frames) if any step fails or the manager refuses it.
fn segment(s: &UnixStream) -> Option<(usize, usize)> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    // SAFETY: plain system calls on a descriptor of ours; the mapping is checked.
    unsafe {
        let fd = libc::memfd_create(c"gpusan-fence-segment".as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING);
        if fd < 0 {
            return None;
        }
        let fd = OwnedFd::from_raw_fd(fd);
        // Sealed at its size: the manager maps it, and takes no file that could shrink.
        if libc::ftruncate(fd.as_raw_fd(), SEGMENT as libc::off_t) != 0
            || libc::fcntl(
                fd.as_raw_fd(),
                libc::F_ADD_SEALS,
                libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL,
            ) != 0
        {
            return None;
        }
        let at = libc::mmap(
            std::ptr::null_mut(),
            SEGMENT,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd.as_raw_fd(),
            0,
        );
        if at == libc::MAP_FAILED {
            return None;
        }
        let mut frame = Vec::new();
        let sent = write_frame(&mut frame, &Request::Segment { bytes: SEGMENT as u64 })
            .and_then(|()| gpusan_serve::fdpass::send_with_fd(s, &frame, fd.as_raw_fd()));
        let mut reader = s;
        match sent.ok().and_then(|()| read_frame::<Reply>(&mut reader).ok()) {
            Some(Reply::Done) => Some((at as usize, SEGMENT)),
            other => {
                if let Some(Reply::Error { message, .. }) = other {
                    note(format!("fence: copies go through the socket: the manager refused the segment: {message}"));
                }
                libc::munmap(at, SEGMENT);
                None
            }
        }
    }
}

/// Copies `data` to the device at `dst` through the shared segment, in pieces: `None` when
/// there is no segment (the caller sends the bytes in frames).
pub fn copy_in(dst: u64, data: &[u8]) -> Option<Result<(), i32>> {
    let mut c = locks::lock(CONN.get());
    if let Err(code) = connect(&mut c) {
        return Some(Err(code));
    }
    let (at, len) = c.segment?;
    for (i, piece) in data.chunks(len).enumerate() {
        // SAFETY: the segment is ours, `len` bytes; the lock keeps other threads out of it
        // until the manager has copied.
        unsafe { std::ptr::copy_nonoverlapping(piece.as_ptr(), at as *mut u8, piece.len()) };
        let r = Request::CopyHtoDShared { dst: dst + (i * len) as u64, offset: 0, bytes: piece.len() as u64 };
        if let Err(code) = exchange(&mut c, &r) {
            return Some(Err(code));
        }
    }
    Some(Ok(()))
}

/// Copies from the device at `src` into `out` through the shared segment, in pieces: `None`
/// when there is no segment.
pub fn copy_out(src: u64, out: &mut [u8]) -> Option<Result<(), i32>> {
    let mut c = locks::lock(CONN.get());
    if let Err(code) = connect(&mut c) {
        return Some(Err(code));
    }
    let (at, len) = c.segment?;
    for (i, piece) in out.chunks_mut(len).enumerate() {
        let r = Request::CopyDtoHShared { src: src + (i * len) as u64, offset: 0, bytes: piece.len() as u64 };
        if let Err(code) = exchange(&mut c, &r) {
            return Some(Err(code));
        }
        // SAFETY: as in `copy_in`; the manager wrote the piece there before it answered.
        unsafe { std::ptr::copy_nonoverlapping(at as *const u8, piece.as_mut_ptr(), piece.len()) };
    }
    Some(Ok(()))
}

/// How long the tenant watches for the manager's reply before it blocks
/// (`$GPUSAN_FENCE_SPIN_US`, default `protocol::SPIN`; 0: never).
fn spin() -> std::time::Duration {
    static SPIN: OnceLock<std::time::Duration> = OnceLock::new();
    *SPIN.get_or_init(|| {
        std::env::var("GPUSAN_FENCE_SPIN_US")
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            .map_or(gpusan_serve::protocol::SPIN, std::time::Duration::from_micros)
    })
}

/// One request and its reply; a refusal is its CUDA error code (and a note).
pub fn call(request: &Request) -> Result<Reply, i32> {
    let mut c = locks::lock(CONN.get());
    connect(&mut c)?;
    exchange(&mut c, request)
}

fn exchange(c: &mut Conn, request: &Request) -> Result<Reply, i32> {
    // The launches queued go first, in the same write: the manager serves them in order.
    let mut frame = Vec::new();
    append(&mut frame, request)?;
    c.write(&frame)?;
    let Some(s) = c.stream.as_mut() else { return Err(NO_MANAGER) };
    gpusan_serve::protocol::spin_until_readable(std::os::fd::AsRawFd::as_raw_fd(s), spin());
    match read_frame(s) {
        Ok(Reply::Error { code, message }) => {
            note(format!("fence: the manager refused: {message}"));
            Err(code)
        }
        Ok(r) => Ok(r),
        Err(why) => Err(c.lost(why)),
    }
}

/// A request the manager does not answer (a launch): sent, not waited for, or queued
/// behind one sent just before it (see the module's comment). The manager's refusal of it
/// comes back at the next synchronization.
pub fn send(request: &Request) -> Result<(), i32> {
    let mut c = locks::lock(CONN.get());
    connect(&mut c)?;
    let close = c.last_write.is_some_and(|t| t.elapsed() < BATCH_GAP);
    if !close && c.queued.is_empty() {
        let mut frame = Vec::new();
        append(&mut frame, request)?;
        return c.write(&frame);
    }
    // Encoded straight into the queue: a launch costs no buffer of its own.
    append(&mut c.queued, request)?;
    c.queued_launches += 1;
    if c.queued_launches >= BATCH_LAUNCHES || c.queued.len() >= BATCH_BYTES {
        return c.write(&[]);
    }
    if c.queued_since.is_none() {
        c.queued_since = Some(Instant::now());
        drop(c);
        wake_flusher();
    }
    Ok(())
}

/// Writes the launches queued, if any.
fn flush() {
    let mut c = locks::lock(CONN.get());
    if !c.queued.is_empty() {
        let _ = c.write(&[]);
    }
}

/// The flusher thread of this process (a forked child starts its own).
static FLUSHER: PerProcess<OnceLock<Option<std::thread::Thread>>> = PerProcess::new(OnceLock::new);

/// Wakes the flusher (started on first use): a launch was queued.
fn wake_flusher() {
    let flusher = FLUSHER.get().get_or_init(|| {
        // SAFETY: a function of ours with the signature atexit takes.
        unsafe { libc::atexit(flush_at_exit) };
        std::thread::Builder::new().name("gpusan-fence-flush".into()).spawn(flusher).ok().map(|h| h.thread().clone())
    });
    match flusher {
        Some(t) => t.unpark(),
        // No thread: nothing would write the queue later, so it is written now.
        None => flush(),
    }
}

/// A program that launches and exits at once still has its launches made: what is queued
/// is written (unless another thread holds the connection now: exit must not wait).
extern "C" fn flush_at_exit() {
    crate::driver::boundary::enter("fence flush at exit", || {
        if let Ok(mut c) = CONN.get().try_lock() {
            if !c.queued.is_empty() {
                let _ = c.write(&[]);
            }
        }
    });
}

/// Writes each queue [`BATCH_GAP`] after its first launch was queued, unless a request or a
/// full queue wrote it first; parked while nothing is queued.
fn flusher() {
    // The default slack (50 µs) would hold each queue five times as long as meant.
    // SAFETY: a plain system call about this thread.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1000 as libc::c_ulong) };
    crate::driver::boundary::enter("fence flusher", flush_loop);
}

fn flush_loop() {
    loop {
        let since = locks::lock(CONN.get()).queued_since;
        match since {
            None => std::thread::park(),
            Some(t) => {
                let due = t + BATCH_GAP;
                let now = Instant::now();
                if now < due {
                    std::thread::sleep(due - now);
                }
                let mut c = locks::lock(CONN.get());
                if c.queued_since == Some(t) {
                    let _ = c.write(&[]);
                }
            }
        }
    }
}

/// Driver functions the tenant (or gpusan inside it) looked up that the manager does not
/// serve, for the report.
static NOT_FORWARDED: PerProcess<Mutex<Vec<String>>> = PerProcess::new(Default::default);

pub fn not_forwarded(name: &str) {
    let mut n = locks::lock(NOT_FORWARDED.get());
    if !n.iter().any(|x| x == name) {
        n.push(name.to_string());
    }
}

/// A call refused by the tenant's side itself (what it cannot forward), noted for the report.
pub fn refused(what: &str) {
    note(format!("fence: not forwarded: {what}"));
}
