//! The device ABI of gpusan, and everything else its parts must agree on: the reference.
//!
//! Four parts meet here and nowhere else: the passes (`crates/passes`) write code against
//! the names and layouts below; the runtime (`crates/runtime`) fills the allocation table
//! and turns error records into reports; the injected library (`crates/inject`) points
//! modules at the buffers, drains them and reads its options; the `gpusan` command
//! (`crates/cli`) sets those options. Each takes the constants from this crate, so a change
//! here is a change of all four.
//!
//! # Module variables
//!
//! A module takes part by declaring these variables ([`RUNTIME_VARS`]); the runtime sets
//! them right after the module loads, and they stay 0 when it does not (the module then
//! runs unchecked):
//!
//! | symbol | declared | value |
//! | --- | --- | --- |
//! | `__gpusan_table` ([`TABLE_SYMBOL`]) | `.const .u64` | device address of the allocation table's header ([`table`]), with the lookup cache in the [`table::LOOKUP_CACHE_BYTES`] below it |
//! | `__gpusan_errors` ([`ERRORS_SYMBOL`]) | `.global .u64` | device address of the error buffer ([`record`]) |
//! | `__gpusan_module` ([`MODULE_SYMBOL`]) | `.global .u32` | this module's number, the high bits of [`record::KERNEL`] |
//!
//! A kernel that finds an error does `i = atom.add(count, 1)` and, if `i < capacity`,
//! writes record `i`; the runtime drains new records at synchronizations, so every error is
//! counted and the first [`record::ERROR_CAPACITY`] since the last drain are reported in
//! full ([`record`] has the layout).
//!
//! Functions are numbered by name: the low bits of [`record::KERNEL`] are the function's
//! index among the module's defined functions sorted by name ([`function_numbers`],
//! [`function_order`]). The pass numbers them when it writes a record; the runtime names
//! the kernel of a record with the same rule.
//!
//! # The device heap
//!
//! A module whose kernels call `malloc`/`free` also declares its own table of device-heap
//! blocks, `__gpusan_heap` ([`HEAP_SYMBOL`], layout in [`heap`]), which the runtime does
//! not set (it starts zeroed, as module variables do). Records about heap blocks carry
//! [`heap::BLOCK_TAG`]` | base` as their allocation (bases are below 2^63), and
//! device-side frees report [`CODE_DOUBLE_FREE`] and [`CODE_INVALID_FREE`] with the pointer
//! as address and size 0.
//!
//! # Counters
//!
//! The `count` pass declares one `.global .u64` counter, [`COUNT_SYMBOL`]. A module
//! instrumented by `check` with dynamic counting (`gpusan run --mode check --count-checks`)
//! declares the four [`COUNTER_SYMBOLS`] instead, which the runtime reads back at
//! synchronizations and at exit (it never writes them; they start at 0):
//!
//! | symbol | counts, per thread |
//! | --- | --- |
//! | `__gpusan_n_access` | checks a naive checker would run (one per checked access and what it is checked against, statically in-bounds ones included) |
//! | `__gpusan_n_check` | per-access checks that ran (not skipped by a group's fast path) |
//! | `__gpusan_n_group` | group range checks that ran |
//! | `__gpusan_n_span` | entries into a two-version run (a branch, no check) |
//!
//! # Options
//!
//! `gpusan run` passes its options to the injected library in `GPUSAN_*` environment
//! variables ([`env`](mod@env)); the mode ([`Mode`]) and the reaction to an error ([`Reaction`])
//! travel by the names given here.

pub mod binary;
pub mod canary;
pub mod env;
pub mod heap;
pub mod record;
pub mod table;

/// The prefix of every symbol gpusan adds to a module: a variable with it is gpusan's own,
/// not the program's.
pub const SYMBOL_PREFIX: &str = "__gpusan_";

/// The prefix of the unchecked copy of a function gpusan appends to an instrumented module
/// (`gpusan_passes::unchecked`) when a run checks only some launches.
pub const UNCHECKED_PREFIX: &str = "__gpusan_unchecked_";

