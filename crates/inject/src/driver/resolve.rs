//! Where the real driver functions are, found without ever finding gpusan's own stand-ins,
//! and [`Slot`]: the one resolve-once cell every real function pointer lives in.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// A function's address, resolved at its first use and kept: `UNRESOLVED` until then,
/// `ABSENT` when it was not found (so it is not looked for again), else the address. A door
/// that handed the program gpusan's stand-in stores the real address it got ([`Slot::set`]).
pub struct Slot(AtomicUsize);

const UNRESOLVED: usize = 0;
const ABSENT: usize = usize::MAX;

impl Slot {
    pub const fn new() -> Slot {
        Slot(AtomicUsize::new(UNRESOLVED))
    }

    /// The address, found by `find` (0 when not there) the first time.
    pub fn resolve(&self, find: impl FnOnce() -> usize) -> usize {
        match self.0.load(Ordering::Acquire) {
            UNRESOLVED => {}
            ABSENT => return 0,
            p => return p,
        }
        let p = find();
        self.0.store(if p == 0 { ABSENT } else { p }, Ordering::Release);
        p
    }

    /// The address of the real driver export `name` (exact, versioned name); 0 if the
    /// driver has none. A library the program may load at any time (NVRTC, nvJitLink) is
    /// looked for again while its function is not found: its absence is never final.
    pub fn driver(&self, name: &CStr) -> usize {
        // Every call of a real function comes here: a known address is all it costs.
        match self.0.load(Ordering::Acquire) {
            UNRESOLVED | ABSENT => {}
            p => return p,
        }
        if !loaded_late(name) {
            return self.resolve(|| unsafe { real_driver_symbol(name) });
        }
        let p = unsafe { real_driver_symbol(name) };
        if p != 0 {
            self.0.store(p, Ordering::Release);
        }
        p
    }

    /// The real address a door got for this function.
    pub fn set(&self, address: usize) {
        self.0.store(address, Ordering::Release);
    }
}

/// The function at `address` as the function pointer type `F`; `None` for 0. The only
/// place the crate turns an address into a function.
///
/// # Safety
/// `F` must be the exact `unsafe extern "C" fn` type of the function at `address`.
pub unsafe fn typed<F: Copy>(address: usize) -> Option<F> {
    const { assert!(std::mem::size_of::<F>() == std::mem::size_of::<usize>()) };
    (address != 0).then(|| std::mem::transmute_copy(&address))
}

type DlsymFn = unsafe extern "C" fn(*mut c_void, *const c_char) -> *mut c_void;

/// glibc's own `dlsym`, found with `dlvsym` (which we do not export) so that looking it up
/// cannot recurse into our `dlsym`.
pub unsafe fn real_dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void {
    static DLSYM: Slot = Slot::new();
    let found = DLSYM.resolve(|| {
        for version in [c"GLIBC_2.34", c"GLIBC_2.2.5"] {
            let f = libc::dlvsym(libc::RTLD_NEXT, c"dlsym".as_ptr(), version.as_ptr());
            if !f.is_null() {
                return f as usize;
            }
        }
        0
    });
    match typed::<DlsymFn>(found) {
        Some(f) => f(handle, symbol),
        None => std::ptr::null_mut(),
    }
}

/// The start of glibc's `struct link_map` (`<link.h>`): the fields that are its ABI.
#[repr(C)]
struct LinkMap {
    l_addr: usize,
    l_name: *const c_char,
}

/// `dladdr1`'s request for the object's link map (`<dlfcn.h>`).
const RTLD_DL_LINKMAP: c_int = 2;

/// The link map of the object holding `address`, if any.
unsafe fn object_of(address: *const c_void) -> *mut LinkMap {
    let mut info: libc::Dl_info = std::mem::zeroed();
    let mut map: *mut LinkMap = std::ptr::null_mut();
    if libc::dladdr1(address, &mut info, (&raw mut map).cast(), RTLD_DL_LINKMAP) == 0 {
        return std::ptr::null_mut();
    }
    map
}

