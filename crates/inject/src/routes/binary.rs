//! The binary route: kernels that exist only as machine code (PyTorch's, cuBLAS's, cached
//! cubins) checked through the Compute Sanitizer patching API, against the same allocation
//! table and into the same error buffer as instrumented PTX ([`super::mirror`]).
//!
//! How: the driver reports every module it loads (`MODULE_LOADED`, with its cubin) to
//! `doors::sanitizer`, which hands it here. A module to check gets gpusan's patch module
//! (`crates/inject/patches/gpusan_patches.cu`, built by `build.rs` with the pinned nvcc
//! `--compile-as-tools-patch`, embedded) added once per context, its global memory
//! accesses patched to call `gpusan_global_access` (`gpusan_abi::binary`), and is
//! instrumented once by the driver (`sanitizerPatchModule`). At a launch of one of its kernels
//! (`LAUNCH_BEGIN`), the kernel's params block (table, error buffer, kernel number, its first
//! instruction's address) is handed over with `sanitizerSetCallbackData`: made at the
//! kernel's first launch in a context, a lookup and that call at every later one.
//!
//! Graphs: a kernel node's launch reaches no `LAUNCH_BEGIN`, and no document says that its
//! function's callback data reaches it (on the H100, SASS-only programs whose kernels ran
//! only in graphs faulted on whatever the API passed them). The graph node callback
//! (`SANITIZER_CBID_GRAPHS_NODE_LAUNCH_BEGIN`, at each launch of the graph and at its
//! upload) gives each kernel node of a patched module the same block with
//! `sanitizerSetLaunchCallbackData`. Made at a node, the block also becomes the function's
//! callback data; made at an upload, it is complete (`sanitizerStreamSynchronize`) before
//! the graph runs on any stream. The context's table and error buffer are set up by the
//! `cuGraphLaunch` and `cuGraphUpload` stand-ins, as by every launch's.
//!
//! A patched kernel never runs with a userdata gpusan did not set: every launch the API
//! reports gets its block, or null where the block cannot be made (then the patches check
//! nothing, and the coverage lists the kernel unchecked with the reason; a later launch
//! tries again). Launches from the device reach no callback: a module whose machine code
//! launches kernels (dynamic parallelism: it names `cudaLaunchDeviceV2` or
//! `__cudaCDP2LaunchDeviceV2`) is not patched, and says so. Not handled: graphs launched from
//! the device (`cudaGraphInstantiateFlagDeviceLaunch`), whose kernels get the data of
//! `sanitizerSetDeviceGraphData` by means the public headers do not declare; none of the
//! programs this route is for (PyTorch, cuBLAS, JAX, the case suite) launches graphs from
//! the device. Setting every function's data when its module loads would need the driver
//! (`cuModuleEnumerateFunctions`), which no callback may call, and would force lazily
//! loaded functions to load.
//!
//! Which modules: under `--route auto` (the default), every module whose loaded machine
//! code does not declare the device ABI (PTX gpusan instrumented, or built instrumented,
//! declares it; machine code only, or PTX gpusan could not instrument, does not); under
//! `--route binary` every module (no PTX is instrumented then); under `--route ptx` none.
//! Only in `--mode check`. A module the API refuses to patch stays unchecked, and the
//! coverage report says why.
//!
//! What it checks: every global access, and every generic access outside the thread's local
//! and the block's (or cluster's) shared window (those are no global memory, neither judged
//! nor counted; `bench/reliability/binary_route.sh`'s clean run makes such accesses through
//! a generic pointer in every thread and must stay silent), judged by its address alone:
//! - inside a live allocation: fine; inside a freed one held in quarantine: use after free
//!   (the quarantine keeps a freed range from being handed out again, so a stale pointer
//!   is caught after later allocations reuse other memory);
//! - in the tail after an allocation, over its red zone and up to the 256-byte alignment the
//!   driver starts every allocation at: out of bounds of that allocation (an access may also
//!   start inside and end past the end). The red zone (`super::redzones`, `--redzone`,
//!   default 256 bytes) is memory gpusan asked the driver for after the allocation and
//!   registered no one at, so an overflow that would have reached the live neighbour the
//!   driver placed right after the allocation lands there and is caught;
//! - anywhere else: memory gpusan did not see allocated (module variables, memory from
//!   before gpusan, the driver's own), never judged: counted in the report's
//!   `binary_untracked_accesses`.
//!
//! And, with patches of their own (`super::binary_kinds`): shared-space accesses past the
//! block's shared window; `cp.async`'s shared destination past the window and its global
//! source's first byte as a global read; the global range of bulk copies (global ↔ shared,
//! reductions into global); device-side `malloc`/`free` (double and invalid frees, against a
//! heap table per context), in modules whose machine code names them.
//!
//! What machine code cannot show, and so this route cannot check:
//! - **which allocation a pointer came from**: an overflow that reaches past the red zone
//!   into a live neighbour (or past an allocation too large to pad, see `super::redzones`)
//!   is, by its address, a valid access to the neighbour, and so is one between tensors a
//!   caching allocator carves out of one segment. The PTX route follows each pointer to its
//!   root and catches both.
//! - bounds inside the shared window (its arrays' sizes are not in SASS) and local memory
//!   (the window is the stack, bounded by the hardware already), accesses to device-heap
//!   blocks (the table knows no heap block: counted as untracked), TMA;
//! - source lines: records carry the access's SASS offset in its kernel instead.