pub const TABLE_SYMBOL: &str = "__gpusan_table";
pub const ERRORS_SYMBOL: &str = "__gpusan_errors";
pub const MODULE_SYMBOL: &str = "__gpusan_module";
pub const HEAP_SYMBOL: &str = "__gpusan_heap";
/// The `count` pass's counter of executed memory instructions.
pub const COUNT_SYMBOL: &str = "__gpusan_count";
pub const N_ACCESS_SYMBOL: &str = "__gpusan_n_access";
pub const N_CHECK_SYMBOL: &str = "__gpusan_n_check";
pub const N_GROUP_SYMBOL: &str = "__gpusan_n_group";
pub const N_SPAN_SYMBOL: &str = "__gpusan_n_span";

/// The check counters, in the order a module declares them and the runtime reads them.
pub const COUNTER_SYMBOLS: [&str; 4] = [N_ACCESS_SYMBOL, N_CHECK_SYMBOL, N_GROUP_SYMBOL, N_SPAN_SYMBOL];

/// A module variable the runtime writes after the module loads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuntimeVar {
    pub name: &'static str,
    /// Its state space as PTX spells it: `const` or `global`.
    pub space: &'static str,
    /// Its type as PTX spells it.
    pub ty: &'static str,
    /// Bytes the runtime writes, the type's width (and its alignment).
    pub bytes: u32,
}

/// The variables by which a module takes part, in the order the pass declares them. The
/// table's address is `.const`: it is read at every lookup, which the constant cache serves
/// when streaming kernels have long evicted it from L1, and it changes only between
/// launches.
pub const RUNTIME_VARS: [RuntimeVar; 3] = [
    RuntimeVar { name: TABLE_SYMBOL, space: "const", ty: "u64", bytes: 8 },
    RuntimeVar { name: ERRORS_SYMBOL, space: "global", ty: "u64", bytes: 8 },
    RuntimeVar { name: MODULE_SYMBOL, space: "global", ty: "u32", bytes: 4 },
];

/// Where a field lies in a record or table entry, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    pub offset: usize,
    pub bytes: usize,
}

impl Field {
    pub const fn end(self) -> usize {
        self.offset + self.bytes
    }
}

/// What a kernel found, as [`record::CODE`] of an error record carries it.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// A global access outside the allocation its pointer came from.
    OutOfBounds = 1,
    /// A global access into an allocation (or device-heap block) no longer live.
    UseAfterFree = 2,
    /// Local memory reached outside the kernel's own frame through a call result or a
    /// loaded pointer: the frame of a function that has returned.
    LocalUseAfterScope = 3,
    SharedOutOfBounds = 4,
    LocalOutOfBounds = 5,
    Misaligned = 6,
    /// `free` in a kernel of a device-heap block already freed.
    DoubleFree = 7,
    /// `free` in a kernel of a pointer that is no device-heap block's start.
    InvalidFree = 8,
}

pub const CODE_OUT_OF_BOUNDS: u32 = ErrorCode::OutOfBounds as u32;
pub const CODE_USE_AFTER_FREE: u32 = ErrorCode::UseAfterFree as u32;
pub const CODE_LOCAL_USE_AFTER_SCOPE: u32 = ErrorCode::LocalUseAfterScope as u32;
pub const CODE_SHARED_OUT_OF_BOUNDS: u32 = ErrorCode::SharedOutOfBounds as u32;
pub const CODE_LOCAL_OUT_OF_BOUNDS: u32 = ErrorCode::LocalOutOfBounds as u32;
pub const CODE_MISALIGNED: u32 = ErrorCode::Misaligned as u32;
pub const CODE_DOUBLE_FREE: u32 = ErrorCode::DoubleFree as u32;
pub const CODE_INVALID_FREE: u32 = ErrorCode::InvalidFree as u32;

