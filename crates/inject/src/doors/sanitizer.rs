//! The Compute Sanitizer API door: when the driver loads this library through
//! `CUDA_INJECTION64_PATH`, it calls `InitializeInjection`; we subscribe to the API's
//! callbacks from `libsanitizer-public.so`.
//!
//! In a `gpusan run`, only the runtime-API domain is enabled (every other domain would cost
//! a callback per driver call for nothing the hooks do not already see): cudart refuses some
//! buggy calls itself, before any driver call a hook could judge. At the exit of such a call,
//! [`runtime_exit`] reports what the failed call establishes: a 2-D copy or set whose rows
//! are wider than the pitch (cudaErrorInvalidPitchValue), a symbol copy running past the
//! variable's end. Nothing is reported that the call's arguments and the module's variables
//! do not prove, and nothing a driver hook already reported inside the same call. Any
//! runtime call's sticky kernel error is a GPU fault (`routes::faults`), where no stand-in saw it.
//!
//! In `--mode check` on a route that patches machine code, the module-loaded, launch-begin
//! and graph-node-launch-begin callbacks are enabled too, and go to `routes::binary` (with
//! the patching API's functions, resolved here).
//!
//! With `$GPUSAN_PROBE_OUT` (the injection probe), every domain is enabled and counted.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::atomic::Ordering;

use gpusan_runtime::checks::Finding;
use gpusan_runtime::per_process::PerProcess;
use gpusan_runtime::report::Operand;

use super::sanitizer_data::{GraphNodeLaunchData, LaunchData, GRAPH_NODE_KERNEL};
use crate::driver::resolve::real_dlsym;
use crate::driver::{boundary, typed};
use crate::probe;

#[repr(C)]
struct ModuleData {
    context: *mut c_void,
    module: *mut c_void,
    cubin_size: usize,
    cubin: *const c_char,
    library: *mut c_void,
}

#[repr(C)]
struct MemoryData {
    address: u64,
    size: u64,
}

const DOMAIN_RESOURCE: u32 = 3;
const DOMAIN_LAUNCH: u32 = 5;
const CBID_MODULE_LOADED: u32 = 9;
const CBID_DEVICE_MEMORY_ALLOC: u32 = 11;
const CBID_LAUNCH_BEGIN: u32 = 1;
const DOMAIN_GRAPHS: u32 = 10;
const CBID_GRAPHS_NODE_LAUNCH_BEGIN: u32 = 4;

unsafe extern "C" fn callback(_user: *mut c_void, domain: u32, cbid: u32, data: *const c_void) {
    boundary::enter("a sanitizer callback", || {
        probe::with(|s| {
            *s.callbacks.entry((domain, cbid)).or_default() += 1;
            if data.is_null() {
                return;
            }
            match (domain, cbid) {
                (DOMAIN_RESOURCE, CBID_MODULE_LOADED) if s.modules.len() < 64 => {
                    s.modules.push(unsafe { (*(data as *const ModuleData)).cubin_size } as u64)
                }
                (DOMAIN_RESOURCE, CBID_DEVICE_MEMORY_ALLOC) => {
                    s.device_allocs += 1;
                    s.device_alloc_bytes += unsafe { (*(data as *const MemoryData)).size };
                }
                (DOMAIN_LAUNCH, CBID_LAUNCH_BEGIN) if s.launched.len() < 64 => {
                    let name = unsafe { (*(data as *const LaunchData)).function_name };
                    if !name.is_null() {
                        let n = unsafe { CStr::from_ptr(name) }.to_string_lossy().into_owned();
                        if !s.launched.contains(&n) {
                            s.launched.push(n);
                        }
                    }
                }
                _ => {}
            }
        })
    });
}

/// `Sanitizer_CallbackData` (runtime- and driver-API domains).
#[repr(C)]
struct ApiData {
    site: u32,
    function_name: *const c_char,
    params: *const c_void,
    return_value: *const c_void,
    symbol_name: *const c_char,
    context: *mut c_void,
}

const DOMAIN_RUNTIME_API: u32 = 2;
const SITE_ENTER: u32 = 0;
const SITE_EXIT: u32 = 1;
const CUDA_ERROR_INVALID_PITCH_VALUE: i32 = 12;

/// `cudaMemcpy2D[Async]` parameters (`_ptds`/`_ptsz` alike).
#[repr(C)]
struct Copy2D {
    dst: u64,
    dpitch: usize,
    src: u64,
    spitch: usize,
    width: usize,
    height: usize,
}

/// `cudaMemset2D[Async]` parameters.
#[repr(C)]
struct Set2D {
    dst: u64,
    pitch: usize,
    value: c_int,
    width: usize,
    height: usize,
}