use std::collections::{HashMap, HashSet};
use std::ffi::{c_char, c_int, c_void, CString};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, RwLock};

use gpusan_abi::binary::{
    EMPTY_ACCESS_PATCH, GLOBAL_ACCESS_PATCH, TRACE_GLOBAL_PATCH, TRACE_LOCAL_PATCH, TRACE_SHARED_PATCH,
};
use gpusan_abi::Mode;
use gpusan_runtime::locks;
use gpusan_runtime::per_process::PerProcess;

use super::{coverage, mirror};
use crate::driver::Loaded;
use crate::state::{quietly, state};

/// The patch module, as `build.rs` compiled it (16-aligned, as a fatbin is read).
#[repr(C, align(16))]
struct Aligned<T: ?Sized>(T);
static PATCHES: &Aligned<[u8]> = &Aligned(*include_bytes!(concat!(env!("OUT_DIR"), "/gpusan_patches.fatbin")));

/// `SANITIZER_INSTRUCTION_GLOBAL_MEMORY_ACCESS` (`sanitizer_patching.h`): global and generic
/// loads, stores and atomics.
const INSTRUCTION_GLOBAL_MEMORY_ACCESS: u32 = 3;
/// `SANITIZER_INSTRUCTION_SHARED_MEMORY_ACCESS` and `…_LOCAL_MEMORY_ACCESS`.
const INSTRUCTION_SHARED_MEMORY_ACCESS: u32 = 4;
const INSTRUCTION_LOCAL_MEMORY_ACCESS: u32 = 5;

/// The patching API's functions, resolved from `libsanitizer-public.so` by the door.
#[derive(Clone, Copy)]
pub struct Api {
    pub add_patches: unsafe extern "C" fn(*const c_void, *mut c_void) -> c_int,
    pub patch_instructions: unsafe extern "C" fn(u32, *mut c_void, *const c_char) -> c_int,
    pub patch_module: unsafe extern "C" fn(*mut c_void) -> c_int,
    pub set_callback_data: unsafe extern "C" fn(*mut c_void, *const c_void) -> c_int,
    /// `sanitizerSetLaunchCallbackData(launch, function, stream, userdata)`: one launch's,
    /// the only way to reach a graph's kernel node.
    pub set_launch_callback_data: unsafe extern "C" fn(*mut c_void, *mut c_void, *mut c_void, *const c_void) -> c_int,
    /// `sanitizerStreamSynchronize`, optional: a params block made at a graph's upload is
    /// complete before the graph runs, whatever stream it is launched into.
    pub stream_sync: Option<unsafe extern "C" fn(*mut c_void) -> c_int>,
    /// `sanitizerAlloc`, `sanitizerMemcpyHostToDeviceAsync`: the device memory calls a
    /// callback may make (no driver call may be made there).
    pub alloc: unsafe extern "C" fn(*mut c_void, *mut *mut c_void, usize) -> c_int,
    pub copy_async: unsafe extern "C" fn(*mut c_void, *const c_void, usize, *mut c_void) -> c_int,
    /// Optional: without it records carry no SASS offset.
    pub function_pc: Option<unsafe extern "C" fn(*mut c_void, *const c_char, *mut u64, *mut u64) -> c_int>,
}