impl ErrorCode {
    pub const ALL: [ErrorCode; 8] = [
        ErrorCode::OutOfBounds,
        ErrorCode::UseAfterFree,
        ErrorCode::LocalUseAfterScope,
        ErrorCode::SharedOutOfBounds,
        ErrorCode::LocalOutOfBounds,
        ErrorCode::Misaligned,
        ErrorCode::DoubleFree,
        ErrorCode::InvalidFree,
    ];

    pub const fn code(self) -> u32 {
        self as u32
    }

    /// `None` for a number no kernel writes.
    pub fn from_code(code: u32) -> Option<ErrorCode> {
        ErrorCode::ALL.into_iter().find(|c| c.code() == code)
    }

    pub fn name(self) -> &'static str {
        match self {
            ErrorCode::OutOfBounds => "out_of_bounds",
            ErrorCode::UseAfterFree => "use_after_free",
            ErrorCode::LocalUseAfterScope => "local_use_after_scope",
            ErrorCode::SharedOutOfBounds => "shared_out_of_bounds",
            ErrorCode::LocalOutOfBounds => "local_out_of_bounds",
            ErrorCode::Misaligned => "misaligned",
            ErrorCode::DoubleFree => "double_free",
            ErrorCode::InvalidFree => "invalid_free",
        }
    }
}

/// The module's defined functions in the order of their numbers: entry `i` is the function
/// whose records carry function number `i` ([`record::function_of`]). The order is by name,
/// byte by byte, so the pass and the runtime number a module alike without telling each
/// other: both see its PTX.
pub fn function_order<S: AsRef<str>>(mut defined: Vec<S>) -> Vec<S> {
    defined.sort_by(|a, b| a.as_ref().cmp(b.as_ref()));
    defined
}

/// The number of each of the module's defined functions, in the order given (module order,
/// say): its index in [`function_order`]. A name given twice gets the number of its first
/// place in that order both times.
pub fn function_numbers<S: AsRef<str>>(defined: &[S]) -> Vec<u32> {
    let order = function_order(defined.iter().map(AsRef::as_ref).collect());
    defined.iter().map(|name| order.partition_point(|n| *n < name.as_ref()) as u32).collect()
}

/// Which instrumentation a run applies to kernels (`gpusan run --mode`, [`env::MODE`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Mode {
    /// Host API checks only: kernels run unchanged.
    #[default]
    Api,
    /// Kernels count their executed memory instructions (the `count` pass).
    Count,
    /// Kernels check their memory accesses (the `check` pass).
    Check,
    /// No kernel is touched: canaries past the end of allocations and pool blocks are
    /// scanned by gpusan's own kernels ([`canary`]).
    Canary,
    /// A tenant of `gpusan serve` (issue 18): its driver calls go to the manager, which
    /// fences its kernels into the tenant's memory partition ([`env::SERVER`]); host API
    /// checks as in `api`.
    Fence,
}

impl Mode {
    pub const ALL: [Mode; 5] = [Mode::Api, Mode::Count, Mode::Check, Mode::Canary, Mode::Fence];

    pub fn name(self) -> &'static str {
        match self {
            Mode::Api => "api",
            Mode::Count => "count",
            Mode::Check => "check",
            Mode::Canary => "canary",
            Mode::Fence => "fence",
        }
    }

    pub fn from_name(name: &str) -> Option<Mode> {
        Mode::ALL.into_iter().find(|m| m.name() == name)
    }

    /// Whether the mode instruments kernels (`count`, `check`): `api` and `canary` load
    /// every module as it is.
    pub fn instruments_kernels(self) -> bool {
        matches!(self, Mode::Count | Mode::Check)
    }

    /// Whether the report has a kernel coverage (which kernels ran checked): every mode but
    /// `canary`, which checks allocations, never kernels (its coverage is the allocations'),
    /// and `fence`, whose kernels the manager fences (its log says which).
    pub fn reports_kernel_coverage(self) -> bool {
        !matches!(self, Mode::Canary | Mode::Fence)
    }
}

