//! Wrappers for the driver functions gpusan watches. Each counts its calls and forwards
//! to the real function; the real address comes from whichever door handed the wrapper
//! out, or from `dlsym` on first use when the program linked against `libcuda` directly.

use std::collections::BTreeMap;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

type CUresult = c_int;
type Ptr = *mut c_void;

pub struct Hook {
    pub name: &'static CStr,
    pub wrapper: usize,
    pub real: &'static AtomicUsize,
    pub calls: &'static AtomicU64,
}

fn real_or_resolve(real: &AtomicUsize, name: &CStr) -> usize {
    let p = real.load(Ordering::Acquire);
    if p != 0 {
        return p;
    }
    let p = unsafe { crate::resolve::real_driver_symbol(name) };
    real.store(p, Ordering::Release);
    p
}

macro_rules! wrappers {
    ($( fn $name:ident ( $($arg:ident : $ty:ty),* $(,)? ); )*) => {
        $(
            #[allow(non_snake_case)]
            mod $name {
                pub static REAL: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
                pub static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            }

            #[no_mangle]
            pub unsafe extern "C" fn $name($($arg: $ty),*) -> CUresult {
                $name::CALLS.fetch_add(1, Ordering::Relaxed);
                let real = real_or_resolve(&$name::REAL, unsafe { CStr::from_bytes_with_nul_unchecked(concat!(stringify!($name), "\0").as_bytes()) });
                if real == 0 {
                    return 3; // CUDA_ERROR_NOT_INITIALIZED: the driver is not loaded
                }
                let f: unsafe extern "C" fn($($ty),*) -> CUresult = std::mem::transmute(real);
                f($($arg),*)
            }
        )*

        pub fn all() -> Vec<Hook> {
            vec![$(Hook {
                name: unsafe { CStr::from_bytes_with_nul_unchecked(concat!(stringify!($name), "\0").as_bytes()) },
                wrapper: $name as *const () as usize,
                real: &$name::REAL,
                calls: &$name::CALLS,
            }),*]
        }
    };
}

wrappers! {
    fn cuMemAlloc_v2(dptr: *mut u64, size: usize);
    fn cuMemFree_v2(dptr: u64);
    fn cuMemAllocAsync(dptr: *mut u64, size: usize, stream: Ptr);
    fn cuMemAllocAsync_ptsz(dptr: *mut u64, size: usize, stream: Ptr);
    fn cuMemFreeAsync(dptr: u64, stream: Ptr);
    fn cuMemFreeAsync_ptsz(dptr: u64, stream: Ptr);
    fn cuMemAllocFromPoolAsync(dptr: *mut u64, size: usize, pool: Ptr, stream: Ptr);
    fn cuMemAllocFromPoolAsync_ptsz(dptr: *mut u64, size: usize, pool: Ptr, stream: Ptr);
    fn cuMemAllocManaged(dptr: *mut u64, size: usize, flags: u32);
    fn cuMemAllocPitch_v2(dptr: *mut u64, pitch: *mut usize, width: usize, height: usize, elem: u32);
    fn cuMemHostAlloc(pp: *mut Ptr, size: usize, flags: u32);
    fn cuMemFreeHost(p: Ptr);
    fn cuMemcpyHtoD_v2(dst: u64, src: *const c_void, n: usize);
    fn cuMemcpyDtoH_v2(dst: Ptr, src: u64, n: usize);
    fn cuMemcpyDtoD_v2(dst: u64, src: u64, n: usize);
    fn cuMemcpyAsync(dst: u64, src: u64, n: usize, stream: Ptr);
    fn cuMemcpyAsync_ptsz(dst: u64, src: u64, n: usize, stream: Ptr);
    fn cuMemcpyHtoDAsync_v2(dst: u64, src: *const c_void, n: usize, stream: Ptr);
    fn cuMemcpyHtoDAsync_v2_ptsz(dst: u64, src: *const c_void, n: usize, stream: Ptr);
    fn cuMemcpyDtoHAsync_v2(dst: Ptr, src: u64, n: usize, stream: Ptr);
    fn cuMemcpyDtoHAsync_v2_ptsz(dst: Ptr, src: u64, n: usize, stream: Ptr);
    fn cuMemsetD8_v2(dst: u64, value: u8, n: usize);
    fn cuMemsetD32_v2(dst: u64, value: u32, n: usize);
    fn cuMemsetD8Async(dst: u64, value: u8, n: usize, stream: Ptr);
    fn cuMemsetD8Async_ptsz(dst: u64, value: u8, n: usize, stream: Ptr);
    fn cuMemsetD32Async(dst: u64, value: u32, n: usize, stream: Ptr);
    fn cuMemsetD32Async_ptsz(dst: u64, value: u32, n: usize, stream: Ptr);
    fn cuModuleLoadData(module: *mut Ptr, image: *const c_void);
    fn cuModuleLoadDataEx(module: *mut Ptr, image: *const c_void, n: u32, options: *mut c_int, values: *mut Ptr);
    fn cuModuleLoadFatBinary(module: *mut Ptr, fatbin: *const c_void);
    fn cuModuleGetFunction(f: *mut Ptr, module: Ptr, name: *const c_char);
    fn cuLibraryLoadData(lib: *mut Ptr, code: *const c_void, jo: *mut c_int, jv: *mut Ptr, njo: u32, lo: *mut c_int, lv: *mut Ptr, nlo: u32);
    fn cuLibraryGetKernel(k: *mut Ptr, lib: Ptr, name: *const c_char);
    fn cuLaunchKernel(f: Ptr, gx: u32, gy: u32, gz: u32, bx: u32, by: u32, bz: u32, shmem: u32, stream: Ptr, params: *mut Ptr, extra: *mut Ptr);
    fn cuLaunchKernel_ptsz(f: Ptr, gx: u32, gy: u32, gz: u32, bx: u32, by: u32, bz: u32, shmem: u32, stream: Ptr, params: *mut Ptr, extra: *mut Ptr);
    fn cuLaunchKernelEx(config: *const c_void, f: Ptr, params: *mut Ptr, extra: *mut Ptr);
    fn cuLaunchKernelEx_ptsz(config: *const c_void, f: Ptr, params: *mut Ptr, extra: *mut Ptr);
    fn cuLaunchCooperativeKernel(f: Ptr, gx: u32, gy: u32, gz: u32, bx: u32, by: u32, bz: u32, shmem: u32, stream: Ptr, params: *mut Ptr);
    fn cuGraphLaunch(exec: Ptr, stream: Ptr);
    fn cuGraphLaunch_ptsz(exec: Ptr, stream: Ptr);
    fn cuCtxSynchronize();
    fn cuStreamSynchronize(stream: Ptr);
    fn cuStreamSynchronize_ptsz(stream: Ptr);
}

pub fn by_name(name: &[u8]) -> Option<Hook> {
    all().into_iter().find(|h| h.name.to_bytes() == name)
}

/// The wrapper standing for the driver function at `addr`, if any.
pub fn by_real_address(addr: usize) -> Option<Hook> {
    all().into_iter().find(|h| real_or_resolve(h.real, h.name) == addr)
}

pub fn call_counts() -> BTreeMap<String, u64> {
    all()
        .into_iter()
        .filter_map(|h| {
            let n = h.calls.load(Ordering::Relaxed);
            (n > 0).then(|| (h.name.to_string_lossy().into_owned(), n))
        })
        .collect()
}