/// What the door found: the API, or why there is none.
static API: OnceLock<Result<Api, String>> = OnceLock::new();

#[derive(Default)]
struct Patched {
    /// Contexts the patch module was added to.
    contexts: HashSet<u64>,
    /// Patched modules (`CUmodule`), by handle.
    modules: HashSet<usize>,
    /// Patched modules whose machine code names the device heap's `malloc` or `free`: their
    /// kernels get the context's heap table.
    heap_modules: HashSet<usize>,
    /// Each context's device-heap table (`gpusan_abi::heap`'s layout), made at the first
    /// launch of a kernel of a heap module there; 0 where it could not be made.
    heaps: HashMap<u64, u64>,
    /// A traced run: each context's trace buffer (`gpusan_abi::binary::TRACE_*`), made at
    /// its first patched kernel's launch; 0 where it could not be made.
    traces: HashMap<u64, u64>,
    /// A traced run that samples its launches: each kernel's params block → its twin with
    /// no trace buffer, given to the launches the sample leaves out (their patches check
    /// and record nothing to drain, and the launch is not waited for).
    untraced: HashMap<u64, u64>,
}

static PATCHED: PerProcess<Mutex<Option<Patched>>> = PerProcess::new(|| Mutex::new(None));
/// Each launched kernel (`CUfunction`): its params block, 0 where its module is not patched
/// (or its block could not be made).
static KERNELS: PerProcess<RwLock<Option<HashMap<usize, u64>>>> = PerProcess::new(|| RwLock::new(None));
/// Set once a module was patched: launches look nothing up before.
static ANY: PerProcess<AtomicBool> = PerProcess::new(|| AtomicBool::new(false));
/// Microseconds spent in the API's patching calls (adding the patches, marking and
/// instrumenting modules) and in kernels' first launches (their params blocks): the
/// route's fixed costs, in the report beside its counts (`bench/binary-speed.sh`).
static PATCH_US: PerProcess<AtomicU64> = PerProcess::new(|| AtomicU64::new(0));
static FIRST_LAUNCH_US: PerProcess<AtomicU64> = PerProcess::new(|| AtomicU64::new(0));

/// Runs `f`, adding its wall time to `total`.
fn timed<T>(total: &AtomicU64, f: impl FnOnce() -> T) -> T {
    let start = std::time::Instant::now();
    let r = f();
    total.fetch_add(start.elapsed().as_micros() as u64, Ordering::Relaxed);
    r
}

/// Whether this run patches machine code at all: `--mode check` on a route that does.
pub fn wanted() -> bool {
    let o = &state().options;
    o.mode == Mode::Check && o.route.patches_machine_code()
}

/// Whether kernels may be patched in this process: wanted, and the API started. Launches
/// then set up their context's table before the launch (no driver call may be made in the
/// callback that patches a kernel loaded lazily at that launch).
pub fn started() -> bool {
    matches!(API.get(), Some(Ok(_))) && wanted()
}

/// The door's answer: the patching API, or why it cannot be had (called once).
pub fn start(api: Result<Api, String>) {
    let _ = API.set(api);
}

/// A module the driver loaded, in `context`: patched when this run checks it this way.
/// `library` is the library it belongs to (null for a module loaded as a module).
///
/// # Safety
/// `cubin` points at `size` readable bytes (the driver's copy), or is null.
pub unsafe fn module_loaded(context: u64, module: usize, library: usize, cubin: *const u8, size: usize) {
    if !wanted() || module == 0 {
        return;
    }
    let code = if cubin.is_null() { &[][..] } else { std::slice::from_raw_parts(cubin, size) };
    if contains(code, GLOBAL_ACCESS_PATCH.as_bytes()) {
        return; // gpusan's own patches, should the driver report loading them
    }
    if state().options.route.instruments_ptx() && contains(code, gpusan_abi::ERRORS_SYMBOL.as_bytes()) {
        return; // declares the device ABI: checked by the PTX route (or built instrumented)
    }
    let loaded = if library != 0 { Loaded::Library(library) } else { Loaded::Module(module) };
    if contains(code, DEVICE_LAUNCH.as_bytes()) {
        return coverage::patched(loaded, Err(DEVICE_LAUNCHES.to_string()));
    }
    let heap = contains(code, b"malloc") || contains(code, b"\0free\0");
    let verdict = match API.get() {
        Some(Ok(api)) => timed(PATCH_US.get(), || patch(api, context, module, heap)),
        Some(Err(why)) => Err(why.clone()),
        None => Err("binary route: the Compute Sanitizer API did not start".to_string()),
    };
    if verdict.is_ok() {
        ANY.get().store(true, Ordering::Release);
    }
    coverage::patched(loaded, verdict);
}

