//! Which kernels the program launched and whether gpusan checked them: each loaded module's
//! verdict (the route that instrumented it, or why not), each function handle's module and
//! name (learnt where the program looks kernels up, or asked of the driver at a handle's
//! first launch), and each handle's launches. At exit it becomes the report's coverage
//! (`gpusan_runtime::coverage`). A launch bumps its handle's counter cell without a lock
//! (`super::cells`); the lock is taken at a thread's first launch of a handle.
//!
//! A launch into a capturing stream runs nothing: it becomes a kernel node of the graph
//! captured, and counts each time an executable graph of it is launched (the kernel nodes
//! of each executable graph are listed once, at its instantiation: `families::graphs`).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ffi::{c_char, CStr};
use std::sync::atomic::Ordering;
use std::sync::Mutex;

use gpusan_runtime::coverage::{Coverage, KernelCoverage};
use gpusan_runtime::locks;
use gpusan_runtime::per_process::PerProcess;
use gpusan_runtime::registry::SiteId;

use super::cells::{new_cell, Cell, Cells};
use crate::driver::{real, CUfunction, CUkernel, CUlibrary, CUmodule, CUstream, Loaded, CUDA_SUCCESS};
use crate::state::{state, FastMap};

/// How a checked module was instrumented.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// Its PTX was instrumented when the program loaded it.
    PtxAtLoad,
    /// It was built instrumented (the `ptxas` stand-in: nvcc, Triton).
    BuildTime,
    /// Through NVRTC.
    Nvrtc,
    /// Through the driver's linker or nvJitLink.
    Linker,
    /// Its machine code was patched through the Compute Sanitizer API (`routes::binary`).
    Binary,
}

impl Route {
    pub fn name(self) -> &'static str {
        match self {
            Route::PtxAtLoad => "PTX at load",
            Route::BuildTime => "build time",
            Route::Nvrtc => "NVRTC",
            Route::Linker => "linker",
            Route::Binary => "binary",
        }
    }
}

/// A module's verdict: the route that checked it, or why it was not.
type Verdict = Result<Route, String>;

#[derive(Default)]
struct Seen {
    /// Each module's verdict: the route that checked it, or why it was not.
    modules: BTreeMap<Loaded, Verdict>,
    /// The binary route's verdict on a module (patched, or why not): it stands where its
    /// load left the module unchecked. Kept apart because the driver reports a module
    /// loaded inside the load call, before `modules` has its entry, or lazily long after.
    binary: BTreeMap<Loaded, Verdict>,
    /// Each function or kernel handle's module (when known) and name.
    functions: FastMap<usize, (Option<Loaded>, String)>,
    /// Each handle's launches of its own (a cell a launch bumps without this lock): 0 until
    /// its first, which other routes learn of through [`Counted::First`].
    launches: FastMap<usize, Cell>,
    /// Each handle's launches as a node of an executable graph.
    graph_launches: FastMap<usize, u64>,
    /// Where each handle was first launched (`faults` takes the stack): a kernel's finding
    /// names it.
    launch_sites: HashMap<usize, SiteId>,
    /// Each executable graph's kernels, with how many of its nodes launch each.
    graphs: HashMap<usize, Vec<(usize, u64)>>,
    /// Kernels of modules unloaded since: name, launches, their module's verdict.
    retired: Vec<(String, u64, Option<Verdict>)>,
    /// The context of each module, and of each library kernel's function in a context:
    /// they go with it (a library does not).
    contexts: BTreeMap<Handle, u64>,
    /// Kernels of patched modules (by name) that the binary route could not give their
    /// params block at some launch, and why: those launches checked nothing.
    binary_unset: BTreeMap<String, String>,
    /// Launches of each handle the run chose not to check (`super::window`), by reason:
    /// part of its count in `launches`.
    skipped: HashMap<usize, BTreeMap<&'static str, u64>>,
}

/// A module or a function, as [`Seen::contexts`] keeps them.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Handle {
    Module(Loaded),
    Function(usize),
}

