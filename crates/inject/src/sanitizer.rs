//! The Compute Sanitizer API door: when the driver loads this library through
//! `CUDA_INJECTION64_PATH`, it calls `InitializeInjection`; we subscribe to the API's
//! callbacks (resources, launches, copies) from `libsanitizer-public.so`.

use std::ffi::{c_char, c_int, c_void, CStr, CString};

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

#[repr(C)]
struct LaunchData {
    context: *mut c_void,
    stream: *mut c_void,
    hstream: *mut c_void,
    module: *mut c_void,
    function: *mut c_void,
    function_name: *const c_char,
}

const DOMAIN_RESOURCE: u32 = 3;
const DOMAIN_LAUNCH: u32 = 5;
const CBID_MODULE_LOADED: u32 = 9;
const CBID_DEVICE_MEMORY_ALLOC: u32 = 11;
const CBID_LAUNCH_BEGIN: u32 = 1;

unsafe extern "C" fn callback(_user: *mut c_void, domain: u32, cbid: u32, data: *const c_void) {
    let _ = std::panic::catch_unwind(|| {
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

/// Next to this library, or `$GPUSAN_SANITIZER_LIB`.
fn sanitizer_library() -> Option<CString> {
    if let Some(p) = std::env::var_os("GPUSAN_SANITIZER_LIB") {
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
    let r = std::panic::catch_unwind(|| unsafe {
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
        let sub = crate::resolve::real_dlsym(h, c"sanitizerSubscribe".as_ptr());
        let all = crate::resolve::real_dlsym(h, c"sanitizerEnableAllDomains".as_ptr());
        if sub.is_null() || all.is_null() {
            probe::note("sanitizer symbols missing");
            return;
        }
        let sub: Subscribe = std::mem::transmute(sub);
        let all: EnableAll = std::mem::transmute(all);
        let mut handle = std::ptr::null_mut();
        let r1 = sub(&mut handle, callback, std::ptr::null_mut());
        let r2 = all(1, handle);
        probe::note(format!("sanitizerSubscribe={r1} sanitizerEnableAllDomains={r2}"));
    });
    if r.is_err() {
        return 0;
    }
    1
}