/// What machine code that launches kernels from the device calls (dynamic parallelism:
/// `cudaLaunchDeviceV2`, `__cudaCDP2LaunchDeviceV2` since CUDA 12). Those launches reach no
/// callback, so their kernels would run with whatever userdata the API holds: such a module
/// is left unpatched.
const DEVICE_LAUNCH: &str = "LaunchDeviceV2";
const DEVICE_LAUNCHES: &str = concat!(
    "binary route: launches kernels from the device (dynamic parallelism), ",
    "which no callback lets gpusan give their params"
);

/// Whether machine code names a symbol (its string table holds the names).
fn contains(code: &[u8], name: &[u8]) -> bool {
    code.windows(name.len()).any(|w| w == name)
}

/// Patches `module`: the API's calls serialized, as it requires.
unsafe fn patch(api: &Api, context: u64, module: usize, heap: bool) -> Result<(), String> {
    let mut guard = locks::lock(PATCHED.get());
    let p = guard.get_or_insert_with(Patched::default);
    if !p.contexts.contains(&context) {
        let r = (api.add_patches)(PATCHES.0.as_ptr() as *const c_void, context as *mut c_void);
        if r != 0 {
            return Err(format!("binary route: sanitizerAddPatches failed (error {r})"));
        }
        p.contexts.insert(context);
    }
    let empty = std::env::var(gpusan_abi::env::BINARY_PATCH).is_ok_and(|v| v == gpusan_abi::env::BINARY_PATCH_EMPTY);
    // A traced run's patches judge as the others do and also record (the trace route drains them).
    let tracing = !empty && state().options.trace;
    let global = if empty {
        EMPTY_ACCESS_PATCH
    } else if tracing {
        TRACE_GLOBAL_PATCH
    } else {
        GLOBAL_ACCESS_PATCH
    };
    let name = CString::new(global).expect("no NUL in the name");
    let m = module as *mut c_void;
    let r = (api.patch_instructions)(INSTRUCTION_GLOBAL_MEMORY_ACCESS, m, name.as_ptr());
    if r != 0 {
        return Err(format!("binary route: sanitizerPatchInstructions failed (error {r})"));
    }
    let mut kinds = state().options.binary_kinds;
    if tracing {
        // Shared accesses get the tracing patch (which judges them too), local ones a patch
        // that records only; a refused kind goes untraced.
        kinds.shared = false;
        for (id, name) in [
            (INSTRUCTION_SHARED_MEMORY_ACCESS, TRACE_SHARED_PATCH),
            (INSTRUCTION_LOCAL_MEMORY_ACCESS, TRACE_LOCAL_PATCH),
        ] {
            let name = CString::new(name).expect("no NUL in the name");
            let _ = (api.patch_instructions)(id, m, name.as_ptr());
        }
    }
    if !empty && super::binary_kinds::patch(api.patch_instructions, m, &kinds, heap) {
        p.heap_modules.insert(module);
    }
    let r = (api.patch_module)(m);
    if r != 0 {
        return Err(format!("binary route: sanitizerPatchModule failed (error {r})"));
    }
    p.modules.insert(module);
    Ok(())
}

/// A launch begun (`LAUNCH_BEGIN`): the kernel, its module, its context and the
/// Compute Sanitizer's handle of its stream.
pub struct Launch {
    pub context: u64,
    pub module: usize,
    pub function: usize,
    /// Null or NUL-terminated.
    pub name: *const c_char,
    pub stream: *mut c_void,
}

/// A launch is about to be made: a kernel of a patched module gets its params block (or
/// null, see [`userdata`]) as the callback data of its function. One read-locked lookup
/// for a kernel seen before.
///
/// # Safety
/// `launch.name` is null or a NUL-terminated string.
pub unsafe fn launch_begin(launch: &Launch) {
    if !ANY.get().load(Ordering::Acquire) {
        return;
    }
    let Some(Ok(api)) = API.get() else { return };
    if super::window::unchecked_now() {
        // A launch the run does not check (`super::window`): its patches check nothing.
        (api.set_callback_data)(launch.function as *mut c_void, std::ptr::null());
        return;
    }
    if let Some(given) = userdata(api, launch) {
        let block = for_this_launch(given.block);
        (api.set_callback_data)(launch.function as *mut c_void, block as *const c_void);
    }
}

