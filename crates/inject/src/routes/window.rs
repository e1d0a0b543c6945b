//! Runs that check only some launches: compute-sanitizer's kernel filters and launch window
//! (`gpusan run --kernel-name`, `--kernel-name-exclude`, `--launch-skip`, `--launch-count`,
//! judged by `gpusan_runtime::kernel_filter`). A launch the run does not check runs the
//! program's own code:
//! - a kernel of a module whose PTX gpusan instrumented runs its unchecked copy
//!   (`gpusan_passes::unchecked`, appended to every module instrumented in such a run): the
//!   launch is made with the copy's handle, found in the same module by name, so it shares
//!   the module's variables and calls only unchecked device functions;
//! - a kernel the binary route patched runs with a null params block (its patches then
//!   check nothing), through [`unchecked_now`], which the launch callback reads on the
//!   launching thread.
//!
//! Either way the coverage lists the launch unchecked with the reason. A kernel with
//! neither (built instrumented at build time, whose module has no copies) runs checked,
//! and is listed so. Launches into a capturing stream become graph nodes and run with the
//! graph: they are neither counted in the window nor changed (the graph's launches run as
//! captured).

use std::cell::Cell;
use std::collections::HashMap;
use std::ffi::CString;
use std::sync::Mutex;

use gpusan_runtime::locks;
use gpusan_runtime::per_process::PerProcess;

use super::coverage;
use crate::driver::{real, CUfunction, CUkernel, CUlibrary, CUmodule, Loaded, CUDA_SUCCESS};
use crate::state::state;

thread_local! {
    /// The launch this thread is making runs unchecked (the binary route's callback, inside
    /// the launch, gives it no params block).
    static UNCHECKED: Cell<bool> = const { Cell::new(false) };
}

/// Launched handle → its module and its unchecked copy (0: it has none).
type Copies = HashMap<usize, (Loaded, usize)>;

static COPIES: PerProcess<Mutex<Option<Copies>>> = PerProcess::new(|| Mutex::new(None));

/// Whether the launch this thread is making runs unchecked.
pub fn unchecked_now() -> bool {
    UNCHECKED.with(Cell::get)
}

/// A launch of `f` (`captured`: into a stream being captured) is about to be made (after
/// the coverage counted it): the handle to launch instead, when the run does not check it.
/// [`launched`] must follow.
pub fn launching(f: CUfunction, captured: bool) -> CUfunction {
    let Some(selection) = state().options.selection.as_ref() else { return f };
    if captured {
        return f;
    }
    let Some((module, name)) = coverage::function_of(f as usize) else { return f };
    let Err(why) = selection.judge(&name) else { return f };
    let copy = module.map_or(0, |m| copy_of(f as usize, m, &name));
    if copy != 0 {
        coverage::skipped(f, why.reason());
        return copy as CUfunction;
    }
    if module.is_some_and(coverage::is_patched) {
        UNCHECKED.with(|u| u.set(true));
        coverage::skipped(f, why.reason());
    }
    f
}

/// The launch [`launching`] prepared was made.
pub fn launched() {
    // Only a run with a selection ever sets it.
    if state().options.selection.is_some() {
        UNCHECKED.with(|u| u.set(false));
    }
}

/// The unchecked copy of kernel `name` (handle `f` of `module`), or 0.
fn copy_of(f: usize, module: Loaded, name: &str) -> usize {
    let known = locks::lock(COPIES.get()).as_ref().and_then(|c| c.get(&f).copied());
    if let Some((_, copy)) = known.filter(|(m, _)| *m == module) {
        return copy;
    }
    let copy = find_copy(module, name);
    locks::lock(COPIES.get()).get_or_insert_with(HashMap::new).insert(f, (module, copy));
    copy
}

fn find_copy(module: Loaded, name: &str) -> usize {
    let Ok(copy) = CString::new(gpusan_passes::unchecked::unchecked_name(name)) else { return 0 };
    let mut handle: usize = 0;
    // SAFETY: the driver's functions with an out-parameter of ours and a NUL-terminated name.
    let found = unsafe {
        match module {
            Loaded::Module(m) => real::cuModuleGetFunction().is_some_and(|g| {
                g(&mut handle as *mut usize as *mut CUfunction, m as CUmodule, copy.as_ptr()) == CUDA_SUCCESS
            }),
            Loaded::Library(l) => real::cuLibraryGetKernel().is_some_and(|g| {
                g(&mut handle as *mut usize as *mut CUkernel, l as CUlibrary, copy.as_ptr()) == CUDA_SUCCESS
            }),
        }
    };
    if found {
        handle
    } else {
        0
    }
}

/// `module` was unloaded: its handles (and copies) go back to the driver.
pub fn unloaded(module: Loaded) {
    if let Some(c) = locks::lock(COPIES.get()).as_mut() {
        c.retain(|_, (m, _)| *m != module);
    }
}

/// A context went away, and with it function handles of library kernels.
pub fn context_gone() {
    if let Some(c) = locks::lock(COPIES.get()).as_mut() {
        c.clear();
    }
}
