//! The `GPUSAN_*` environment variables: their names, and the values both sides read.
//!
//! `gpusan run` passes its options to the injected library in the first group; the rest
//! are for users and tests that point gpusan at files. An empty value counts as unset.
//! (`GPUSAN_PASS_FINGERPRINT` is no variable of a process: `crates/inject/build.rs` hands
//! it to the compiler.)

// Set by `gpusan run`, read by the injected library.

/// Set (to `1`) when `gpusan run`'s standard error is a terminal: while the library
/// instruments a module it names it in `report-<pid>.json.progress`, for the progress line.
pub const PROGRESS: &str = "GPUSAN_PROGRESS";
/// [`crate::Mode::name`]; unset: `api`.
pub const MODE: &str = "GPUSAN_MODE";
/// The folder the library writes `report-<pid>.json` and its `.events` into.
pub const REPORT_DIR: &str = "GPUSAN_REPORT_DIR";
/// [`LEAK_CHECK_FULL`] reports device allocations never freed; anything else does not.
pub const LEAK_CHECK: &str = "GPUSAN_LEAK_CHECK";
pub const LEAK_CHECK_FULL: &str = "full";
pub const LEAK_CHECK_NONE: &str = "none";
/// [`crate::Reaction::name`]; unset: `report`.
pub const CHECK_REACTION: &str = "GPUSAN_CHECK_REACTION";
/// Freed bytes held back from reuse (a decimal number).
pub const QUARANTINE_BYTES: &str = "GPUSAN_QUARANTINE_BYTES";
/// [`crate::LocalBounds::name`]; unset: `object`.
pub const LOCAL_BOUNDS: &str = "GPUSAN_LOCAL_BOUNDS";
/// [`CHECK_COUNT_ON`]: checked kernels also count their checks (a measurement build).
pub const CHECK_COUNT: &str = "GPUSAN_CHECK_COUNT";
pub const CHECK_COUNT_ON: &str = "1";
pub const CHECK_COUNT_OFF: &str = "0";
/// [`crate::Route::name`]; unset: `auto`.
pub const ROUTE: &str = "GPUSAN_ROUTE";
/// Measurement only: `empty` patches machine code with a patch that returns at once
/// ([`crate::binary::EMPTY_ACCESS_PATCH`]), so a run shows what the Compute Sanitizer API
/// costs by itself, apart from gpusan's lookups.
pub const BINARY_PATCH: &str = "GPUSAN_BINARY_PATCH";
pub const BINARY_PATCH_EMPTY: &str = "empty";
/// [`crate::binary::Kinds::name`]: the access kinds beyond global memory the binary route
/// patches; unset (or unknown): all.
pub const BINARY_KINDS: &str = "GPUSAN_BINARY_KINDS";
/// Bytes added after each device allocation where the binary route may patch machine code
/// (a decimal number; 0: none; unset: [`REDZONE_DEFAULT`]): nothing else can be placed
/// there, so an overflow of the allocation that reaches them is caught by address alone.
pub const REDZONE: &str = "GPUSAN_REDZONE";
pub const REDZONE_DEFAULT: u64 = 256;
/// `--redzone`'s default in `--mode canary`: the padding that holds each allocation's tail
/// canary (32 bytes: the memory budget per allocation).
pub const CANARY_PAD_DEFAULT: u64 = 32;
/// Whether pool blocks (`gpusan_pool_block_alloc`/`free`, a tensor each) record the host
/// stack of their allocation and free ([`POOL_SITES_ON`]); unset: not. Unwinding at every
/// tensor allocation cost a PyTorch training step about 30% on the H100.
pub const POOL_SITES: &str = "GPUSAN_POOL_SITES";
pub const POOL_SITES_ON: &str = "1";
/// `libsanitizer-public.so`, the Compute Sanitizer API library: set by `gpusan run` when it
/// found one, or by the user to say where it is.
pub const SANITIZER_LIB: &str = "GPUSAN_SANITIZER_LIB";
/// Which launches are checked (`--kernel-name`, `--kernel-name-exclude`, `--launch-skip`,
/// `--launch-count`): `gpusan_runtime::kernel_filter::Spec` as JSON; unset: every launch.
pub const KERNEL_SELECTION: &str = "GPUSAN_KERNEL_SELECTION";
/// `--target-processes application-only`: the pid of `gpusan run`; only its direct child
/// (the application) is checked, other processes run untouched.
pub const ONLY_CHILD_OF: &str = "GPUSAN_ONLY_CHILD_OF";
/// `--canary-interval-ms`: milliseconds between two scans of the canaries, a decimal
/// number read by [`canary_interval_us`] (unset or invalid: [`CANARY_INTERVAL_US_DEFAULT`]).
pub const CANARY_INTERVAL_MS: &str = "GPUSAN_CANARY_INTERVAL_MS";
/// `no_kernels`: the canary guard takes its batches but launches nothing (nothing is
/// scanned); `no_wait`: it launches its kernels without first ordering them after the
/// program's streams (no event recorded there: a pool block's canary may then be written
/// while the block's last user still runs). For measuring where canary mode's cost lies
/// (bench/canary-overhead.sh's variants), never for use.
pub const CANARY_DIAG: &str = "GPUSAN_CANARY_DIAG";
/// The default interval, 4 ms, in microseconds. At 1 ms canary mode cost a PyTorch
/// Transformer step 5–35 % on the H100 in every round of calls 19–20; at 4 ms and longer
/// less in calls 10–12 and 20 (0.94–1.00), though 4–37 % in call 21's three rounds
/// (bench/results/h100-issue17). The guard's GPU work made no difference there (call 20's
/// `empty_kernels`).
pub const CANARY_INTERVAL_US_DEFAULT: u64 = 4_000;
/// The shortest interval taken, 0.05 ms: GMOD's detection latency (0.01–0.016 ms) needs
/// scans well under a millisecond apart, and the guard thread must still leave the CPU to
/// the program.
pub const CANARY_INTERVAL_US_MIN: u64 = 50;
/// The longest, one minute.
pub const CANARY_INTERVAL_US_MAX: u64 = 60_000_000;

