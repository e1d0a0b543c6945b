//! Counters a launch bumps without taking a lock: each key (a kernel handle) has a cell
//! that lives as long as the process (leaked: a thread may hold it), found under the
//! owner's lock the first time a thread meets the key and kept in that thread's cache
//! after. A launch then costs a thread-local lookup and a relaxed add, and threads
//! launching at once never wait for each other (`bench/launch-host-cost.sh`).
//!
//! A key the owner forgets (its handle going back to the driver, which may hand it out
//! again for another kernel) must not reach its old cell through a cache: the owner calls
//! [`Cells::forget`], which empties every thread's cache. A child made by `fork` has its
//! own owner state (`PerProcess`), so a cache filled in the parent is emptied there too.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};

use gpusan_runtime::per_process::PerProcess;

use crate::state::FastMap;

/// A counter cell.
pub type Cell = &'static AtomicU64;

/// A new cell, at 0, for the life of the process.
pub fn new_cell() -> Cell {
    Box::leak(Box::new(AtomicU64::new(0)))
}

/// The caches' epoch, per process: a cache made under another epoch (or in another process)
/// is emptied before use.
static EPOCH: PerProcess<AtomicU64> = PerProcess::new(|| AtomicU64::new(1));

thread_local! {
    /// (the process's epoch counter's address, its value, the cells seen).
    static CACHE: RefCell<(usize, u64, FastMap<usize, Cell>)> = RefCell::new((0, 0, FastMap::default()));
}

/// The thread caches of cells keyed by handle.
pub struct Cells;

impl Cells {
    /// The cell of `key` from this thread's cache, else from `find` (called under the
    /// owner's lock by the caller's closure), then kept.
    pub fn get(key: usize, find: impl FnOnce() -> Cell) -> Cell {
        let epoch = EPOCH.get();
        let (owner, now) = (epoch as *const AtomicU64 as usize, epoch.load(Ordering::Acquire));
        let cached = CACHE.try_with(|c| {
            let mut c = c.borrow_mut();
            if c.0 != owner || c.1 != now {
                *c = (owner, now, FastMap::default());
            }
            c.2.get(&key).copied()
        });
        match cached {
            Ok(Some(cell)) => cell,
            // Also while the thread's locals are being torn down: no cache then.
            Ok(None) | Err(_) => {
                let cell = find();
                let _ = CACHE.try_with(|c| {
                    let mut c = c.borrow_mut();
                    if c.0 == owner && c.1 == now {
                        c.2.insert(key, cell);
                    }
                });
                cell
            }
        }
    }

    /// Keys were forgotten by their owner: no cache may hand out their cells any more.
    pub fn forget() {
        EPOCH.get().fetch_add(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_finds_a_cell_once_until_the_owner_forgets_its_keys() {
        let a = new_cell();
        let mut asked = 0;
        for _ in 0..3 {
            let c = Cells::get(7, || {
                asked += 1;
                a
            });
            assert!(std::ptr::eq(c, a));
        }
        assert_eq!(asked, 1, "kept in the thread's cache");
        Cells::forget();
        let b = new_cell();
        assert!(std::ptr::eq(Cells::get(7, || b), b), "the old cell is no longer handed out");
        // Another thread has its own cache: it asks the owner.
        let other = std::thread::spawn(|| {
            let c = new_cell();
            std::ptr::eq(Cells::get(7, || c), c)
        });
        assert!(other.join().unwrap());
    }
}
