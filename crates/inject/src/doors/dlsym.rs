//! The two doors through which programs look up driver functions: `dlsym` and
//! `cuGetProcAddress`. Each returns the real answer unless it names a function a family
//! stands in for ([`crate::families::hooks`]); then it hands out the stand-in.

use std::cell::Cell;
use std::ffi::{c_char, c_int, c_void, CStr};

use crate::driver::resolve::{real_dlsym, real_dlsym_next};
use crate::driver::{boundary, typed, Slot, CUDA_ERROR_NOT_INITIALIZED, CUDA_SUCCESS};
use crate::families;
use crate::probe;

/// The exported `dlsym`: passes its caller's address (the return address, on the stack or
/// in the link register at entry) on to [`dlsym_from`], which returns straight to the
/// caller. `dlsym(RTLD_NEXT, …)` means "after the caller's object", and only the entry
/// of the function knows who the caller is.
#[no_mangle]
#[unsafe(naked)]
pub unsafe extern "C" fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void {
    #[cfg(target_arch = "x86_64")]
    core::arch::naked_asm!("mov rdx, [rsp]", "jmp {f}", f = sym dlsym_from);
    #[cfg(target_arch = "aarch64")]
    core::arch::naked_asm!("mov x2, x30", "b {f}", f = sym dlsym_from);
}

unsafe extern "C" fn dlsym_from(handle: *mut c_void, symbol: *const c_char, caller: usize) -> *mut c_void {
    // The real answer, once found: what the program gets should gpusan fail after (choosing
    // a stand-in). Should the walk for `RTLD_NEXT` itself fail, null ("not found") is the
    // only answer gpusan can vouch for: glibc's, asked from here, would mean "after gpusan".
    let found = Cell::new(std::ptr::null_mut());
    boundary::contain(
        "dlsym",
        || {
            let real =
                if handle == libc::RTLD_NEXT { real_dlsym_next(caller, symbol) } else { real_dlsym(handle, symbol) };
            found.set(real);
            if real.is_null() || symbol.is_null() || boundary::bypassed() {
                return real;
            }
            stand_in_for(real, symbol)
        },
        || found.get(),
    )
}

/// What `dlsym` hands out for `symbol`, whose real address is `real`: gpusan's stand-in for
/// the functions it watches, else `real`.
unsafe fn stand_in_for(real: *mut c_void, symbol: *const c_char) -> *mut c_void {
    boundary::test_panic("dlsym");
    let name = CStr::from_ptr(symbol).to_bytes();
    // nvJitLink's names carry the caller's header version: each maps to one stand-in.
    let versioned = families::jitlink::stand_in_name(name);
    let name = versioned.as_deref().unwrap_or(name);
    if !name.starts_with(b"cu") && !name.starts_with(b"nvrtc") && versioned.is_none() {
        return real;
    }
    probe::with(|s| *s.resolved.entry(("dlsym".into(), String::from_utf8_lossy(name).into_owned())).or_default() += 1);
    // cudart (static or shared) asks for the resolver itself, then resolves everything
    // through it: hand out ours.
    // A lookup in the global scope (`RTLD_DEFAULT`, or `RTLD_NEXT` from the program) finds
    // gpusan's own export first: that is no real function to remember (the stand-in would
    // call itself), and the stand-in finds the real one itself.
    let keep = |slot: &Slot, ours: usize| {
        if real as usize != ours {
            slot.set(real as usize);
        }
        ours as *mut c_void
    };
    match name {
        b"cuGetProcAddress_v2" => return keep(&REAL_GETPROC_V2, cuGetProcAddress_v2 as *const () as usize),
        b"cuGetProcAddress" => return keep(&REAL_GETPROC_V1, cuGetProcAddress as *const () as usize),
        _ => {}
    }
    if let Some(forwarded) = fenced(CStr::from_ptr(symbol)) {
        return match families::by_name(name) {
            Some(hook) => {
                hook.real.set(forwarded);
                hook.wrapper as *mut c_void
            }
            None => forwarded as *mut c_void,
        };
    }
    match families::by_name(name) {
        Some(hook) if families::tenant::handed_out(hook.name) => keep(hook.real, hook.wrapper),
        _ => real,
    }
}

