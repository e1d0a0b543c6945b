//! `GPUSAN_CANARY_DIAG`: switches that turn one part of canary mode off, and timers of its
//! host work, for finding where its cost lies on a real GPU (`bench/canary-overhead.sh`'s
//! variants). A comma-separated list of words; never set in a user's run (a switch leaves
//! the program unguarded), and with none set nothing here costs more than a load.
//!
//! - `no_kernels`: the guard takes its batches but launches nothing (nothing is scanned);
//! - `no_wait`: no event of the guard's in the program's streams (a pool block's canary
//!   may be written under its last user);
//! - `no_blocks`: pool blocks are recorded and padded but not armed;
//! - `bare_launch`: kernel launches (`cuLaunchKernel`, `cuLaunchKernelEx`, their `_ptsz` twins) go straight to
//!   the driver from the stand-in, none of gpusan's bookkeeping (the stand-in's own cost
//!   measured apart from `routes::launching`'s);
//! - `empty_kernels`: every batch is launched as the one-block batch kernel with no command
//!   and no entry (the guard's driver calls and waits as in a real round, none of its GPU
//!   work: which of the two costs the program);
//! - `wide_batch`: the one-launch batch kernel runs as one block per `BLOCK_THREADS`
//!   entries, not one block (the time a block holds its SM against the launches' count);
//! - `two_kernels`: every batch is launched as an update and a scan kernel, never as the
//!   one-block batch kernel (its cost compared with the one launch's);
//! - `timing`: the host time of the pool hooks, of the launch path, of the program's waits
//!   for the guard's lock, of the guard's hold of it and of its rounds, as counters
//!   `canary_diag_*` of the report (two clock reads per timed section).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Diag {
    pub no_kernels: bool,
    pub no_wait: bool,
    pub no_blocks: bool,
    pub timing: bool,
    pub bare_launch: bool,
    pub two_kernels: bool,
    pub empty_kernels: bool,
    pub wide_batch: bool,
}

impl Diag {
    /// The switches named in `value`; unknown words are ignored.
    pub fn parse(value: &str) -> Diag {
        let mut d = Diag::default();
        for word in value.split(',').map(str::trim) {
            match word {
                "no_kernels" => d.no_kernels = true,
                "no_wait" => d.no_wait = true,
                "no_blocks" => d.no_blocks = true,
                "timing" => d.timing = true,
                "bare_launch" => d.bare_launch = true,
                "two_kernels" => d.two_kernels = true,
                "empty_kernels" => d.empty_kernels = true,
                "wide_batch" => d.wide_batch = true,
                _ => {}
            }
        }
        d
    }
}

/// The run's switches (read once).
pub fn diag() -> Diag {
    static DIAG: OnceLock<Diag> = OnceLock::new();
    *DIAG.get_or_init(|| std::env::var(gpusan_abi::env::CANARY_DIAG).map(|v| Diag::parse(&v)).unwrap_or_default())
}

/// What a timer measures.
#[derive(Debug, Clone, Copy)]
pub enum Section {
    /// A pool block's hook (`gpusan_pool_block_alloc`/`free`), all of gpusan's work in it.
    PoolHook,
    /// gpusan's bookkeeping around a kernel launch (not the driver's launch).
    Launch,
    /// A program thread waiting for the guard's host lock.
    LockWait,
    /// The guard thread holding the host lock to take a batch.
    GuardHold,
    /// One round of the guard thread (every context), driver calls included.
    GuardRound,
}

const SECTIONS: usize = 5;
const NAMES: [&str; SECTIONS] = ["pool_hook", "launch", "lock_wait", "guard_hold", "guard_round"];

struct Totals {
    ns: [AtomicU64; SECTIONS],
    max_ns: [AtomicU64; SECTIONS],
    count: [AtomicU64; SECTIONS],
}

static TOTALS: Totals = Totals {
    ns: [const { AtomicU64::new(0) }; SECTIONS],
    max_ns: [const { AtomicU64::new(0) }; SECTIONS],
    count: [const { AtomicU64::new(0) }; SECTIONS],
};

/// The start of a timed section, where the run times them.
#[inline]
pub fn start() -> Option<Instant> {
    diag().timing.then(Instant::now)
}

/// The section begun at `since` ([`start`]) ended.
#[inline]
pub fn end(section: Section, since: Option<Instant>) {
    let Some(since) = since else { return };
    let ns = since.elapsed().as_nanos().min(u128::from(u64::MAX)) as u64;
    let i = section as usize;
    TOTALS.ns[i].fetch_add(ns, Ordering::Relaxed);
    TOTALS.max_ns[i].fetch_max(ns, Ordering::Relaxed);
    TOTALS.count[i].fetch_add(1, Ordering::Relaxed);
}

/// The report's counters of the timers (none unless the run times).
pub fn counters() -> Vec<(String, u64)> {
    if !diag().timing {
        return Vec::new();
    }
    let mut out = Vec::new();
    for (i, name) in NAMES.iter().enumerate() {
        out.push((format!("canary_diag_{name}_ns"), TOTALS.ns[i].load(Ordering::Relaxed)));
        out.push((format!("canary_diag_{name}_max_ns"), TOTALS.max_ns[i].load(Ordering::Relaxed)));
        out.push((format!("canary_diag_{name}_count"), TOTALS.count[i].load(Ordering::Relaxed)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_switches_are_a_comma_separated_list_and_unknown_words_are_ignored() {
        let d = Diag::parse("timing, no_blocks,bogus");
        assert_eq!(d, Diag { timing: true, no_blocks: true, ..Diag::default() });
        assert_eq!(Diag::parse("no_kernels"), Diag { no_kernels: true, ..Diag::default() });
        assert_eq!(Diag::parse("bare_launch"), Diag { bare_launch: true, ..Diag::default() });
        assert_eq!(Diag::parse("two_kernels"), Diag { two_kernels: true, ..Diag::default() });
        assert_eq!(Diag::parse("empty_kernels"), Diag { empty_kernels: true, ..Diag::default() });
        assert_eq!(Diag::parse("wide_batch"), Diag { wide_batch: true, ..Diag::default() });
        assert_eq!(Diag::parse(""), Diag::default());
    }
}