impl Seen {
    /// Forgets handle `f`, keeping its launches with `verdict`.
    fn retire(&mut self, f: usize, verdict: Option<Verdict>) {
        let name = self.functions.remove(&f).map(|(_, name)| name).unwrap_or_default();
        self.contexts.remove(&Handle::Function(f));
        let skipped = self.skipped.remove(&f).unwrap_or_default();
        self.launch_sites.remove(&f);
        let in_graphs = self.graph_launches.remove(&f);
        let cell = self.launches.remove(&f);
        if cell.is_some() || in_graphs.is_some() {
            // The handle may name another kernel from now on: no thread may count on this cell.
            Cells::forget();
            let own = cell.map_or(0, |c| c.load(Ordering::Relaxed));
            let n = (own + in_graphs.unwrap_or(0)).saturating_sub(skipped.values().sum::<u64>());
            if n > 0 {
                self.retired.push((name.clone(), n, verdict));
            }
            for (why, k) in skipped {
                self.retired.push((name.clone(), k, Some(Err(why.to_string()))));
            }
        }
    }

    /// Handle `f`'s launches, its own and as a graph's node.
    fn launches_of(&self, f: usize) -> u64 {
        self.launches.get(&f).map_or(0, |c| c.load(Ordering::Relaxed))
            + self.graph_launches.get(&f).copied().unwrap_or(0)
    }

    /// `module`'s verdict: its load's, or the binary route's where its load checked nothing.
    fn verdict_of(&self, module: Loaded) -> Option<Verdict> {
        match (self.modules.get(&module), self.binary.get(&module)) {
            (Some(Ok(route)), _) => Some(Ok(*route)),
            (_, Some(patched)) => Some(patched.clone()),
            (load, None) => load.cloned(),
        }
    }

    /// Forgets `module` and the handles of its kernels, keeping their launches.
    fn unload(&mut self, module: Loaded) {
        let verdict = self.verdict_of(module);
        self.modules.remove(&module);
        self.binary.remove(&module);
        self.contexts.remove(&Handle::Module(module));
        let handles: Vec<usize> =
            self.functions.iter().filter(|(_, (m, _))| *m == Some(module)).map(|(f, _)| *f).collect();
        for f in handles {
            self.retire(f, verdict.clone());
        }
    }
}

static SEEN: PerProcess<Mutex<Option<Seen>>> = PerProcess::new(|| Mutex::new(None));

fn with<R>(f: impl FnOnce(&mut Seen) -> R) -> R {
    f(locks::lock(SEEN.get()).get_or_insert_with(Seen::default))
}

/// A module the program loaded (successfully), and gpusan's verdict on it.
pub fn module_loaded(module: Loaded, verdict: Verdict) {
    let context = matches!(module, Loaded::Module(_)).then(|| crate::driver::current_context().0);
    with(|s| {
        s.modules.insert(module, verdict);
        if let Some(c) = context {
            s.contexts.insert(Handle::Module(module), c);
        }
    });
}

/// The binary route patched `module` (`Ok`), or failed to (`Err`, why).
pub fn patched(module: Loaded, verdict: Result<(), String>) {
    with(|s| s.binary.insert(module, verdict.map(|()| Route::Binary)));
}

/// A kernel of a patched module (named as the driver names it) ran some launch without its
/// params block, for the reason `why`: reported unchecked, never as checked by the binary
/// route.
pub fn binary_unset(name: &str, why: &str) {
    with(|s| {
        s.binary_unset.entry(name.to_string()).or_insert_with(|| why.to_string());
    });
}

/// Why the loads of the modules the binary route then patched left them unchecked, one
/// reason per module: they are no longer unchecked.
pub fn patched_load_reasons() -> Vec<String> {
    with(|s| {
        s.binary
            .iter()
            .filter(|(_, v)| v.is_ok())
            .filter_map(|(m, _)| match s.modules.get(m) {
                Some(Err(why)) => Some(why.clone()),
                _ => None,
            })
            .collect()
    })
}