type GetProcV2 = unsafe extern "C" fn(*const c_char, *mut *mut c_void, c_int, u64, *mut c_int) -> c_int;
type GetProcV1 = unsafe extern "C" fn(*const c_char, *mut *mut c_void, c_int, u64) -> c_int;

/// The real resolvers: from `dlsym` when the program asked for them there, else looked up.
static REAL_GETPROC_V2: Slot = Slot::new();
static REAL_GETPROC_V1: Slot = Slot::new();

/// After the real `cuGetProcAddress` answered: swap in our stand-in when the answer is the
/// driver function one of our stand-ins stands for. Comparing addresses (not names) keeps
/// each stand-in on the exact ABI version it was written for (`cuMemAlloc` vs `_v2`).
unsafe fn swap_answer(symbol: *const c_char, pfn: *mut *mut c_void) {
    if symbol.is_null() || pfn.is_null() || (*pfn).is_null() || boundary::bypassed() {
        return;
    }
    boundary::test_panic("cuGetProcAddress");
    let name = CStr::from_ptr(symbol).to_bytes();
    probe::with(|s| {
        *s.resolved.entry(("getproc".into(), String::from_utf8_lossy(name).into_owned())).or_default() += 1
    });
    let got = *pfn as usize;
    if name == b"cuGetProcAddress" {
        // Asked for at a version: the answer's ABI is v2 from CUDA 12 on, v1 before.
        let v2 = REAL_GETPROC_V2.driver(c"cuGetProcAddress_v2");
        *pfn = if got == v2 { cuGetProcAddress_v2 as *mut c_void } else { cuGetProcAddress as *mut c_void };
        return;
    }
    if let Some(hook) = families::by_real_address(got).filter(|h| families::tenant::handed_out(h.name)) {
        *pfn = hook.wrapper as *mut c_void;
        return;
    }
    // A fenced tenant's driver is the manager: a function gpusan does not stand in for but
    // forwards is handed out as its forwarding function (a stand-in finds it itself).
    if let Some(forwarded) = fenced(CStr::from_ptr(symbol)) {
        *pfn = forwarded as *mut c_void;
    }
}

/// In a fenced tenant, the forwarding function for driver function `name`.
fn fenced(name: &CStr) -> Option<usize> {
    crate::driver::remote::function(name)
}

/// The real resolver's answer, then gpusan's swap of it ([`swap_answer`]). Should gpusan
/// fail, the program gets the real answer: its result (made once), and in `*pfn` the real
/// function, which stays there until the swap's last step.
unsafe fn get_proc(symbol: *const c_char, pfn: *mut *mut c_void, real: impl Fn() -> c_int) -> c_int {
    let made = Cell::new(None);
    boundary::contain(
        "cuGetProcAddress",
        || {
            let r = real();
            made.set(Some(r));
            if r == CUDA_SUCCESS {
                swap_answer(symbol, pfn);
            }
            r
        },
        || made.get().unwrap_or_else(&real),
    )
}

#[no_mangle]
pub unsafe extern "C" fn cuGetProcAddress_v2(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    version: c_int,
    flags: u64,
    status: *mut c_int,
) -> c_int {
    let Some(f) = typed::<GetProcV2>(REAL_GETPROC_V2.driver(c"cuGetProcAddress_v2")) else {
        return CUDA_ERROR_NOT_INITIALIZED;
    };
    get_proc(symbol, pfn, || f(symbol, pfn, version, flags, status))
}

#[no_mangle]
pub unsafe extern "C" fn cuGetProcAddress(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    version: c_int,
    flags: u64,
) -> c_int {
    let Some(f) = typed::<GetProcV1>(REAL_GETPROC_V1.driver(c"cuGetProcAddress")) else {
        return CUDA_ERROR_NOT_INITIALIZED;
    };
    get_proc(symbol, pfn, || f(symbol, pfn, version, flags))
}