/// The loaded objects in load order, as (load address, name): read by `dl_iterate_phdr`,
/// under the loader's lock, so an object another thread closes meanwhile is never read.
unsafe fn objects() -> Vec<(usize, CString)> {
    unsafe extern "C" fn each(info: *mut libc::dl_phdr_info, _: usize, data: *mut c_void) -> c_int {
        let list = &mut *(data as *mut Vec<(usize, CString)>);
        let name = (*info).dlpi_name;
        list.push((
            (*info).dlpi_addr as usize,
            if name.is_null() { CString::default() } else { CStr::from_ptr(name).into() },
        ));
        0
    }
    let mut list: Vec<(usize, CString)> = Vec::new();
    libc::dl_iterate_phdr(Some(each), (&raw mut list).cast());
    list
}

/// The addresses of gpusan's own library as loaded (its segments, from the lowest to past
/// the highest): a stack frame there is gpusan's, never the program's. Found once.
pub fn own_code() -> std::ops::Range<u64> {
    static START: AtomicU64 = AtomicU64::new(0);
    static END: AtomicU64 = AtomicU64::new(0);
    if END.load(Ordering::Acquire) == 0 {
        // Racing threads find the same range.
        let found = unsafe { segments_holding(own_code as *const () as usize) }.unwrap_or(0..0);
        START.store(found.start, Ordering::Relaxed);
        END.store(found.end.max(1), Ordering::Release);
    }
    START.load(Ordering::Relaxed)..END.load(Ordering::Acquire)
}

/// The span of the loaded segments of the object holding `address`.
unsafe fn segments_holding(address: usize) -> Option<std::ops::Range<u64>> {
    struct Find {
        address: u64,
        found: Option<std::ops::Range<u64>>,
    }
    unsafe extern "C" fn each(info: *mut libc::dl_phdr_info, _: usize, data: *mut c_void) -> c_int {
        let find = data as *mut Find;
        let object = || {
            let info = &*info;
            if info.dlpi_phdr.is_null() {
                return 0;
            }
            let headers = std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum));
            let (mut span, mut holds): (Option<std::ops::Range<u64>>, bool) = (None, false);
            for h in headers.iter().filter(|h| h.p_type == libc::PT_LOAD) {
                let start = info.dlpi_addr.wrapping_add(h.p_vaddr);
                let segment = start..start.saturating_add(h.p_memsz);
                holds |= segment.contains(&(*find).address);
                span = Some(span.map_or(segment.clone(), |s| s.start.min(segment.start)..s.end.max(segment.end)));
            }
            if holds {
                (*find).found = span;
                return 1; // found: the walk stops
            }
            0
        };
        super::boundary::contain("dl_iterate_phdr", object, || 1)
    }
    let mut find = Find { address: address as u64, found: None };
    libc::dl_iterate_phdr(Some(each), (&raw mut find).cast());
    find.found
}

/// What `dlsym(RTLD_NEXT, symbol)` answers to code at `caller`: the first definition in
/// an object after the caller's, in load order (which, for the objects of the program's
/// start, is the global search order: program, preloads, their dependencies).
///
/// glibc finds the caller from its own return address, which inside our `dlsym` is gpusan:
/// passed on as it is, `RTLD_NEXT` would mean "after gpusan", and a library preloaded after
/// gpusan that forwards to the next definition would be given its own back.
pub unsafe fn real_dlsym_next(caller: usize, symbol: *const c_char) -> *mut c_void {
    let list = objects();
    // glibc takes an address in no object for the program's (the first).
    let map = object_of(caller as *const c_void);
    let start = if map.is_null() {
        0
    } else {
        let name = if (*map).l_name.is_null() { c"" } else { CStr::from_ptr((*map).l_name) };
        match list.iter().position(|(addr, n)| *addr == (*map).l_addr && n.as_c_str() == name) {
            Some(i) => i,
            None => return std::ptr::null_mut(),
        }
    };
    for (_, name) in list.iter().skip(start + 1).filter(|(_, n)| !n.is_empty()) {
        // Opened (not loaded) for the lookup, so it cannot be closed meanwhile. A handle
        // searches its object first, then the object's dependencies: only an answer from
        // the object itself is its definition.
        let h = libc::dlopen(name.as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD);
        if h.is_null() {
            continue;
        }
        let mut own: *mut LinkMap = std::ptr::null_mut();
        let p = real_dlsym(h, symbol);
        let found =
            !p.is_null() && libc::dlinfo(h, libc::RTLD_DI_LINKMAP, (&raw mut own).cast()) == 0 && object_of(p) == own;
        libc::dlclose(h);
        if found {
            return p;
        }
    }
    std::ptr::null_mut()
}