/// A kernel node of a graph, launched or uploaded (`SANITIZER_CBID_GRAPHS_NODE_LAUNCH_BEGIN`).
pub struct Node {
    /// `Sanitizer_LaunchHandle` of the node's launch.
    pub handle: *mut c_void,
    /// Part of a graph's upload: the graph may then be launched into another stream.
    pub upload: bool,
}

/// A graph's kernel node is about to run (or be uploaded): no launch callback reaches it,
/// nor, as far as the API says, the callback data of its function, so a kernel of a
/// patched module gets its params block for this launch (`sanitizerSetLaunchCallbackData`).
/// Made here at its first node, the block also becomes its function's callback data, for
/// the launches no callback reports (from the device).
///
/// # Safety
/// `launch.name` is null or a NUL-terminated string.
pub unsafe fn node_launch_begin(launch: &Launch, node: Node) {
    if !ANY.get().load(Ordering::Acquire) {
        return;
    }
    let Some(Ok(api)) = API.get() else { return };
    let Some(given) = userdata(api, launch) else { return };
    let (function, block) = (launch.function as *mut c_void, given.block as *const c_void);
    if given.made {
        (api.set_callback_data)(function, block);
        // Written on the upload's stream: done before the graph runs on any other.
        if let (true, Some(sync)) = (node.upload, api.stream_sync) {
            sync(launch.stream);
        }
    }
    (api.set_launch_callback_data)(node.handle, function, launch.stream, block);
}

/// What a launch of a patched kernel gets as its patches' `userdata`.
struct Given {
    /// Its params block, or 0 (null) where it could not be made: the patches then check
    /// nothing (they never read a block they were not given), and the kernel is reported
    /// unchecked.
    block: u64,
    /// The block was made now (its kernel's first launch in its context).
    made: bool,
}

/// The userdata of `launch`'s kernel: `None` where its module is not patched (its launches
/// are left alone). A patched kernel always gets one gpusan chose: the API passes whatever
/// it holds otherwise, and a kernel of the H100's SASS-only suite launched only in graphs
/// faulted on it.
unsafe fn userdata(api: &Api, launch: &Launch) -> Option<Given> {
    let Launch { module, function, name, .. } = *launch;
    match locks::read(KERNELS.get()).as_ref().and_then(|k| k.get(&function).copied()) {
        Some(0) => return None,
        Some(block) => return Some(Given { block, made: false }),
        None => {}
    }
    if !locks::lock(PATCHED.get()).as_ref().is_some_and(|p| p.modules.contains(&module)) {
        // Remembered, so its launches look up once.
        locks::write(KERNELS.get()).get_or_insert_with(HashMap::new).insert(function, 0);
        return None;
    }
    let made = if name.is_null() {
        None
    } else {
        timed(FIRST_LAUNCH_US.get(), || quietly(|| first_launch(api, launch)).flatten())
    };
    let Some(block) = made else {
        // Not remembered: a later launch tries again (its context may be set up by then).
        let text = if name.is_null() {
            format!("<kernel {function:#x}>")
        } else {
            std::ffi::CStr::from_ptr(name).to_string_lossy().into_owned()
        };
        quietly(|| coverage::binary_unset(&text, NO_BLOCK));
        return Some(Given { block: 0, made: false });
    };
    locks::write(KERNELS.get()).get_or_insert_with(HashMap::new).insert(function, block);
    Some(Given { block, made: true })
}

/// Why a patched kernel ran some launch unchecked.
const NO_BLOCK: &str = "binary route: its params block could not be made for some of its launches (they ran unchecked)";

