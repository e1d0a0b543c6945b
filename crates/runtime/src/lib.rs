//! The library `gpusan run` injects into a CUDA program. It sees every allocation, copy,
//! module and launch, checks host API calls against what it knows, keeps a copy of that
//! knowledge on the GPU for instrumented kernels, and turns what went wrong into reports.
//!
//! The pieces, and the one direction data flows between them:
//! - [`registry`]: every live and freed (quarantined) allocation, thread-safe; the blocks
//!   pool allocators hand out inside them ([`pool_blocks`]).
//! - [`checks`]: host API calls (copies, sets, frees) judged against the registry.
//! - [`tensormap`]: tensor maps (TMA descriptors) judged where they are made.
//! - [`kernel_filter`]: which launches a run checks (compute-sanitizer's kernel filters and
//!   launch window).
//! - [`report`]: one error format for every mode, as text and JSON.
//! - [`symbols`]: host addresses as reports name them (module+offset, function, file:line).
//! - [`per_process`]: state a child made by `fork` gets afresh, never its parent's locks.
//! - [`locks`]: how that state's locks are taken, poisoned or not.
//! - [`canary`]: canary mode's host side (the guard's entry arrays, which scan records count).
//! - [`device_abi`]: how the error records instrumented kernels write become reports (the
//!   layouts they share with the runtime are `gpusan_abi`'s).

pub mod built;
pub mod cache;
pub mod canary;
pub mod checks;
pub mod coverage;
pub mod device_abi;
pub mod fault;
#[doc(hidden)]
pub mod fuzz;
pub mod kernel_filter;
pub mod locks;
pub mod partition;
pub mod per_process;
pub mod pool_blocks;
pub mod pyframes;
pub mod registry;
pub mod report;
pub mod symbols;
pub mod tensormap;
