//! The bottom layer: the driver's C types as gpusan uses them, and the one way to reach the
//! real driver. Nothing here knows about gpusan's state; everything above builds on it.
//!
//! - [`types`]: handles, result codes and structures, each defined once;
//! - [`resolve`]: where a real driver function is found (glibc's own `dlsym`, then the
//!   loaded `libcuda`), and [`Slot`], the one place an address is resolved once and turned
//!   into a typed function pointer;
//! - [`real`]: every driver function gpusan calls for its own work, declared once with its
//!   exact signature (`real::cuMemAlloc_v2()` is `Option<unsafe extern "C" fn(…)>`);
//! - [`fault`]: where a GPU fault shows (every stand-in's result passes it);
//! - [`peek`]: reads of the program's memory that cannot fault (an image of no stated
//!   length, a buffer the driver may have unmapped);
//! - [`fork`]: whether this process is a child forked once CUDA was initialised (its
//!   stand-ins then only forward);
//! - [`remote`]: `--mode fence`'s tenant side, the forwarding functions `resolve` hands
//!   out in place of the real ones when a manager serves this program;
//! - [`hook`]: the `hooks!` macro that exports gpusan's stand-in for a driver function (the
//!   API families declare theirs with it) and [`Hook`], what the doors know of each.

pub mod boundary;
pub mod fault;
pub mod fork;
pub mod hook;
pub mod peek;
pub mod real;
pub mod remote;
pub mod resolve;
pub mod types;

pub use hook::Hook;
pub use real::{current_context, current_context_handle};
pub use resolve::{typed, Slot};
pub use types::*;