/// The driver library, if the process has loaded it (never loads it ourselves).
unsafe fn libcuda() -> *mut c_void {
    libc::dlopen(c"libcuda.so.1".as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD)
}

/// The first loaded library whose file name starts with `prefix` (`libnvrtc.so`, not
/// NVRTC's builtins; `libnvJitLink.so`), if any: Python extensions load them into their
/// own scope, where `RTLD_NEXT` does not look. A second copy's functions never reach
/// gpusan's stand-ins (see `families::nvrtc`).
unsafe fn loaded_library(prefix: &[u8]) -> *mut c_void {
    for (_, path) in objects() {
        let file = path.to_bytes().rsplit(|&b| b == b'/').next().unwrap_or_default();
        if file.starts_with(prefix) {
            return libc::dlopen(path.as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD);
        }
    }
    std::ptr::null_mut()
}

/// The address of `name` in the driver or the loaded library of its kind, looked for now
/// (never kept): for functions gpusan calls once in a while under one of several names.
pub fn find_now(name: &CStr) -> usize {
    unsafe { real_driver_symbol(name) }
}

/// Whether `name` is a function of a library the program loads when it wants (NVRTC,
/// nvJitLink), not of the driver.
pub fn loaded_late(name: &CStr) -> bool {
    let n = name.to_bytes();
    n.starts_with(b"nvrtc") || n.starts_with(b"__nvJitLink") || n.starts_with(b"nvJitLink")
}

/// Real address of a driver export by its exact (versioned) name, or of an NVRTC or
/// nvJitLink function in the loaded library of its kind.
unsafe fn real_driver_symbol(name: &CStr) -> usize {
    // A fenced tenant's driver is the manager, for the functions forwarded to it; the real
    // driver (never initialised in a tenant) answers none of its other functions: they are
    // not found, and the report names them.
    if let Some(p) = super::remote::function(name) {
        return p;
    }
    if super::remote::active() && super::remote::is_driver_function(name) {
        super::remote::not_forwarded(name);
        return 0;
    }
    let p = real_dlsym(libc::RTLD_NEXT, name.as_ptr());
    if !p.is_null() {
        return p as usize;
    }
    let n = name.to_bytes();
    let h = if n.starts_with(b"nvrtc") {
        loaded_library(b"libnvrtc.so")
    } else if n.starts_with(b"cupti") {
        loaded_library(b"libcupti.so")
    } else if n.starts_with(b"__nvJitLink") || n.starts_with(b"nvJitLink") {
        loaded_library(b"libnvJitLink.so")
    } else {
        libcuda()
    };
    if h.is_null() {
        return 0;
    }
    let p = real_dlsym(h, name.as_ptr());
    libc::dlclose(h);
    p as usize
}

#[cfg(test)]
mod tests {
    use super::{typed, Slot};

    #[test]
    fn a_slot_resolves_once_and_remembers_an_absent_function() {
        let slot = Slot::new();
        let mut lookups = 0;
        assert_eq!(
            slot.resolve(|| {
                lookups += 1;
                0
            }),
            0
        );
        assert_eq!(
            slot.resolve(|| {
                lookups += 1;
                42
            }),
            0,
            "absence is remembered"
        );
        assert_eq!(lookups, 1);
        // A door that got the real address for it overrides.
        slot.set(7);
        assert_eq!(slot.resolve(|| unreachable!()), 7);
        let found = Slot::new();
        assert_eq!(found.resolve(|| 9), 9);
        assert_eq!(found.resolve(|| unreachable!()), 9);
    }

    extern "C" fn seven() -> i32 {
        7
    }

    #[test]
    fn typed_turns_an_address_into_the_function_and_zero_into_none() {
        let f = unsafe { typed::<extern "C" fn() -> i32>(seven as *const () as usize) }.expect("an address");
        assert_eq!(f(), 7);
        assert!(unsafe { typed::<extern "C" fn() -> i32>(0) }.is_none());
    }
}
