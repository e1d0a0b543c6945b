//! State each process has its own of, so that a child made by `fork` never waits on a lock
//! of its parent's.
//!
//! `fork` copies one thread: any lock another thread of the parent held at that moment stays
//! held in the child forever, and a structure it was changing stays half changed. The
//! runtime therefore keeps what it knows of a process in [`PerProcess`] values: created on
//! first use, and left behind in a child ([`after_fork_in_child`] starts a new generation),
//! which creates its own on first use. The parent's values are never touched there (not
//! even dropped), so whatever state their locks were in cannot matter. Their locks are
//! `std`'s, which keep all their state in the lock itself (`parking_lot`'s keep waiters in
//! a process-wide table another thread may have held at the fork).
//!
//! What cannot be left behind is guarded the other way: [`fork_waits`] runs work a fork
//! must not split (the symbolizer's own lock and caches, third-party state), and
//! [`before_fork`] waits for it, for a while; [`after_fork_in_parent`] and
//! [`after_fork_in_child`] release it. A child forked while such work was still under way
//! does without it. The injected library registers the three with `pthread_atfork`.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, TryLockError};
use std::time::{Duration, Instant};

use crate::locks;

/// Bumped in every child made by `fork`: values of an older generation are the parent's.
static GENERATION: AtomicU64 = AtomicU64::new(0);

struct Entry<T> {
    generation: u64,
    value: T,
}

/// A value of this process, made by `init` on first use (see the module's comment).
pub struct PerProcess<T> {
    current: AtomicPtr<Entry<T>>,
    init: fn() -> T,
}

// SAFETY: the value is shared by reference between threads exactly as a `static T` would be.
unsafe impl<T: Send + Sync> Sync for PerProcess<T> {}

impl<T> PerProcess<T> {
    pub const fn new(init: fn() -> T) -> Self {
        PerProcess { current: AtomicPtr::new(std::ptr::null_mut()), init }
    }

    /// This process's value, made now if it has none yet. Lock-free: threads racing to make
    /// it each make one and all but one drop theirs.
    pub fn get(&self) -> &T {
        let generation = GENERATION.load(Ordering::Acquire);
        let mut seen = self.current.load(Ordering::Acquire);
        if let Some(v) = self.of(seen, generation) {
            return v;
        }
        let new = Box::into_raw(Box::new(Entry { generation, value: (self.init)() }));
        loop {
            // Only a value of an older generation (or none) is ever replaced, so a value
            // this process handed out stays its value.
            match self.current.compare_exchange(seen, new, Ordering::AcqRel, Ordering::Acquire) {
                // SAFETY: `new` is ours and now published; entries are never freed.
                Ok(_) => return unsafe { &(*new).value },
                Err(now) => {
                    if let Some(v) = self.of(now, generation) {
                        // SAFETY: `new` was never published.
                        drop(unsafe { Box::from_raw(new) });
                        return v;
                    }
                    seen = now;
                }
            }
        }
    }

    /// This process's value, if it made one.
    pub fn existing(&self) -> Option<&T> {
        self.of(self.current.load(Ordering::Acquire), GENERATION.load(Ordering::Acquire))
    }

    fn of(&self, entry: *mut Entry<T>, generation: u64) -> Option<&T> {
        // SAFETY: published entries are never freed (a parent's are left to the child).
        let entry = unsafe { entry.as_ref()? };
        (entry.generation == generation).then_some(&entry.value)
    }
}

/// Held by work a fork waits for (and by [`before_fork`] across the fork).
static UNSPLIT: Mutex<()> = Mutex::new(());
/// A fork went ahead while [`fork_waits`] work may have been under way: in this process
/// (a child, or one of its own) that work's state may be half changed, so it is not done.
static SPLIT: AtomicBool = AtomicBool::new(false);
/// How long a fork waits for work under way. Bounded, so that the parent never hangs in
/// `fork`: another library's prepare handler, run before this one, may hold what the work
/// needs (an allocator's locks); the child then does without the work instead.
const FORK_WAIT: Duration = Duration::from_millis(500);

thread_local! {
    /// [`UNSPLIT`], held by the forking thread from `before_fork` to the `after_fork_*`.
    static HELD: RefCell<Option<MutexGuard<'static, ()>>> = const { RefCell::new(None) };
}

/// Runs `f`, which a fork must not split: a fork waits until it is done (for a while: see
/// [`FORK_WAIT`]). For work on state that cannot be made per process (a third-party
/// library's lock and caches); keep it short, and never fork or wait for another thread
/// inside. `None`, without running `f`, in a process forked while such work went on.
pub fn fork_waits<R>(f: impl FnOnce() -> R) -> Option<R> {
    if SPLIT.load(Ordering::Acquire) {
        return None;
    }
    let _held = locks::lock(&UNSPLIT);
    Some(f())
}