/// `module` was unloaded: what its kernels were and how often they ran is kept, and its
/// handles and theirs forgotten, since the driver hands them out again for other modules
/// and kernels (whose launches and verdict are not these).
pub fn unloaded(module: Loaded) {
    with(|s| s.unload(module));
}

/// `context` was destroyed, and its modules and its functions of library kernels with it:
/// their handles go back to the driver as at an unload.
pub fn context_gone(context: u64) {
    with(|s| {
        let gone: Vec<Handle> = s.contexts.iter().filter(|(_, c)| **c == context).map(|(h, _)| *h).collect();
        for h in gone {
            match h {
                Handle::Module(m) => s.unload(m),
                Handle::Function(f) => {
                    let module = s.functions.get(&f).and_then(|(m, _)| *m);
                    let verdict = module.and_then(|m| s.verdict_of(m));
                    s.retire(f, verdict);
                }
            }
        }
    });
}

/// The program looked up kernel `name` of `module` and got `handle`.
pub fn function(handle: usize, module: Loaded, name: &str) {
    with(|s| s.functions.insert(handle, (Some(module), name.to_string())));
}

/// `function` is `kernel` in a context (`cuKernelGetFunction`).
pub fn same_as(function: usize, kernel: usize) {
    // Asked again for a function it has (cudart may ask at each launch): nothing new.
    if with(|s| s.functions.contains_key(&function) || !s.functions.contains_key(&kernel)) {
        return;
    }
    let context = crate::driver::current_context().0;
    with(|s| {
        if let Some(k) = s.functions.get(&kernel).cloned() {
            s.functions.insert(function, k);
            s.contexts.insert(Handle::Function(function), context);
        }
    });
}

/// A launch of `f` (a `CUfunction`, or a `CUkernel` cudart passes as one) into `stream`.
pub fn launched(f: CUfunction, captured: bool) -> Counted {
    // Captured, it runs when the graph does ([`graph_launched`]). A run with no kernel
    // coverage (canary) counts nothing: the launch costs the program less.
    if captured || !state().options.mode.reports_kernel_coverage() {
        return Counted::Not;
    }
    let mut first = false;
    let cell = Cells::get(f as usize, || {
        with(|s| {
            *s.launches.entry(f as usize).or_insert_with(|| {
                first = !s.functions.contains_key(&(f as usize));
                new_cell()
            })
        })
    });
    let before = cell.fetch_add(1, Ordering::Relaxed);
    if first {
        name_unknown(&[f as usize]);
    }
    if before == 0 {
        Counted::First
    } else {
        Counted::Again
    }
}

/// What [`launched`] knows of a launch's handle, so that other routes need not look it up
/// again.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Counted {
    /// Not counted (launched into a capturing stream, or a run with no kernel coverage):
    /// nothing known.
    Not,
    /// The first launch counted under this handle since it was made known (or since its
    /// handle was forgotten and made again).
    First,
    /// The handle was launched before.
    Again,
}

/// Of the launches of `f` counted by [`launched`], the last one ran unchecked because the
/// run chose not to check it (`super::window`): `why`.
pub fn skipped(f: CUfunction, why: &'static str) {
    with(|s| *s.skipped.entry(f as usize).or_default().entry(why).or_default() += 1);
}

/// The module and name of handle `f`, as far as they are known (the name as the driver
/// gives it: mangled).
pub fn function_of(f: usize) -> Option<(Option<Loaded>, String)> {
    with(|s| s.functions.get(&f).cloned())
}

/// Whether the binary route patched `module` (its launches outside a window get no params
/// block, `super::window`).
pub fn is_patched(module: Loaded) -> bool {
    with(|s| matches!(s.verdict_of(module), Some(Ok(Route::Binary))))
}