/// `cudaMemcpyToSymbol[Async]` parameters.
#[repr(C)]
struct ToSymbol {
    symbol: *const c_void,
    src: u64,
    count: usize,
    offset: usize,
}

/// `cudaMemcpyFromSymbol[Async]` parameters.
#[repr(C)]
struct FromSymbol {
    dst: u64,
    symbol: *const c_void,
    count: usize,
    offset: usize,
}

/// The runtime-API calls gpusan judges at their exit, by callback id
/// (`sanitizer_runtime_cbid.h`), with the name reports use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Watched {
    Copy2D(&'static str),
    Set2D(&'static str),
    ToSymbol(&'static str),
    FromSymbol(&'static str),
}

pub fn watched(cbid: u32) -> Option<Watched> {
    Some(match cbid {
        32 | 216 => Watched::Copy2D("cudaMemcpy2D"),
        44 | 228 => Watched::Copy2D("cudaMemcpy2DAsync"),
        50 | 234 => Watched::Set2D("cudaMemset2D"),
        52 | 236 => Watched::Set2D("cudaMemset2DAsync"),
        39 | 223 => Watched::ToSymbol("cudaMemcpyToSymbol"),
        47 | 231 => Watched::ToSymbol("cudaMemcpyToSymbolAsync"),
        40 | 224 => Watched::FromSymbol("cudaMemcpyFromSymbol"),
        48 | 232 => Watched::FromSymbol("cudaMemcpyFromSymbolAsync"),
        _ => return None,
    })
}

thread_local! {
    /// Driver-level findings on this thread when the watched call began.
    static AT_ENTER: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Whether `InitializeInjection` subscribed to the runtime-API domain in this process (a
/// child forked before CUDA's initialisation subscribes at its own).
static RUNTIME_API_OBSERVED: PerProcess<std::sync::atomic::AtomicBool> =
    PerProcess::new(|| std::sync::atomic::AtomicBool::new(false));

pub fn runtime_api_observed() -> bool {
    RUNTIME_API_OBSERVED.get().load(Ordering::Relaxed)
}

unsafe extern "C" fn runtime_callback(_user: *mut c_void, domain: u32, cbid: u32, data: *const c_void) {
    if data.is_null() || boundary::bypassed() {
        return;
    }
    match (domain, cbid) {
        (DOMAIN_RESOURCE, CBID_MODULE_LOADED) => {
            let m = &*(data as *const ModuleData);
            return boundary::enter("a module-loaded callback", || {
                crate::routes::binary::module_loaded(
                    m.context as u64,
                    m.module as usize,
                    m.library as usize,
                    m.cubin as *const u8,
                    m.cubin_size,
                )
            });
        }
        (DOMAIN_LAUNCH, CBID_LAUNCH_BEGIN) => {
            let l = &*(data as *const LaunchData);
            let launch = crate::routes::binary::Launch {
                context: l.context as u64,
                module: l.module as usize,
                function: l.function as usize,
                name: l.function_name,
                stream: l.hstream,
            };
            return boundary::enter("a launch callback", || crate::routes::binary::launch_begin(&launch));
        }
        (DOMAIN_GRAPHS, CBID_GRAPHS_NODE_LAUNCH_BEGIN) => {
            let n = &*(data as *const GraphNodeLaunchData);
            if n.node_type != GRAPH_NODE_KERNEL {
                return;
            }
            let l = &n.data.launch;
            let launch = crate::routes::binary::Launch {
                context: l.context as u64,
                module: l.module as usize,
                function: l.function as usize,
                name: l.function_name,
                stream: l.hstream,
            };
            let node = crate::routes::binary::Node { handle: l.hlaunch, upload: n.is_graph_upload != 0 };
            return boundary::enter("a graph node callback", || {
                crate::routes::binary::node_launch_begin(&launch, node)
            });
        }
        _ if domain != DOMAIN_RUNTIME_API => return,
        _ => {}
    }
    let d = unsafe { &*(data as *const ApiData) };
    runtime_fault(d);
    let Some(call) = watched(cbid) else { return };
    boundary::enter("a runtime API callback", || runtime_event(call, d));
}

/// A runtime call that returned a sticky kernel error (cudart's codes are the driver's): a
/// GPU fault, for the programs whose driver calls gpusan's stand-ins do not see (one
/// finding per context, so none more where they do). One comparison per call otherwise.
fn runtime_fault(d: &ApiData) {
    if d.site != SITE_EXIT || d.return_value.is_null() {
        return;
    }
    let r = unsafe { *(d.return_value as *const i32) };
    if gpusan_runtime::fault::fault_name(r).is_none() {
        return;
    }
    boundary::enter("a runtime API callback", || {
        let name = if d.function_name.is_null() {
            "a CUDA runtime call".into()
        } else {
            unsafe { CStr::from_ptr(d.function_name) }.to_string_lossy().into_owned()
        };
        crate::routes::faults::seen(&name, r);
    });
}

/// The entry or exit of a watched runtime-API call.
fn runtime_event(call: Watched, d: &ApiData) {
    boundary::test_panic("runtime_callback");
    let found = crate::families::judge::FOUND_ON_THREAD.with(|n| n.get());
    match d.site {
        SITE_ENTER => AT_ENTER.with(|n| n.set(found)),
        SITE_EXIT if !d.return_value.is_null() && !d.params.is_null() => {
            if AT_ENTER.with(|n| n.get()) != found {
                return; // a driver hook inside this call reported it already
            }
            let r = unsafe { *(d.return_value as *const i32) };
            if let Some(f) = unsafe { runtime_exit(call, r, d.params) } {
                let st = crate::state::state();
                st.finding(&f, crate::families::judge::site());
            }
        }
        _ => {}
    }
}

/// What a watched runtime call that returned `r` establishes, from its parameters.
unsafe fn runtime_exit(call: Watched, r: i32, params: *const c_void) -> Option<Finding> {
    use gpusan_runtime::checks::{Op, Problem};
    use gpusan_runtime::report::Operand;
    if r == 0 {
        return None;
    }
    let pitch = |api, op, operand, width: usize, pitch: usize| {
        let problem = Problem::InvalidPitch { width: width as u64, pitch: pitch as u64 };
        Some(Finding { api, op, operand, problem })
    };
    match call {
        Watched::Copy2D(api) if r == CUDA_ERROR_INVALID_PITCH_VALUE => {
            let p = &*(params as *const Copy2D);
            if p.height > 0 && p.width > p.dpitch {
                pitch(api, Op::Copy, Operand::Dst, p.width, p.dpitch)
            } else if p.height > 0 && p.width > p.spitch {
                pitch(api, Op::Copy, Operand::Src, p.width, p.spitch)
            } else {
                None
            }
        }
        Watched::Set2D(api) if r == CUDA_ERROR_INVALID_PITCH_VALUE => {
            let p = &*(params as *const Set2D);
            (p.height > 0 && p.width > p.pitch).then(|| pitch(api, Op::Set, Operand::Dst, p.width, p.pitch))?
        }
        Watched::ToSymbol(api) => {
            let p = &*(params as *const ToSymbol);
            symbol_overflow(api, p.symbol, p.offset, p.count, Operand::Dst)
        }
        Watched::FromSymbol(api) => {
            let p = &*(params as *const FromSymbol);
            symbol_overflow(api, p.symbol, p.offset, p.count, Operand::Src)
        }
        _ => None,
    }
}

/// A symbol copy of `count` bytes at `offset` into the variable whose host shadow is
/// `symbol`: out of bounds when the module variable of that name (all of them, when several
/// modules define it) is smaller.
fn symbol_overflow(
    api: &'static str,
    symbol: *const c_void,
    offset: usize,
    count: usize,
    operand: Operand,
) -> Option<Finding> {
    use gpusan_runtime::checks::{check_call, Call, Mem, Symbol};
    let host = crate::host_symbols::name_at(symbol as u64)?;
    let names = crate::host_symbols::device_names(&host);
    let (name, (address, size)) = names.into_iter().find_map(|n| Some((n.clone(), crate::variables::by_name(&n)?)))?;
    let symbol = Symbol { name: &name, address, size };
    let (offset, count) = (offset as u64, count as u64);
    let call = match operand {
        Operand::Dst => Call::CopyToSymbol { symbol, offset, src: Mem::Array(0), count },
        _ => Call::CopyFromSymbol { dst: Mem::Array(0), symbol, offset, count },
    };
    let st = crate::state::state();
    check_call(&st.registry, api, &call).into_iter().next()
}

/// Next to this library, or `$GPUSAN_SANITIZER_LIB`.
fn sanitizer_library() -> Option<CString> {
    if let Some(p) = std::env::var_os(gpusan_abi::env::SANITIZER_LIB) {
        return CString::new(p.into_encoded_bytes()).ok();
    }
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    if unsafe { libc::dladdr(callback as *const c_void, &mut info) } == 0 || info.dli_fname.is_null() {
        return None;
    }
    let me = unsafe { CStr::from_ptr(info.dli_fname) }.to_string_lossy().into_owned();
    let dir = std::path::Path::new(&me).parent()?;
    CString::new(dir.join("libsanitizer-public.so").to_string_lossy().into_owned()).ok()
}

#[no_mangle]
pub extern "C" fn InitializeInjection() -> c_int {
    boundary::contain(
        "InitializeInjection",
        || {
            unsafe { subscribe() };
            1
        },
        || 0,
    )
}

/// Subscribes to the Sanitizer API's callbacks (see the module's comment).
unsafe fn subscribe() {
    boundary::test_panic("InitializeInjection");
    probe::note("InitializeInjection called");
    let Some(path) = sanitizer_library() else {
        probe::note("no sanitizer library path");
        return;
    };
    let h = libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL);
    if h.is_null() {
        let err = libc::dlerror();
        let msg = if err.is_null() { String::new() } else { CStr::from_ptr(err).to_string_lossy().into_owned() };
        probe::note(format!("dlopen {}: {msg}", path.to_string_lossy()));
        return;
    }
    type Subscribe = unsafe extern "C" fn(
        *mut *mut c_void,
        unsafe extern "C" fn(*mut c_void, u32, u32, *const c_void),
        *mut c_void,
    ) -> c_int;
    type EnableAll = unsafe extern "C" fn(u32, *mut c_void) -> c_int;
    type EnableDomain = unsafe extern "C" fn(u32, *mut c_void, u32) -> c_int;
    let sub = typed::<Subscribe>(real_dlsym(h, c"sanitizerSubscribe".as_ptr()) as usize);
    let all = typed::<EnableAll>(real_dlsym(h, c"sanitizerEnableAllDomains".as_ptr()) as usize);
    let domain = typed::<EnableDomain>(real_dlsym(h, c"sanitizerEnableDomain".as_ptr()) as usize);
    let (Some(sub), Some(all), Some(domain)) = (sub, all, domain) else {
        probe::note("sanitizer symbols missing");
        return;
    };
    let mut handle = std::ptr::null_mut();
    if std::env::var_os(gpusan_abi::env::PROBE_OUT).is_some() {
        let r1 = sub(&mut handle, callback, std::ptr::null_mut());
        let r2 = all(1, handle);
        probe::note(format!("sanitizerSubscribe={r1} sanitizerEnableAllDomains={r2}"));
        return;
    }
    if sub(&mut handle, runtime_callback, std::ptr::null_mut()) != 0 {
        return;
    }
    if domain(1, handle, DOMAIN_RUNTIME_API) == 0 {
        RUNTIME_API_OBSERVED.get().store(true, Ordering::Relaxed);
    }
    if crate::routes::binary::wanted() {
        crate::routes::binary::start(patching(h, handle));
    }
}

/// The binary route's part of the API: the patching functions, and the three callbacks it
/// needs (a module loaded, a launch begun, a graph's node launched) enabled alone, so the
/// program pays for no other.
unsafe fn patching(h: *mut c_void, handle: *mut c_void) -> Result<crate::routes::binary::Api, String> {
    type EnableCallback = unsafe extern "C" fn(u32, *mut c_void, u32, u32) -> c_int;
    let get = |name: &CStr| real_dlsym(h, name.as_ptr()) as usize;
    let api = (|| {
        Some(crate::routes::binary::Api {
            add_patches: typed(get(c"sanitizerAddPatches"))?,
            patch_instructions: typed(get(c"sanitizerPatchInstructions"))?,
            patch_module: typed(get(c"sanitizerPatchModule"))?,
            set_callback_data: typed(get(c"sanitizerSetCallbackData"))?,
            set_launch_callback_data: typed(get(c"sanitizerSetLaunchCallbackData"))?,
            stream_sync: typed(get(c"sanitizerStreamSynchronize")),
            alloc: typed(get(c"sanitizerAlloc"))?,
            copy_async: typed(get(c"sanitizerMemcpyHostToDeviceAsync"))?,
            function_pc: typed(get(c"sanitizerGetFunctionPcAndSize")),
        })
    })();
    let Some(enable) = typed::<EnableCallback>(get(c"sanitizerEnableCallback")) else {
        return Err("binary route: the Compute Sanitizer library cannot enable single callbacks".into());
    };
    // Module loads in any case: the coverage report then says why their machine code was
    // not patched.
    let r = enable(1, handle, DOMAIN_RESOURCE, CBID_MODULE_LOADED);
    if r != 0 {
        return Err(format!("binary route: enabling the module-loaded callback failed (error {r})"));
    }
    let Some(api) = api else {
        return Err("binary route: the Compute Sanitizer library has no patching API".into());
    };
    let r = enable(1, handle, DOMAIN_LAUNCH, CBID_LAUNCH_BEGIN);
    if r != 0 {
        return Err(format!("binary route: enabling the launch callback failed (error {r})"));
    }
    // A graph's kernel nodes reach no launch callback: without theirs, a patched kernel
    // launched in a graph would run with a userdata gpusan never set.
    let r = enable(1, handle, DOMAIN_GRAPHS, CBID_GRAPHS_NODE_LAUNCH_BEGIN);
    if r != 0 {
        return Err(format!("binary route: enabling the graph node callback failed (error {r})"));
    }
    Ok(api)
}