/// `pthread_atfork`'s prepare handler: waits for [`fork_waits`] work to finish and holds
/// it off until the fork is done.
pub fn before_fork() {
    let deadline = Instant::now() + FORK_WAIT;
    let guard = loop {
        match UNSPLIT.try_lock() {
            Ok(g) => break Some(g),
            Err(TryLockError::Poisoned(p)) => break Some(p.into_inner()),
            Err(TryLockError::WouldBlock) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(1)),
            Err(TryLockError::WouldBlock) => break None,
        }
    };
    // Without the thread's storage (a fork from a thread being torn down) nothing is held,
    // and the child takes itself for split.
    let _ = HELD.try_with(|h| *h.borrow_mut() = guard);
}

/// `pthread_atfork`'s parent handler.
pub fn after_fork_in_parent() {
    let _ = HELD.try_with(|h| drop(h.borrow_mut().take()));
}

/// `pthread_atfork`'s child handler: the child starts a generation of its own (every
/// [`PerProcess`] value is made anew on first use), and [`fork_waits`] work may run again
/// (a `std` mutex is one word: the forking thread, which holds it, unlocks its copy) unless
/// the fork went ahead without it.
pub fn after_fork_in_child() {
    GENERATION.fetch_add(1, Ordering::AcqRel);
    match HELD.try_with(|h| h.borrow_mut().take()) {
        Ok(Some(guard)) => drop(guard),
        _ => SPLIT.store(true, Ordering::Release),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    static MADE: AtomicUsize = AtomicUsize::new(0);

    fn make() -> usize {
        MADE.fetch_add(1, Ordering::SeqCst)
    }

    #[test]
    fn one_value_even_when_threads_race() {
        static V: PerProcess<usize> = PerProcess::new(make);
        assert!(V.existing().is_none());
        let seen: Vec<usize> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8).map(|_| s.spawn(|| *V.get())).collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(seen.iter().all(|&v| v == seen[0]), "{seen:?}");
        assert_eq!(V.existing(), Some(&seen[0]));
    }

    /// The fork tests share the process's fork gate: one at a time.
    static SERIAL: Mutex<()> = Mutex::new(());

    /// Forks; the child runs `child` (its exit status: 0 when it holds) and leaves by
    /// `_exit`. The parent's wait for the child's end, and its status.
    fn fork_child(child: impl FnOnce() -> bool) -> (Duration, i32) {
        let t = Instant::now();
        before_fork();
        // SAFETY: the child only touches this module's values and leaves with `_exit`.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            after_fork_in_child();
            unsafe { libc::_exit(if child() { 0 } else { 1 }) };
        }
        after_fork_in_parent();
        let waited = t.elapsed();
        let mut status = -1;
        unsafe { libc::waitpid(pid, &mut status, 0) };
        (waited, status)
    }

    /// A thread holds a per-process lock (and `fork_waits` work is under way) when another
    /// forks: the fork waits for the `fork_waits` work, and the child gets a lock of its own.
    #[test]
    fn a_child_never_waits_on_a_lock_held_at_the_fork() {
        let _serial = locks::lock(&SERIAL);
        static LOCK: PerProcess<Mutex<u32>> = PerProcess::new(|| Mutex::new(7));
        *locks::lock(LOCK.get()) = 1;
        let (held, release) = (std::sync::Barrier::new(2), std::sync::Barrier::new(2));
        let (waited, status) = std::thread::scope(|s| {
            s.spawn(|| {
                let _g = locks::lock(LOCK.get());
                fork_waits(|| {
                    held.wait();
                    std::thread::sleep(Duration::from_millis(200));
                });
                release.wait();
            });
            held.wait();
            let r = fork_child(|| LOCK.get().try_lock().is_ok_and(|v| *v == 7) && fork_waits(|| 1) == Some(1));
            release.wait();
            r
        });
        assert!(waited >= Duration::from_millis(100), "the fork did not wait: {waited:?}");
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "child status {status:#x}");
        // The parent's value is untouched.
        assert_eq!(*locks::lock(LOCK.get()), 1);
    }

    /// Work a fork must not split runs past the fork's patience: the fork goes ahead, and
    /// the child does without that work rather than wait on a lock no thread will release.
    #[test]
    fn a_fork_waits_only_so_long_and_the_child_does_without() {
        let _serial = locks::lock(&SERIAL);
        let started = std::sync::Barrier::new(2);
        let (waited, status) = std::thread::scope(|s| {
            s.spawn(|| {
                fork_waits(|| {
                    started.wait();
                    std::thread::sleep(FORK_WAIT * 3);
                })
            });
            started.wait();
            fork_child(|| fork_waits(|| ()).is_none())
        });
        assert!(waited >= FORK_WAIT && waited < FORK_WAIT * 2, "{waited:?}");
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "child status {status:#x}");
        // The parent was never split.
        assert_eq!(fork_waits(|| 2), Some(2));
    }
}