/// An interval in milliseconds (`--canary-interval-ms`, [`CANARY_INTERVAL_MS`]) as whole
/// microseconds: a decimal number (`1`, `0.1`, `2.5`) of at most three decimals, from
/// [`CANARY_INTERVAL_US_MIN`] to [`CANARY_INTERVAL_US_MAX`]. Parsed as a decimal, not a
/// float, so `0.1` is exactly 100 µs. The error says why in words a user can act on.
pub fn canary_interval_us(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let range = "from 0.05 to 60000 milliseconds";
    if t.starts_with('-') {
        return Err(format!("`{t}` is negative: the interval between two scans is {range}"));
    }
    let (whole, frac) = t.split_once('.').unwrap_or((t, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if (whole.is_empty() && frac.is_empty()) || !digits(whole) || !digits(frac) {
        return Err(format!("`{t}` is not a number of milliseconds (e.g. 1 or 0.1)"));
    }
    let frac = frac.trim_end_matches('0');
    if frac.len() > 3 {
        return Err(format!("`{t}` is finer than a microsecond (at most three decimals)"));
    }
    let whole: u64 = if whole.is_empty() { 0 } else { whole.parse().map_err(|_| format!("`{t}` is too long"))? };
    let frac_us: u64 = format!("{frac:0<3}").parse().unwrap_or(0);
    let us = whole.checked_mul(1_000).and_then(|w| w.checked_add(frac_us)).unwrap_or(u64::MAX);
    if us == 0 {
        return Err(format!("`{t}` is zero: the interval between two scans is {range}"));
    }
    if !(CANARY_INTERVAL_US_MIN..=CANARY_INTERVAL_US_MAX).contains(&us) {
        return Err(format!("`{t}` is out of range: the interval between two scans is {range}"));
    }
    Ok(us)
}
/// The NVTX injection library the program named in `NVTX_INJECTION64_PATH` before `gpusan
/// run` pointed that at gpusan's: gpusan's NVTX entry points load it and forward to it.
pub const NVTX_CHAIN: &str = "GPUSAN_NVTX_CHAIN";

// Set by users, scripts and tests.

/// The injected library `gpusan run` preloads (default: next to the `gpusan` binary).
pub const INJECT_LIB: &str = "GPUSAN_INJECT_LIB";
/// The folder of cached instrumented PTX and of `gpusan nvcc-env`'s toolkit (default under
/// `~/.cache/gpusan`).
pub const CACHE_DIR: &str = "GPUSAN_CACHE_DIR";
/// The injection probe's output file: the library records which doors each call came
/// through.
pub const PROBE_OUT: &str = "GPUSAN_PROBE_OUT";
/// NVIDIA's ptxas, for gpusan's `ptxas` stand-in to hand on to.
pub const REAL_PTXAS: &str = "GPUSAN_REAL_PTXAS";
/// Set by the `ptxas` stand-in for the ptxas it runs: a stand-in that finds it set is
/// running itself.
pub const PTXAS_ACTIVE: &str = "GPUSAN_PTXAS_ACTIVE";
/// The pass the `ptxas` stand-in applies (default `check`).
pub const PTXAS_PASS: &str = "GPUSAN_PTXAS_PASS";
/// A folder the `ptxas` stand-in keeps a copy of each instrumented PTX in.
pub const PTXAS_KEEP: &str = "GPUSAN_PTXAS_KEEP";
/// The root of the CUDA toolchain tests use (its `bin/` holds ptxas; default the pinned one
/// in `.toolchain/`).
pub const CUDA: &str = "GPUSAN_CUDA";
/// A folder of PTX for the parser's corpus tests (default `tests/corpus/ptx`).
pub const PTX_CORPUS: &str = "GPUSAN_PTX_CORPUS";
/// Set by the injected library once it pointed the program's own kernel caches (CuPy's,
/// numba's, PyTorch's) at folders of gpusan's: a child process keeps its parent's folders.
pub const PROGRAM_CACHES: &str = "GPUSAN_PROGRAM_CACHES";

/// `gpusan trace`, `gpusan run --trace` (issue 19): where the process writes its trace
/// (`docs/trace-format.md`); another process of the run writes at this path `.PID`.
pub const TRACE_OUT: &str = "GPUSAN_TRACE_OUT";
/// Which launches a traced run records the accesses of, `FIRST:EVERY`: each kernel's first
/// FIRST launches, then one in EVERY (0: none more). Unset: every launch.
pub const TRACE_SAMPLE: &str = "GPUSAN_TRACE_SAMPLE";

/// Launches a trace records: each kernel's first `first`, then one in `every` (0: none more).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchSample {
    pub first: u64,
    pub every: u64,
}

impl LaunchSample {
    /// `FIRST:EVERY` (or `FIRST`: those only).
    pub fn parse(s: &str) -> Result<LaunchSample, String> {
        let (first, every) = s.split_once(':').unwrap_or((s, "0"));
        let num = |v: &str| v.trim().parse::<u64>().map_err(|_| format!("{s:?}: FIRST:EVERY, two whole numbers"));
        Ok(LaunchSample { first: num(first)?, every: num(every)? })
    }

    /// Whether the launch numbered `n` (from 0) of a kernel is recorded.
    pub fn takes(&self, n: u64) -> bool {
        n < self.first || self.every > 0 && (n - self.first).is_multiple_of(self.every)
    }
}
/// Fence mode's tenant (issue 18): the socket of the `gpusan serve` manager its driver
/// calls are forwarded to.
pub const SERVER: &str = "GPUSAN_SERVER";
/// Fence mode's tenant: the size of the partition it asks the manager for, as a power of two
/// (default 30: 1 GiB).
pub const FENCE_MEMORY_LOG2: &str = "GPUSAN_FENCE_MEMORY_LOG2";

/// Every variable above.
pub const ALL: [&str; 30] = [
    MODE,
    CANARY_INTERVAL_MS,
    CANARY_DIAG,
    PROGRESS,
    LOCAL_BOUNDS,
    ROUTE,
    BINARY_PATCH,
    BINARY_KINDS,
    REPORT_DIR,
    LEAK_CHECK,
    CHECK_REACTION,
    QUARANTINE_BYTES,
    REDZONE,
    POOL_SITES,
    CHECK_COUNT,
    SANITIZER_LIB,
    KERNEL_SELECTION,
    ONLY_CHILD_OF,
    INJECT_LIB,
    CACHE_DIR,
    PROBE_OUT,
    REAL_PTXAS,
    PTXAS_ACTIVE,
    PTXAS_PASS,
    PTXAS_KEEP,
    CUDA,
    PTX_CORPUS,
    PROGRAM_CACHES,
    SERVER,
    FENCE_MEMORY_LOG2,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_gpusans_and_distinct() {
        for (i, name) in ALL.iter().enumerate() {
            assert!(name.starts_with("GPUSAN_"), "{name}");
            assert!(name.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_'), "{name}");
            assert!(!ALL[..i].contains(name), "{name} twice");
        }
    }

    #[test]
    fn canary_intervals_are_decimal_milliseconds_in_microseconds() {
        for (text, us) in [("1", 1_000), ("0.1", 100), ("0.05", 50), (".5", 500), ("2.5", 2_500), ("60000", 60_000_000)]
        {
            assert_eq!(canary_interval_us(text), Ok(us), "{text}");
        }
        assert_eq!(canary_interval_us("0.100000"), Ok(100), "trailing zeros are no finer");
        for (text, why) in [
            ("0", "is zero"),
            ("0.000", "is zero"),
            ("-1", "is negative"),
            ("-0.1", "is negative"),
            ("0.04", "out of range"),
            ("60000.001", "out of range"),
            ("0.0001", "finer than a microsecond"),
            ("1e3", "not a number"),
            ("", "not a number"),
            (".", "not a number"),
            ("1.2.3", "not a number"),
            ("99999999999999999999", "too long"),
        ] {
            let e = canary_interval_us(text).expect_err(text);
            assert!(e.contains(why), "{text}: {e}");
        }
    }

    #[test]
    fn values_of_a_switch_differ() {
        assert_ne!(LEAK_CHECK_FULL, LEAK_CHECK_NONE);
        assert_ne!(CHECK_COUNT_ON, CHECK_COUNT_OFF);
    }
}

#[cfg(test)]
mod launch_sample_tests {
    use super::LaunchSample;

    #[test]
    fn a_sample_takes_the_first_launches_then_one_in_every() {
        let s = LaunchSample::parse("2:3").unwrap();
        let taken: Vec<u64> = (0..12).filter(|&n| s.takes(n)).collect();
        assert_eq!(taken, vec![0, 1, 2, 5, 8, 11]);
        let first_only = LaunchSample::parse("1").unwrap();
        assert_eq!((0..5).filter(|&n| first_only.takes(n)).count(), 1);
        assert!(LaunchSample::parse("x:1").is_err() && LaunchSample::parse("1:-1").is_err());
    }
}
