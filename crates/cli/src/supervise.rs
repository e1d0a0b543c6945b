//! Waiting for the program `gpusan run` started, so that a run cut short still ends in a
//! report: SIGTERM, SIGINT and SIGHUP sent to gpusan are passed on to the program, and
//! `--timeout` stops it, and either way gpusan waits for it to end, then reports what its
//! processes left and removes its folder (a signal's default action would have killed
//! gpusan at once, leaving the program running, the report lost and the folder behind).
//!
//! A signal the terminal sent (Ctrl-C, a hang-up) already reached the program, which is in
//! the same foreground process group: it is not sent twice (a program that cleans up at
//! the first Ctrl-C would be cut off by the second), and gpusan goes on waiting as before.
//! Signals are only recorded in the handler; the program is signalled from the waiting
//! loop, before it is reaped, so its pid cannot have been reused by another process.

use std::process::{Child, ExitStatus};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

/// How a run ended, when not on its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cut {
    /// gpusan was sent this signal, and passed it on.
    Signal(i32),
    /// `--timeout` ran out: the program was sent SIGTERM (and SIGKILL after
    /// [`KILL_AFTER`] if still running).
    Timeout,
}

/// How long a program stopped for its time gets to end after SIGTERM.
pub const KILL_AFTER: Duration = Duration::from_secs(5);

/// How often the loop looks at the program and the signals.
const TICK: Duration = Duration::from_millis(5);

const FORWARDED: [i32; 3] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP];

/// The latest signal to pass on, 0 when none.
static PENDING: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: i32, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // Only an atomic store: all a signal handler may safely do here.
    let from_terminal = !info.is_null() && unsafe { (*info).si_code } == libc::SI_KERNEL;
    if !from_terminal {
        PENDING.store(sig, Ordering::SeqCst);
    }
}

/// The handlers gpusan had before, put back when waiting ends.
pub struct Handlers([libc::sigaction; 3]);

/// Installs the handlers: before the program starts, so no signal can find gpusan
/// defenceless (the program gets the default actions back at `exec`).
pub fn install() -> Handlers {
    let mut old: [libc::sigaction; 3] = unsafe { std::mem::zeroed() };
    for (sig, old) in FORWARDED.iter().zip(&mut old) {
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(*sig, &sa, old);
        }
    }
    Handlers(old)
}

impl Drop for Handlers {
    fn drop(&mut self) {
        for (sig, old) in FORWARDED.iter().zip(&self.0) {
            unsafe { libc::sigaction(*sig, old, std::ptr::null_mut()) };
        }
    }
}

/// Waits for `child` to end, passing signals on and stopping it at `timeout`; what cut the
/// run short, if anything (the first cause).
pub fn wait(child: &mut Child, timeout: Option<Duration>) -> std::io::Result<(ExitStatus, Option<Cut>)> {
    let pid = child.id() as i32;
    let deadline = timeout.map(|t| Instant::now() + t);
    let mut cut = None;
    let mut kill_at = None;
    loop {
        let sig = PENDING.swap(0, Ordering::SeqCst);
        if sig != 0 {
            unsafe { libc::kill(pid, sig) };
            cut.get_or_insert(Cut::Signal(sig));
        }
        if deadline.is_some_and(|d| Instant::now() >= d) && kill_at.is_none() {
            unsafe { libc::kill(pid, libc::SIGTERM) };
            cut.get_or_insert(Cut::Timeout);
            kill_at = Some(Instant::now() + KILL_AFTER);
        }
        if kill_at.is_some_and(|k| Instant::now() >= k) {
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        if let Some(status) = child.try_wait()? {
            return Ok((status, cut));
        }
        std::thread::sleep(TICK);
    }
}

/// The name of signal `sig` (`SIGTERM`), or its number.
pub fn signal_name(sig: i32) -> String {
    match sig {
        libc::SIGTERM => "SIGTERM".into(),
        libc::SIGINT => "SIGINT".into(),
        libc::SIGHUP => "SIGHUP".into(),
        libc::SIGKILL => "SIGKILL".into(),
        _ => format!("signal {sig}"),
    }
}