/// Handles never looked up through a door gpusan watches: the driver says what they are.
pub fn name_unknown(handles: &[usize]) {
    let unknown: Vec<usize> = with(|s| handles.iter().copied().filter(|f| !s.functions.contains_key(f)).collect());
    for f in unknown {
        let found = ask_driver(f as CUfunction);
        // A library's function is its kernel in the current context, and goes with it.
        let context = matches!(found.0, Some(Loaded::Library(_))).then(|| crate::driver::current_context().0);
        with(|s| {
            s.functions.entry(f).or_insert(found);
            if let Some(c) = context {
                s.contexts.insert(Handle::Function(f), c);
            }
        });
    }
}

/// Executable graph `exec`, instantiated (or updated), launches these kernels: one entry
/// per kernel node, child graphs' included.
pub fn graph_kernels(exec: usize, kernels: Vec<usize>) {
    let mut nodes: Vec<(usize, u64)> = Vec::new();
    for f in kernels {
        match nodes.iter_mut().find(|(g, _)| *g == f) {
            Some((_, n)) => *n += 1,
            None => nodes.push((f, 1)),
        }
    }
    name_unknown(&nodes.iter().map(|(f, _)| *f).collect::<Vec<_>>());
    with(|s| s.graphs.insert(exec, nodes));
}

/// `exec` was destroyed; the driver may hand its handle out again.
pub fn graph_gone(exec: usize) {
    with(|s| s.graphs.remove(&exec));
}

/// A launch of executable graph `exec` into `stream` went through: each of its kernel
/// nodes is a launch. Launched into a capturing stream, it is a node of that capture
/// instead, and counts when the graph captured runs.
pub fn graph_launched(exec: usize, stream: CUstream) {
    if crate::capture::any() && crate::capture::stream_is_capturing(stream) {
        return;
    }
    with(|s| {
        let Some(nodes) = s.graphs.get(&exec) else { return };
        for &(f, n) in nodes {
            *s.graph_launches.entry(f).or_default() += n;
        }
    });
}

/// The module and name of a handle the program did not look up through gpusan's stand-ins.
fn ask_driver(f: CUfunction) -> (Option<Loaded>, String) {
    let mut name: *const c_char = std::ptr::null();
    // SAFETY: the driver's functions with out-parameters of ours; the name it returns is
    // its own, valid while the module is loaded (copied at once).
    unsafe {
        let as_function = real::cuFuncGetName().is_some_and(|g| g(&mut name, f) == CUDA_SUCCESS && !name.is_null());
        if as_function {
            let text = CStr::from_ptr(name).to_string_lossy().into_owned();
            let mut m: CUmodule = std::ptr::null_mut();
            let module = real::cuFuncGetModule()
                .is_some_and(|g| g(&mut m, f) == CUDA_SUCCESS && !m.is_null())
                .then_some(Loaded::Module(m as usize));
            let known = module.is_some_and(|m| with(|s| s.modules.contains_key(&m)));
            return (if known { module } else { library_of(f, &text).or(module) }, text);
        }
        let k = f as CUkernel;
        if real::cuKernelGetName().is_some_and(|g| g(&mut name, k) == CUDA_SUCCESS && !name.is_null()) {
            let text = CStr::from_ptr(name).to_string_lossy().into_owned();
            let mut l: CUlibrary = std::ptr::null_mut();
            let library = real::cuKernelGetLibrary()
                .is_some_and(|g| g(&mut l, k) == CUDA_SUCCESS && !l.is_null())
                .then_some(Loaded::Library(l as usize));
            return (library, text);
        }
    }
    (None, format!("<kernel {:#x}>", f as usize))
}

/// Handle `f` was first launched from `site`.
pub fn first_launched_at(f: usize, site: SiteId) {
    with(|s| {
        s.launch_sites.entry(f).or_insert(site);
    });
}

/// Where kernel `name` of `module` was first launched, through any of its handles.
pub fn launch_site(module: Loaded, name: &str) -> SiteId {
    with(|s| {
        s.functions
            .iter()
            .filter(|(_, (m, n))| *m == Some(module) && n == name)
            .filter_map(|(f, _)| s.launch_sites.get(f).copied())
            .min()
            .unwrap_or(SiteId::UNKNOWN)
    })
}