/// A patched kernel's first launch: its params block, with the low bits of its first
/// instruction's address (records then carry SASS offsets).
unsafe fn first_launch(api: &Api, launch: &Launch) -> Option<u64> {
    let text = std::ffi::CStr::from_ptr(launch.name).to_string_lossy().into_owned();
    let mut pc = 0u64;
    let mut bytes = 0u64;
    let m = launch.module as *mut c_void;
    let found = api.function_pc.is_some_and(|f| f(m, launch.name, &mut pc, &mut bytes) == 0);
    let memory = SanitizerMemory { api, launch };
    let block = mirror::patched_kernel(launch.context, &text, if found { pc as u32 } else { 0 }, &memory)?;
    if locks::lock(PATCHED.get()).as_ref().is_some_and(|p| p.heap_modules.contains(&launch.module)) {
        give_heap(launch.context, block, &memory);
    }
    if state().options.trace {
        give_trace(launch.context, block, &memory);
        if SAMPLING.get().load(Ordering::Acquire) {
            let twin = mirror::patched_kernel(launch.context, &text, if found { pc as u32 } else { 0 }, &memory);
            if let Some(twin) = twin {
                if locks::lock(PATCHED.get()).as_ref().is_some_and(|p| p.heap_modules.contains(&launch.module)) {
                    give_heap(launch.context, twin, &memory);
                }
                if let Some(p) = locks::lock(PATCHED.get()).as_mut() {
                    p.untraced.insert(block, twin);
                }
            }
        }
    }
    Some(block)
}

/// A traced run samples its launches (`gpusan trace --sample-launches`): set at its first
/// launch, by the trace route.
static SAMPLING: PerProcess<AtomicBool> = PerProcess::new(|| AtomicBool::new(false));

std::thread_local! {
    /// Whether the launch this thread is making is in the sample (set before each launch of
    /// a sampling run).
    static LAUNCH_TRACED: std::cell::Cell<bool> = const { std::cell::Cell::new(true) };
}

/// The trace route, before a launch of a run that samples its launches: whether this
/// thread's launch is in the sample (told here, so that this module needs nothing of it).
pub fn trace_sample(traced: bool) {
    SAMPLING.get().store(true, Ordering::Release);
    LAUNCH_TRACED.with(|c| c.set(traced));
}

/// The block a launch of a kernel whose params block is `block` gets: in a traced run, one
/// the sample leaves out gets the twin with no trace buffer, or none where that could not be
/// made (its records would be drained with another kernel's).
fn for_this_launch(block: u64) -> u64 {
    if block == 0 || !state().options.trace || LAUNCH_TRACED.with(|c| c.get()) {
        return block;
    }
    let twin = locks::lock(PATCHED.get()).as_ref().and_then(|p| p.untraced.get(&block).copied());
    if twin.is_none() {
        quietly(|| coverage::binary_unset("<a sampled-out launch>", NO_TWIN));
    }
    twin.unwrap_or(0)
}

/// Why a launch left out of a traced run's sample ran unchecked.
const NO_TWIN: &str =
    "gpusan trace --sample-launches: a launch left out of the sample had no params block without a trace buffer (it ran unchecked)";

/// Records a traced run's buffer holds per context: 32 bytes each, 64 MiB.
pub const TRACE_RECORDS: u64 = 2 << 20;

/// Points a kernel's params block at its context's trace buffer, made now (its header:
/// cursor 0, [`TRACE_RECORDS`]) at the context's first patched kernel. Where it cannot be
/// made the field stays 0 and the kernel's accesses are not recorded.
fn give_trace(context: u64, block: u64, memory: &SanitizerMemory) {
    use gpusan_abi::binary::{TRACE_CAPACITY, TRACE_HEADER_BYTES, TRACE_RECORD_BYTES};
    let mut guard = locks::lock(PATCHED.get());
    let Some(p) = guard.as_mut() else { return };
    let buffer = *p.traces.entry(context).or_insert_with(|| {
        let bytes = TRACE_HEADER_BYTES + TRACE_RECORDS * TRACE_RECORD_BYTES;
        let Some(at) = mirror::ParamsMemory::alloc(memory, bytes as usize) else { return 0 };
        let mut header = [0u8; TRACE_HEADER_BYTES as usize];
        header[TRACE_CAPACITY.offset..TRACE_CAPACITY.end()].copy_from_slice(&TRACE_RECORDS.to_le_bytes());
        if !mirror::ParamsMemory::write(memory, at, &header) {
            return 0;
        }
        if let Some(sync) = memory.api.stream_sync {
            // SAFETY: the launch's stream handle, as the callback gave it.
            unsafe { sync(memory.launch.stream) };
        }
        at
    });
    if buffer != 0 {
        let at = block + gpusan_abi::binary::PARAMS_TRACE.offset as u64;
        mirror::ParamsMemory::write(memory, at, &buffer.to_le_bytes());
    }
}

