//! The routes: how a kernel the program loads gets checked, and what each route needs at
//! the moments the API families report (a module loaded, a launch, a synchronization, a
//! context going away). The families call the functions here; the routes never call the
//! families.
//!
//! Today's routes:
//! - [`substitute`] (with [`passes`] and [`cache`]): in `count` and `check` runs a module's
//!   PTX is instrumented and loaded in place of the original;
//! - [`mirror`] (with [`table_memory`]): the device ABI, for modules that declare it (the
//!   instrumented `check` builds): the allocation table a kernel reads and the error records
//!   it writes;
//! - [`binary`]: in `check` runs, machine code gpusan cannot instrument is patched through
//!   the Compute Sanitizer API (the driver's module-loaded and launch callbacks reach it
//!   through `doors::sanitizer`), checked against [`mirror`]'s table and buffers, with
//!   [`redzones`] padding device allocations so its tail rule can catch an overflow that
//!   would reach a neighbour;
//! - [`pool_frees`]: when kernels see a pool block's free (the blocks themselves are in the
//!   registry, and so in [`mirror`]'s table);
//! - the Compute Sanitizer callbacks (`doors::sanitizer`) judge what cudart refuses itself;
//! - [`window`]: in runs that check only some launches, the others run unchecked;
//! - [`canary`] (with [`canary_device`]): in `canary` runs no kernel is touched; canaries
//!   past allocations' ends are scanned by gpusan's own kernels.
//!
//! A new route is a module here, called from [`load_module`] and the event functions
//! below (or from a door's callbacks, as [`binary`] is); a new door for code
//! (NVRTC, `cuLink*`/nvJitLink) is a family that hands what it produced to [`load_module`]
//! or to [`substitute`] directly.

pub mod binary;
pub mod binary_kinds;
pub mod built;
pub mod canary;
pub mod canary_device;
pub mod canary_diag;
pub mod canary_heap;
pub mod cells;
pub mod coverage;
pub mod faults;
pub mod kept;
pub mod mirror;
pub mod passes;
pub mod pool_frees;
pub mod redzones;
pub mod substitute;
pub mod table_memory;
pub mod trace;
pub mod window;

use std::ffi::c_void;

use crate::driver::{CUfunction, CUresult, CUstream, Loaded, CUDA_SUCCESS};
use crate::state::{quietly, state};

/// Whether this run instruments kernels: `count` and `check` name a pass, unless `check`
/// takes the binary route only.
fn substituting() -> bool {
    let o = &state().options;
    o.mode.instruments_kernels() && (o.mode != gpusan_abi::Mode::Check || o.route.instruments_ptx())
}