/// The names of the kernels of `module` launched so far, most launched first.
pub fn launched_of(module: Loaded) -> Vec<String> {
    with(|s| {
        let mut found: Vec<(u64, &String)> = Vec::new();
        for (f, (m, name)) in &s.functions {
            let n = s.launches_of(*f);
            if *m != Some(module) || n == 0 {
                continue;
            }
            match found.iter_mut().find(|(_, seen)| *seen == name) {
                Some((total, _)) => *total += n,
                None => found.push((n, name)),
            }
        }
        found.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(b.1)));
        found.into_iter().map(|(_, name)| name.clone()).collect()
    })
}

/// The library whose kernel `f` (named `name`) is in the current context: the module the
/// driver names for a library's function is its own, which no load gpusan saw returned.
/// Such a function reaches a launch without `cuKernelGetFunction` passing gpusan (cudart
/// asks the driver by its private table; a graph's kernel node holds the function), so the
/// driver says which of the library kernels of that name it is.
fn library_of(f: CUfunction, name: &str) -> Option<Loaded> {
    let get = real::cuKernelGetFunction()?;
    let candidates: Vec<(usize, Loaded)> = with(|s| {
        s.functions
            .iter()
            .filter_map(|(k, (m, n))| match m {
                Some(l @ Loaded::Library(_)) if n == name => Some((*k, *l)),
                _ => None,
            })
            .collect()
    });
    candidates.into_iter().find_map(|(k, library)| {
        let mut g: CUfunction = std::ptr::null_mut();
        // SAFETY: the driver's function with an out-parameter of ours.
        let same = unsafe { get(&mut g, k as CUkernel) } == CUDA_SUCCESS && g == f;
        same.then_some(library)
    })
}

/// The demangled name of kernel handle `f`, as far as it is known.
pub fn name_of(f: usize) -> String {
    let name = with(|s| s.functions.get(&f).map(|(_, n)| n.clone()));
    name.map_or_else(|| format!("<kernel {f:#x}>"), |n| gpusan_runtime::coverage::demangle(&n))
}

/// A module's verdict as the report words it.
fn verdict(module: Option<&Verdict>) -> Result<&'static str, &str> {
    match module {
        Some(Ok(route)) => Ok(route.name()),
        Some(Err(why)) => Err(why.as_str()),
        None => Err("its module was loaded where gpusan did not see it"),
    }
}

/// The coverage of the launches so far.
pub fn coverage() -> Coverage {
    with(|s| {
        let mut c = Coverage::default();
        // A patched kernel that ran some launch without its params block is unchecked.
        let of = |name: &str, v: Option<&Verdict>| match (v, s.binary_unset.get(name)) {
            (Some(Ok(Route::Binary)), Some(why)) => Err(why.clone()),
            (v, _) => verdict(v).map_err(str::to_string),
        };
        let handles: BTreeSet<usize> = s.launches.keys().chain(s.graph_launches.keys()).copied().collect();
        for f in &handles {
            let n = s.launches_of(*f);
            let (module, name) = s.functions.get(f).cloned().unwrap_or((None, format!("<kernel {f:#x}>")));
            let skipped = s.skipped.get(f);
            for (why, &k) in skipped.into_iter().flatten() {
                c.add(KernelCoverage::new(&name, k, Err(why)));
            }
            let n = n.saturating_sub(skipped.map_or(0, |k| k.values().sum::<u64>()));
            if n > 0 {
                let v = of(&name, module.and_then(|m| s.verdict_of(m)).as_ref());
                c.add(KernelCoverage::new(&name, n, v.as_deref().map_err(String::as_str)));
            }
        }
        for (name, n, v) in &s.retired {
            let v = of(name, v.as_ref());
            c.add(KernelCoverage::new(name, *n, v.as_deref().map_err(String::as_str)));
        }
        c.kernels.sort_by(|a, b| b.launches.cmp(&a.launches).then(a.name.cmp(&b.name)));
        c
    })
}