/// The trace buffers made so far: (context, device address).
pub fn trace_buffers() -> Vec<(u64, u64)> {
    locks::lock(PATCHED.get())
        .as_ref()
        .map_or_else(Vec::new, |p| p.traces.iter().filter(|(_, &b)| b != 0).map(|(&c, &b)| (c, b)).collect())
}

/// Points a kernel's params block at its context's device-heap table, made now if this is
/// the context's first kernel that calls `malloc` or `free`. The table is zeroed by a copy
/// on this launch's stream, complete before any launch on another stream uses it
/// (`sanitizerStreamSynchronize`, once per context). Where it cannot be made the field stays
/// 0, and the heap patches judge nothing.
fn give_heap(context: u64, block: u64, memory: &SanitizerMemory) {
    let mut guard = locks::lock(PATCHED.get());
    let Some(p) = guard.as_mut() else { return };
    let heap = *p.heaps.entry(context).or_insert_with(|| {
        let made = super::binary_kinds::heap_table(memory).unwrap_or(0);
        if let (true, Some(sync)) = (made != 0, memory.api.stream_sync) {
            // SAFETY: the launch's stream handle, as the callback gave it.
            unsafe { sync(memory.launch.stream) };
        }
        made
    });
    if heap != 0 {
        let at = block + gpusan_abi::binary::PARAMS_HEAP.offset as u64;
        mirror::ParamsMemory::write(memory, at, &heap.to_le_bytes());
    }
}

struct SanitizerMemory<'a> {
    api: &'a Api,
    launch: &'a Launch,
}

impl mirror::ParamsMemory for SanitizerMemory<'_> {
    fn alloc(&self, bytes: usize) -> Option<u64> {
        let mut p: *mut c_void = std::ptr::null_mut();
        // SAFETY: the API's allocation, with an out-parameter of ours.
        let r = unsafe { (self.api.alloc)(self.launch.context as *mut c_void, &mut p, bytes) };
        (r == 0 && !p.is_null()).then_some(p as u64)
    }

    fn write(&self, dst: u64, bytes: &[u8]) -> bool {
        // The copy is asynchronous on the launch's stream: its source must outlive it. A
        // params block is made once per kernel and context, so its 32 bytes are kept.
        let source: &'static [u8] = Box::leak(bytes.to_vec().into_boxed_slice());
        let (src, n) = (source.as_ptr() as *const c_void, source.len());
        // SAFETY: `dst` is a block the API allocated of at least `n` bytes.
        unsafe { (self.api.copy_async)(dst as *mut c_void, src, n, self.launch.stream) == 0 }
    }

    fn write_static(&self, dst: u64, bytes: &'static [u8]) -> bool {
        let (src, n) = (bytes.as_ptr() as *const c_void, bytes.len());
        // SAFETY: `dst` is a block the API allocated of at least `n` bytes; the source lives on.
        unsafe { (self.api.copy_async)(dst as *mut c_void, src, n, self.launch.stream) == 0 }
    }
}

/// Reads the patched kernels' counts of accesses to memory in no entry (late at exit,
/// before a context goes).
pub fn read_counts() {
    if ANY.get().load(Ordering::Acquire) {
        mirror::untracked_accesses(true);
    }
}

/// The report's counters of this route, where it patched anything.
pub fn counters() -> Vec<(&'static str, u64)> {
    if !ANY.get().load(Ordering::Acquire) {
        return Vec::new();
    }
    let modules = locks::lock(PATCHED.get()).as_ref().map_or(0, |p| p.modules.len() as u64);
    let kernels = locks::read(KERNELS.get()).as_ref().map_or(0, |k| k.values().filter(|b| **b != 0).count() as u64);
    vec![
        ("binary_patched_modules", modules),
        ("binary_patched_kernels", kernels),
        ("binary_untracked_accesses", mirror::untracked_accesses(false)),
        ("binary_patch_us", PATCH_US.get().load(Ordering::Relaxed)),
        ("binary_first_launch_us", FIRST_LAUNCH_US.get().load(Ordering::Relaxed)),
    ]
}