/// Loads `image` through `load`, instrumented when the mode asks for it and possible,
/// else as it is. `handle` names what a successful load produced; the module is then
/// offered to the device ABI (it takes part if it declares the ABI variables).
pub unsafe fn load_module(
    image: *const c_void,
    mut load: impl FnMut(*const c_void) -> CUresult,
    handle: impl Fn() -> Loaded,
) -> CUresult {
    // What reports need to know of the module loaded, when gpusan instrumented it.
    let mut meta = None;
    // `None` in `api` mode, in a child that only forwards, and when the pass failed (a
    // gpusan bug, caught: checking stops there and the report says so); the program's own
    // module is loaded then.
    let instrumented =
        quietly(|| substituting().then(|| substitute::substitute(image, state().options.mode))).flatten();
    let (r, verdict) = match instrumented {
        None => {
            let why = if substituting() {
                "gpusan stopped checking (internal error)"
            } else if state().options.mode == gpusan_abi::Mode::Check {
                "--route binary: PTX is not instrumented, and the machine code was not patched"
            } else if state().options.mode == gpusan_abi::Mode::Canary {
                "canary mode: kernels run unchanged (their memory's canaries are scanned)"
            } else {
                "api mode: kernels are not instrumented (use --mode check)"
            };
            (load_heap_rewritten(image, &mut load, &handle), Err(why.to_string()))
        }
        Some(substitute::Image::Substitute { bytes, meta: instrumented, route }) => {
            let r = load(bytes.as_ptr() as *const c_void);
            if r == CUDA_SUCCESS {
                quietly(|| {
                    substitute::with(|m| {
                        m.substituted += 1;
                        m.instrumented.push(handle());
                    })
                });
                meta = Some(instrumented);
                (r, Ok(route))
            } else {
                let why = format!("instrumented module refused by the driver (error {r})");
                quietly(|| {
                    substitute::with(|m| *m.unchecked.entry(why.clone()).or_default() += 1);
                    substitute::refused(image, state().options.mode);
                });
                (load(image), Err(why))
            }
        }
        Some(substitute::Image::Built(known, route)) => {
            meta = Some(known);
            (load(image), Ok(route))
        }
        Some(substitute::Image::Original(why)) => {
            quietly(|| substitute::with(|m| *m.unchecked.entry(why.clone()).or_default() += 1));
            (load(image), Err(why))
        }
    };
    if r == CUDA_SUCCESS {
        quietly(|| crate::variables::on_module_loaded(handle(), image));
        let abi = quietly(|| mirror::on_module_loaded(handle(), || meta.or_else(|| substitute::meta_of_image(image))));
        // A module that declares the device ABI checks itself, whatever gpusan made of its
        // image: machine code built instrumented where gpusan kept no record of it (a
        // program's cache of cubins that outlived gpusan's), or loaded in `api` mode.
        let verdict = match verdict {
            Err(_) if abi == Some(true) => Ok(coverage::Route::BuildTime),
            v => v,
        };
        quietly(|| coverage::module_loaded(handle(), verdict));
    }
    r
}

/// Canary mode: `image` loaded with its device heap's calls rewritten
/// (`canary_heap::substitute`) where its kernels call the heap, else as it is.
unsafe fn load_heap_rewritten(
    image: *const c_void,
    load: &mut impl FnMut(*const c_void) -> CUresult,
    handle: &impl Fn() -> Loaded,
) -> CUresult {
    let canary = state().options.mode == gpusan_abi::Mode::Canary;
    let Some(rewritten) = quietly(|| canary.then(|| canary_heap::substitute(image)).flatten()).flatten() else {
        return load(image);
    };
    let r = load(rewritten.as_ptr() as *const c_void);
    if r == CUDA_SUCCESS {
        quietly(|| canary::heap_module_loaded(handle()));
        return r;
    }
    quietly(|| canary_heap::refused(r));
    load(image)
}

/// After a synchronization what kernels wrote is final for now: drain their error
/// records, and read the counters of instrumented modules.
pub fn after_sync(r: CUresult) -> CUresult {
    if r == CUDA_SUCCESS {
        read_what_kernels_left(mirror::drain);
    }
    r
}

/// When a context or stream synchronization began, taken before it is called: canary mode
/// writes a pool block's canary once a synchronization begun after the block was handed
/// out has succeeded (`canary::synchronized`).
#[derive(Clone, Copy)]
pub struct SyncStart {
    canary_clock: Option<u64>,
}

/// [`SyncStart`] now.
pub fn before_sync() -> SyncStart {
    SyncStart { canary_clock: canary::active().then(canary::sync_clock) }
}

/// [`after_sync`] of the whole current context: no kernel launched before it can fault now.
pub fn after_context_sync(r: CUresult, began: SyncStart) -> CUresult {
    if r == CUDA_SUCCESS {
        quietly(faults::synced_context);
        quietly(pool_frees::after_context_sync);
        if let Some(clock) = began.canary_clock {
            quietly(|| canary::synchronized(None, clock));
        }
    }
    after_sync(r)
}

/// [`after_sync`] of `stream`: no kernel launched into it before can fault now (those of
/// other streams may still run; a copy or an event says nothing of which).
pub fn after_stream_sync(r: CUresult, stream: CUstream, began: SyncStart) -> CUresult {
    if r == CUDA_SUCCESS {
        quietly(|| faults::synced_stream(stream as usize));
        if let Some(clock) = began.canary_clock {
            quietly(|| canary::synchronized(Some(stream as u64), clock));
        }
    }
    after_sync(r)
}

