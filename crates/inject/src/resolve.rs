//! The two doors through which programs look up driver functions: `dlsym` and
//! `cuGetProcAddress`. Each returns the real answer unless it names a function we wrap.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::{probe, wrappers};

type DlsymFn = unsafe extern "C" fn(*mut c_void, *const c_char) -> *mut c_void;
static REAL_DLSYM: AtomicUsize = AtomicUsize::new(0);

/// glibc's own `dlsym`, found with `dlvsym` (which we do not export) so that looking it up
/// cannot recurse into our `dlsym`.
pub unsafe fn real_dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void {
    let mut p = REAL_DLSYM.load(Ordering::Acquire);
    if p == 0 {
        for version in [c"GLIBC_2.34", c"GLIBC_2.2.5"] {
            let f = libc::dlvsym(libc::RTLD_NEXT, c"dlsym".as_ptr(), version.as_ptr());
            if !f.is_null() {
                p = f as usize;
                break;
            }
        }
        if p == 0 {
            return std::ptr::null_mut();
        }
        REAL_DLSYM.store(p, Ordering::Release);
    }
    let f: DlsymFn = std::mem::transmute(p);
    f(handle, symbol)
}

/// The driver library, if the process has loaded it (never loads it ourselves).
pub unsafe fn libcuda() -> *mut c_void {
    libc::dlopen(c"libcuda.so.1".as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD)
}

/// Real address of a driver export by its exact (versioned) name.
pub unsafe fn real_driver_symbol(name: &CStr) -> usize {
    let p = real_dlsym(libc::RTLD_NEXT, name.as_ptr());
    if !p.is_null() {
        return p as usize;
    }
    let h = libcuda();
    if h.is_null() {
        return 0;
    }
    let p = real_dlsym(h, name.as_ptr());
    libc::dlclose(h);
    p as usize
}

#[no_mangle]
pub unsafe extern "C" fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void {
    let real = real_dlsym(handle, symbol);
    if real.is_null() || symbol.is_null() {
        return real;
    }
    let name = CStr::from_ptr(symbol).to_bytes();
    if !name.starts_with(b"cu") {
        return real;
    }
    probe::with(|s| *s.resolved.entry(("dlsym".into(), String::from_utf8_lossy(name).into_owned())).or_default() += 1);
    // cudart (static or shared) asks for the resolver itself, then resolves everything
    // through it: hand out ours.
    match name {
        b"cuGetProcAddress_v2" => {
            REAL_GETPROC_V2.store(real as usize, Ordering::Release);
            return cuGetProcAddress_v2 as *mut c_void;
        }
        b"cuGetProcAddress" => {
            REAL_GETPROC_V1.store(real as usize, Ordering::Release);
            return cuGetProcAddress as *mut c_void;
        }
        _ => {}
    }
    match wrappers::by_name(name) {
        Some(hook) => {
            hook.real.store(real as usize, Ordering::Release);
            hook.wrapper as *mut c_void
        }
        None => real,
    }
}

type GetProcV2 = unsafe extern "C" fn(*const c_char, *mut *mut c_void, c_int, u64, *mut c_int) -> c_int;
type GetProcV1 = unsafe extern "C" fn(*const c_char, *mut *mut c_void, c_int, u64) -> c_int;

/// After the real `cuGetProcAddress` answered: swap in our wrapper when the answer is the
/// driver function one of our wrappers stands for. Comparing addresses (not names) keeps
/// each wrapper on the exact ABI version it was written for (`cuMemAlloc` vs `_v2`).
unsafe fn swap_answer(symbol: *const c_char, pfn: *mut *mut c_void) {
    if symbol.is_null() || pfn.is_null() || (*pfn).is_null() {
        return;
    }
    let name = CStr::from_ptr(symbol).to_bytes();
    probe::with(|s| {
        *s.resolved.entry(("getproc".into(), String::from_utf8_lossy(name).into_owned())).or_default() += 1
    });
    let got = *pfn as usize;
    if name == b"cuGetProcAddress" {
        // Asked for at a version: the answer's ABI is v2 from CUDA 12 on, v1 before.
        let v2 = real_of(&REAL_GETPROC_V2, c"cuGetProcAddress_v2");
        *pfn = if got == v2 { cuGetProcAddress_v2 as *mut c_void } else { cuGetProcAddress as *mut c_void };
        return;
    }
    if let Some(hook) = wrappers::by_real_address(got) {
        *pfn = hook.wrapper as *mut c_void;
    }
}

static REAL_GETPROC_V2: AtomicUsize = AtomicUsize::new(0);
static REAL_GETPROC_V1: AtomicUsize = AtomicUsize::new(0);

fn real_of(slot: &AtomicUsize, name: &CStr) -> usize {
    let p = slot.load(Ordering::Acquire);
    if p != 0 {
        return p;
    }
    let p = unsafe { real_driver_symbol(name) };
    slot.store(p, Ordering::Release);
    p
}

#[no_mangle]
pub unsafe extern "C" fn cuGetProcAddress_v2(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    version: c_int,
    flags: u64,
    status: *mut c_int,
) -> c_int {
    let real = real_of(&REAL_GETPROC_V2, c"cuGetProcAddress_v2");
    if real == 0 {
        return 3; // CUDA_ERROR_NOT_INITIALIZED
    }
    let f: GetProcV2 = std::mem::transmute(real);
    let r = f(symbol, pfn, version, flags, status);
    if r == 0 {
        swap_answer(symbol, pfn);
    }
    r
}

#[no_mangle]
pub unsafe extern "C" fn cuGetProcAddress(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    version: c_int,
    flags: u64,
) -> c_int {
    let real = real_of(&REAL_GETPROC_V1, c"cuGetProcAddress");
    if real == 0 {
        return 3;
    }
    let f: GetProcV1 = std::mem::transmute(real);
    let r = f(symbol, pfn, version, flags);
    if r == 0 {
        swap_answer(symbol, pfn);
    }
    r
}