/// How `--mode check` checks kernels (`gpusan run --route`, [`env::ROUTE`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Route {
    /// PTX instrumented where a module has PTX gpusan can use, machine code patched
    /// through the Compute Sanitizer API ([`binary`]) elsewhere.
    #[default]
    Auto,
    /// PTX only: machine code runs unchecked.
    Ptx,
    /// Every module patched as machine code, none instrumented.
    Binary,
}

impl Route {
    pub const ALL: [Route; 3] = [Route::Auto, Route::Ptx, Route::Binary];

    pub fn name(self) -> &'static str {
        match self {
            Route::Auto => "auto",
            Route::Ptx => "ptx",
            Route::Binary => "binary",
        }
    }

    pub fn from_name(name: &str) -> Option<Route> {
        Route::ALL.into_iter().find(|r| r.name() == name)
    }

    /// Whether PTX is instrumented at all.
    pub fn instruments_ptx(self) -> bool {
        self != Route::Binary
    }

    /// Whether machine code is patched at all.
    pub fn patches_machine_code(self) -> bool {
        self != Route::Ptx
    }
}

/// What a checked access does once it is found bad (`gpusan run --check-reaction`,
/// [`env::CHECK_REACTION`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Reaction {
    /// Write the error record and skip the access; the kernel goes on (and may report more).
    #[default]
    Report,
    /// Write the error record, then `trap`: the kernel stops at its first error, where a
    /// debugger (cuda-gdb) shows it. The record is made visible system-wide first
    /// (`membar.sys`) for a runtime that can still read it.
    Abort,
}

impl Reaction {
    pub const ALL: [Reaction; 2] = [Reaction::Report, Reaction::Abort];

    /// By the name the command line and [`env::CHECK_REACTION`] use: `report`, `abort`.
    pub fn from_name(name: &str) -> Option<Reaction> {
        Reaction::ALL.into_iter().find(|r| r.name() == name)
    }

    pub fn name(self) -> &'static str {
        match self {
            Reaction::Report => "report",
            Reaction::Abort => "abort",
        }
    }
}

/// How accesses to a function's stack frame are bounded (`gpusan run --local-bounds`,
/// [`env::LOCAL_BOUNDS`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum LocalBounds {
    /// Each local array or struct by itself: an index past one that lands in its
    /// neighbour is out of bounds.
    #[default]
    Object,
    /// The frame as a whole (`__local_depotN`): what to go back to should the objects
    /// gpusan reads from the PTX be wrong for a program.
    Frame,
}

impl LocalBounds {
    pub const ALL: [LocalBounds; 2] = [LocalBounds::Object, LocalBounds::Frame];

    /// By the name the command line and [`env::LOCAL_BOUNDS`] use: `object`, `frame`.
    pub fn from_name(name: &str) -> Option<LocalBounds> {
        LocalBounds::ALL.into_iter().find(|r| r.name() == name)
    }

