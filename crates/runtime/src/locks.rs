//! The one way the runtime inside a program takes a `std` lock. A panic in gpusan's code
//! while a lock is held (caught at the C boundary, `gpusan-inject`'s `driver::boundary`)
//! poisons the lock; `lock().unwrap()` would then panic in every later call that takes it,
//! the report written at exit among them. [`lock`], [`read`] and [`write`] take the lock
//! whatever a panic left: what it guards was left by a panic caught at the boundary, which
//! stops the bookkeeping that panicked, and what is still read afterwards (findings,
//! counters for the report) holds whole values.

use std::sync::{Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard, TryLockError};
use std::time::{Duration, Instant};

/// `m`, locked, poisoned or not.
pub fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `m`, locked, poisoned or not, if it can be within `wait`: at exit, a thread wedged
/// while holding it (in a driver call that never returns) must not hang the program.
pub fn lock_within<T: ?Sized>(m: &Mutex<T>, wait: Duration) -> Option<MutexGuard<'_, T>> {
    let deadline = Instant::now() + wait;
    loop {
        match m.try_lock() {
            Ok(g) => return Some(g),
            Err(TryLockError::Poisoned(p)) => return Some(p.into_inner()),
            Err(TryLockError::WouldBlock) if Instant::now() >= deadline => return None,
            Err(TryLockError::WouldBlock) => std::thread::sleep(Duration::from_micros(200)),
        }
    }
}

/// `l`, read-locked, poisoned or not.
pub fn read<T: ?Sized>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(PoisonError::into_inner)
}

/// `l`, write-locked, poisoned or not.
pub fn write<T: ?Sized>(l: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_held_elsewhere_is_given_up_on_after_the_wait() {
        let m = std::sync::Arc::new(Mutex::new(1));
        let held = m.lock().unwrap();
        let other = std::sync::Arc::clone(&m);
        let t = std::thread::spawn(move || lock_within(&other, Duration::from_millis(20)).is_none());
        assert!(t.join().unwrap());
        drop(held);
        assert_eq!(lock_within(&m, Duration::from_millis(20)).map(|g| *g), Some(1));
    }

    #[test]
    fn a_lock_poisoned_by_a_panic_is_taken_again_with_what_it_held() {
        let m = Mutex::new(1);
        let l = RwLock::new(2);
        let _ = std::panic::catch_unwind(|| {
            let (mut a, mut b) = (lock(&m), write(&l));
            *a += 10;
            *b += 10;
            panic!("while holding both");
        });
        assert!(m.is_poisoned() && l.is_poisoned());
        assert_eq!(*lock(&m), 11);
        assert_eq!(*read(&l), 12);
        *write(&l) = 3;
        assert_eq!(*read(&l), 3);
    }
}