/// `stream`: the launch's stream. A launch into a stream being captured does not run now:
/// it becomes a graph node, and the launch of the graph brings the table up to date
/// before the graph runs. A launch into another stream while one captures uploads through
/// `capture`'s capture-safe copies.
pub fn before_launch_on(stream: CUstream) {
    // The capture query is a driver call: only made while some stream captures.
    let captured = quietly(|| mirror::active() && crate::capture::any() && crate::capture::stream_is_capturing(stream));
    if captured.unwrap_or(false) {
        register_late_exit();
    } else {
        before_launch();
    }
}

fn before_launch() {
    quietly(upkeep);
    register_late_exit();
}

/// The device side brought up to date before a launch that runs now.
fn upkeep() {
    if mirror::active() {
        pool_frees::before_upload();
    }
    mirror::before_launch(binary::started())
}

/// A kernel launch of `f`, this shape, into `stream`, is about to be made: the upkeep of
/// [`before_launch_on`], the launch counted (`coverage`) and logged (`faults`), and the
/// handle to launch returned (`window`: an unchecked copy where the run does not check
/// this launch). [`launch_made`] must follow. All of it under one containment, and the
/// capture asked once: a program launches thousands of times a second, and each entry into
/// gpusan's bookkeeping costs it (`bench/launch-host-cost.sh`).
pub fn launching(f: CUfunction, grid: [u32; 3], block: [u32; 3], stream: CUstream) -> CUfunction {
    let since = canary_diag::start();
    let run = quietly(|| {
        // The capture query is a driver call: only made while some stream captures.
        let captured = crate::capture::any() && crate::capture::stream_is_capturing(stream);
        if !(captured && mirror::active()) {
            upkeep();
        }
        let counted = coverage::launched(f, captured);
        faults::launched(f as usize, grid, block, stream as usize, counted);
        trace::launched(f as usize, grid, block);
        window::launching(f, captured)
    });
    register_late_exit();
    canary_diag::end(canary_diag::Section::Launch, since);
    run.unwrap_or(f)
}

/// The launch [`launching`] prepared was made.
pub fn launch_made() {
    window::launched();
    trace::after_launch();
}

fn register_late_exit() {
    // Registered at the first launch, after cudart registered its own exit handler at its
    // start, so this runs first (exit handlers run in reverse): kernels' last records and
    // counters are read while the context still exists.
    static LATE_EXIT: std::sync::Once = std::sync::Once::new();
    LATE_EXIT.call_once(|| unsafe {
        libc::atexit(read_before_cuda_exits);
    });
}

extern "C" fn read_before_cuda_exits() {
    crate::driver::boundary::enter("exit", || {
        crate::driver::boundary::test_panic("late_exit");
        faults::at_exit();
        // The program may have torn a context down behind gpusan's back by now.
        read_what_kernels_left(mirror::drain_at_exit);
        quietly(binary::read_counts);
    });
}

/// Before a context goes away, what its kernels recorded must be read: cudart tears the
/// primary context down at exit before gpusan's own exit handler runs, and its device-wide
/// synchronization does not always pass through a driver entry point gpusan sees.
pub fn before_teardown() {
    read_what_kernels_left(mirror::drain);
    quietly(binary::read_counts);
}

fn read_what_kernels_left(drain: fn()) {
    quietly(|| {
        drain();
        if substituting() {
            substitute::read_counters();
        }
    });
}

/// After the driver destroyed `context` (and with it every buffer and module of it):
/// nothing of it may be read or reused any more.
pub fn context_gone(context: u64) {
    quietly(|| {
        mirror::context_gone(context);
        crate::capture::context_gone(context);
        faults::context_gone(context);
        coverage::context_gone(context);
        window::context_gone();
        pool_frees::context_gone(context);
        canary::context_gone(context);
    });
}