    pub fn name(self) -> &'static str {
        match self {
            LocalBounds::Object => "object",
            LocalBounds::Frame => "frame",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn functions_are_numbered_by_sorted_name() {
        let module_order = ["zeta", "_Z4axpyPfi", "alpha", "Beta"];
        // Byte order: upper case and `_` sort before lower case.
        assert_eq!(function_order(module_order.to_vec()), ["Beta", "_Z4axpyPfi", "alpha", "zeta"]);
        assert_eq!(function_numbers(&module_order), [3, 1, 2, 0]);
        let owned: Vec<String> = module_order.iter().map(|s| s.to_string()).collect();
        assert_eq!(function_numbers(&owned), [3, 1, 2, 0], "owned names number alike");
        assert_eq!(function_numbers::<&str>(&[]), Vec::<u32>::new());
    }

    #[test]
    fn a_number_indexes_the_order() {
        let module_order = ["k2", "k10", "k1", "helper"];
        let order = function_order(module_order.to_vec());
        for (name, number) in module_order.iter().zip(function_numbers(&module_order)) {
            assert_eq!(order[number as usize], *name);
        }
    }

    #[test]
    fn a_name_given_twice_takes_its_first_number() {
        assert_eq!(function_numbers(&["b", "a", "b"]), [1, 0, 1]);
    }

    #[test]
    fn mode_names_round_trip() {
        for m in Mode::ALL {
            assert_eq!(Mode::from_name(m.name()), Some(m));
        }
        assert_eq!(Mode::ALL.map(Mode::name), ["api", "count", "check", "canary", "fence"]);
        assert!(!Mode::Canary.instruments_kernels() && !Mode::Api.instruments_kernels());
        assert_eq!(Mode::from_name("Check"), None);
        assert_eq!(Mode::default(), Mode::Api);
    }

    #[test]
    fn reaction_names_round_trip() {
        for r in Reaction::ALL {
            assert_eq!(Reaction::from_name(r.name()), Some(r));
        }
        assert_eq!(Reaction::ALL.map(Reaction::name), ["report", "abort"]);
        assert_eq!(Reaction::from_name("trap"), None);
        assert_eq!(Reaction::default(), Reaction::Report);
    }

    #[test]
    fn route_names_round_trip() {
        for r in Route::ALL {
            assert_eq!(Route::from_name(r.name()), Some(r));
        }
        assert_eq!(Route::ALL.map(Route::name), ["auto", "ptx", "binary"]);
        assert_eq!(Route::default(), Route::Auto);
        assert!(Route::Auto.instruments_ptx() && Route::Auto.patches_machine_code());
        assert!(!Route::Ptx.patches_machine_code() && !Route::Binary.instruments_ptx());
    }

    #[test]
    fn error_codes_are_distinct_nonzero_and_named() {
        for (i, c) in ErrorCode::ALL.into_iter().enumerate() {
            assert_ne!(c.code(), 0, "0 is an unwritten record");
            assert_eq!(ErrorCode::from_code(c.code()), Some(c));
            assert!(ErrorCode::ALL[..i].iter().all(|d| d.code() != c.code() && d.name() != c.name()), "{c:?}");
        }
        assert_eq!(ErrorCode::from_code(0), None);
        assert_eq!(ErrorCode::from_code(9), None);
        assert_eq!(
            [CODE_OUT_OF_BOUNDS, CODE_USE_AFTER_FREE, CODE_LOCAL_USE_AFTER_SCOPE, CODE_SHARED_OUT_OF_BOUNDS],
            [1, 2, 3, 4]
        );
        assert_eq!([CODE_LOCAL_OUT_OF_BOUNDS, CODE_MISALIGNED, CODE_DOUBLE_FREE, CODE_INVALID_FREE], [5, 6, 7, 8]);
    }

    #[test]
    fn symbols_are_distinct_and_gpusans_own() {
        let all = [TABLE_SYMBOL, ERRORS_SYMBOL, MODULE_SYMBOL, HEAP_SYMBOL, COUNT_SYMBOL]
            .into_iter()
            .chain(COUNTER_SYMBOLS)
            .collect::<Vec<_>>();
        for (i, s) in all.iter().enumerate() {
            assert!(s.starts_with(SYMBOL_PREFIX), "{s}");
            assert!(!all[..i].contains(s), "{s} twice");
        }
        assert_eq!(RUNTIME_VARS.map(|v| v.name), [TABLE_SYMBOL, ERRORS_SYMBOL, MODULE_SYMBOL]);
    }

    #[test]
    fn runtime_vars_hold_what_the_runtime_writes() {
        for v in RUNTIME_VARS {
            let width = match v.ty {
                "u64" => 8,
                "u32" => 4,
                other => panic!("{other}"),
            };
            assert_eq!(v.bytes, width, "{v:?}");
            assert!(matches!(v.space, "const" | "global"), "{v:?}");
        }
        // Two device addresses, then the module number the record's kernel field takes.
        assert_eq!(RUNTIME_VARS.map(|v| v.ty), ["u64", "u64", "u32"]);
    }
}
