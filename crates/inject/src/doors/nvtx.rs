//! The NVTX injection door: allocators that describe their sub-allocations with NVTX's
//! memory API (RMM and others: `nvtxMemHeapRegister`, `nvtxMemRegionsRegister`, …) reach
//! gpusan here, as they reach compute-sanitizer.
//!
//! NVTX is header-only: the first NVTX call of a program loads the library
//! `NVTX_INJECTION64_PATH` names (`gpusan run` sets it to this one, unless the program set
//! it: then to this one all the same, with theirs in `GPUSAN_NVTX_CHAIN`) and calls its
//! `InitializeInjectionNvtx2` (the core API: gpusan takes none of it, and forwards to the
//! chained tool) and, for an extension such as the memory API, its
//! `InitializeInjectionNvtxExtension` with the extension's function slots, which the tool
//! fills. gpusan fills the memory API's heap and region slots (forwarding each call to the
//! chained tool's own, when it filled them first): a region of a heap becomes a pool block
//! (`families::pools`, source NVTX); a region unregistered, or its heap reset or
//! unregistered, frees it. NVTX says nothing of streams, so those frees reach kernels at a
//! context synchronization (`routes::pool_frees`): a use after free is found later than a
//! pool's own hook would find it, never falsely.

use std::collections::HashMap;
use std::ffi::{c_int, c_void, CString};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use gpusan_abi::env;
use gpusan_runtime::locks;
use gpusan_runtime::per_process::PerProcess;

use crate::driver::boundary;
use crate::driver::resolve::{real_dlsym, typed};
use crate::families::pools::{self, UNKNOWN_STREAM};

/// `NVTX_EXT_MODULEID_MEM`, `NVTX_EXT_COMPATID_MEM`.
const MODULE_MEM: u16 = 1;
const COMPAT_MEM: u16 = 0x0102;
/// `NVTX3EXT_CBID_*` of the memory API: indexes of its function slots.
const CBID_HEAP_REGISTER: usize = 1;
const CBID_HEAP_UNREGISTER: usize = 2;
const CBID_HEAP_RESET: usize = 3;
const CBID_REGIONS_REGISTER: usize = 4;
const CBID_REGIONS_RESIZE: usize = 5;
const CBID_REGIONS_UNREGISTER: usize = 6;
/// `NVTX_EXTENSION_FRESH`, `NVTX_EXTENSION_DISABLED`, `NVTX_EXTENSION_STARTING`: slot
/// values that are no function.
const NOT_A_FUNCTION: [isize; 3] = [0, 1, 2];
/// `NVTX_MEM_TYPE_VIRTUAL_ADDRESS`; `NVTX_MEM_REGION_REF_TYPE_POINTER`, `_HANDLE`.
const TYPE_VIRTUAL_ADDRESS: u32 = 1;
const REF_POINTER: u32 = 1;
const REF_HANDLE: u32 = 2;

/// `nvtxExtModuleSegment_t`.
#[repr(C)]
struct Segment {
    id: usize,
    slot_count: usize,
    slots: *mut isize,
}

/// `nvtxExtModuleInfo_t`.
#[repr(C)]
pub struct ModuleInfo {
    nvtx_ver: u16,
    struct_size: u16,
    module_id: u16,
    compat_id: u16,
    segments_count: usize,
    segments: *mut Segment,
    get_export_function: *const c_void,
    ext_info: *const c_void,
}

/// `nvtxMemVirtualRangeDesc_v1`.
#[repr(C)]
struct Range {
    size: usize,
    ptr: u64,
}

/// `nvtxMemHeapDesc_v1` (up to the fields read).
#[repr(C)]
struct HeapDesc {
    ext_compat_id: u16,
    struct_size: u16,
    reserved0: u32,
    usage: u32,
    kind: u32,
    type_specific_desc_size: usize,
    type_specific_desc: *const Range,
}

/// `nvtxMemRegionsRegisterBatch_v1`; `nvtxMemRegionsResizeBatch_v1` is the same without
/// the heap and the handles out.
#[repr(C)]
struct RegionsRegister {
    ext_compat_id: u16,
    struct_size: u16,
    region_type: u32,
    heap: usize,
    count: usize,
    element_size: usize,
    elements: *const u8,
    handles_out: *mut usize,
}

#[repr(C)]
struct RegionsResize {
    ext_compat_id: u16,
    struct_size: u16,
    region_type: u32,
    count: usize,
    element_size: usize,
    elements: *const u8,
}

/// `nvtxMemRegionsUnregisterBatch_v1`.
#[repr(C)]
struct RegionsUnregister {
    ext_compat_id: u16,
    struct_size: u16,
    ref_type: u32,
    count: usize,
    element_size: usize,
    elements: *const u8,
}

/// The chained tool's memory-API functions (slot values), by CBID.
static CHAINED: [AtomicUsize; 7] = [const { AtomicUsize::new(0) }; 7];

/// Live regions: pointer → heap handle.
static REGIONS: PerProcess<Mutex<HashMap<u64, usize>>> = PerProcess::new(Default::default);
static NEXT_HEAP: AtomicUsize = AtomicUsize::new(0x6000_0000);

/// The injection library the program itself named: its entry point `name`, an address.
fn chained(name: &str) -> Option<usize> {
    let path = std::env::var(env::NVTX_CHAIN).ok().filter(|p| !p.is_empty())?;
    let path = CString::new(path).ok()?;
    // SAFETY: dlopen of a path the user gave (their tool), and a lookup in it.
    unsafe {
        let handle = libc::dlopen(path.as_ptr(), libc::RTLD_LAZY);
        if handle.is_null() {
            return None;
        }
        let name = CString::new(name).ok()?;
        let f = real_dlsym(handle, name.as_ptr());
        (!f.is_null()).then_some(f as usize)
    }
}

/// NVTX's core injection: nothing of gpusan's; the chained tool's answer, else success (so
/// NVTX keeps loading extensions from this library).
#[no_mangle]
pub extern "C" fn InitializeInjectionNvtx2(get_export_table: *const c_void) -> c_int {
    boundary::contain(
        "InitializeInjectionNvtx2",
        || {
            type F = unsafe extern "C" fn(*const c_void) -> c_int;
            // SAFETY: the chained tool's entry point, of this signature by NVTX's contract.
            match chained("InitializeInjectionNvtx2").and_then(|f| unsafe { typed::<F>(f) }) {
                Some(f) => unsafe { f(get_export_table) },
                None => 1,
            }
        },
        || 1,
    )
}

/// An NVTX extension's injection: the memory API's slots get gpusan's functions, after the
/// chained tool filled them (its functions are kept and called from gpusan's).
///
/// # Safety
/// `info` is NVTX's module description with its segments and slots, as its headers make it.
#[no_mangle]
pub unsafe extern "C" fn InitializeInjectionNvtxExtension(info: *mut ModuleInfo) -> c_int {
    boundary::contain("InitializeInjectionNvtxExtension", || unsafe { extension(info) }, || 0)
}

unsafe fn extension(info: *mut ModuleInfo) -> c_int {
    type F = unsafe extern "C" fn(*mut ModuleInfo) -> c_int;
    let theirs = chained("InitializeInjectionNvtxExtension").and_then(|f| typed::<F>(f)).map(|f| f(info));
    let Some(m) = info.as_ref() else { return theirs.unwrap_or(0) };
    if m.module_id != MODULE_MEM || m.compat_id != COMPAT_MEM || m.segments_count == 0 || m.segments.is_null() {
        return theirs.unwrap_or(0);
    }
    let segment = &*m.segments;
    // Two layouts share this compatibility id. Segment id 1: the CBIDs count from 0 and the
    // first function is at slot 0, as in CUDA 13.0's headers (`nvtxExtImplMem_v1.h`, 63
    // slots, the pinned `nvidia-nvtx` wheel; the H100 runs showed it) and an earlier
    // `nvtxExtImplMem1.h` (16 slots). Segment id 0 (NVTX's development headers): 17 slots
    // indexed by the CBIDs counted from 1, as these constants are.
    let first = usize::from(segment.id == 1);
    if segment.slots.is_null() || segment.slot_count + first <= CBID_REGIONS_UNREGISTER {
        return theirs.unwrap_or(0);
    }
    let ours: [(usize, usize); 6] = [
        (CBID_HEAP_REGISTER, heap_register as *const () as usize),
        (CBID_HEAP_UNREGISTER, heap_unregister as *const () as usize),
        (CBID_HEAP_RESET, heap_reset as *const () as usize),
        (CBID_REGIONS_REGISTER, regions_register as *const () as usize),
        (CBID_REGIONS_RESIZE, regions_resize as *const () as usize),
        (CBID_REGIONS_UNREGISTER, regions_unregister as *const () as usize),
    ];
    for (cbid, f) in ours {
        let slot = segment.slots.add(cbid - first);
        let old = *slot;
        if theirs.is_some_and(|r| r != 0) && !NOT_A_FUNCTION.contains(&old) {
            CHAINED[cbid].store(old as usize, Ordering::Relaxed);
        }
        *slot = f as isize;
    }
    1
}

/// The chained tool's function of `cbid`, if it has one.
fn theirs<F: Copy>(cbid: usize) -> Option<F> {
    // SAFETY: a slot value the chained tool set for this function: its signature.
    unsafe { typed::<F>(CHAINED[cbid].load(Ordering::Relaxed)) }
}

/// The regions of `heap` (every heap's for the process-wide one, 0), taken: a reset or an
/// unregister frees them.
fn take_regions(heap: usize) -> Vec<u64> {
    let mut regions = locks::lock(REGIONS.get());
    let mut taken = Vec::new();
    regions.retain(|&ptr, &mut h| {
        let of_heap = heap == 0 || h == heap;
        if of_heap {
            taken.push(ptr);
        }
        !of_heap
    });
    taken
}

fn free_all(regions: Vec<u64>) {
    for ptr in regions {
        pools::free(ptr, UNKNOWN_STREAM, -1, pools::SOURCE_NVTX);
    }
}

unsafe extern "C" fn heap_register(domain: *const c_void, desc: *const HeapDesc) -> usize {
    type F = unsafe extern "C" fn(*const c_void, *const HeapDesc) -> usize;
    let chained = theirs::<F>(CBID_HEAP_REGISTER).map(|f| f(domain, desc));
    boundary::contain(
        "nvtxMemHeapRegister",
        || {
            let _ = desc;
            chained.unwrap_or_else(|| NEXT_HEAP.fetch_add(1, Ordering::Relaxed))
        },
        || chained.unwrap_or(usize::MAX),
    )
}

unsafe extern "C" fn heap_unregister(domain: *const c_void, heap: usize) {
    type F = unsafe extern "C" fn(*const c_void, usize);
    if let Some(f) = theirs::<F>(CBID_HEAP_UNREGISTER) {
        f(domain, heap);
    }
    boundary::enter("nvtxMemHeapUnregister", || free_all(take_regions(heap)));
}

unsafe extern "C" fn heap_reset(domain: *const c_void, heap: usize) {
    type F = unsafe extern "C" fn(*const c_void, usize);
    if let Some(f) = theirs::<F>(CBID_HEAP_RESET) {
        f(domain, heap);
    }
    boundary::enter("nvtxMemHeapReset", || free_all(take_regions(heap)));
}

/// The virtual ranges of a batch: `count` elements `element_size` apart.
unsafe fn ranges(elements: *const u8, count: usize, element_size: usize) -> Vec<(u64, u64)> {
    if elements.is_null() || element_size < std::mem::size_of::<Range>() {
        return Vec::new();
    }
    (0..count)
        .map(|i| {
            let r = std::ptr::read_unaligned(elements.add(i * element_size) as *const Range);
            (r.ptr, r.size as u64)
        })
        .collect()
}

unsafe extern "C" fn regions_register(domain: *const c_void, desc: *const RegionsRegister) {
    type F = unsafe extern "C" fn(*const c_void, *const RegionsRegister);
    if let Some(f) = theirs::<F>(CBID_REGIONS_REGISTER) {
        f(domain, desc);
    }
    boundary::enter("nvtxMemRegionsRegister", || unsafe {
        let Some(d) = desc.as_ref().filter(|d| d.region_type == TYPE_VIRTUAL_ADDRESS) else { return };
        let (_, device) = crate::driver::current_context();
        let regions = ranges(d.elements, d.count, d.element_size);
        for (i, &(ptr, size)) in regions.iter().enumerate() {
            pools::alloc(ptr, size, UNKNOWN_STREAM, device, pools::SOURCE_NVTX);
            // The region's handle is its pointer, unless the chained tool made its own.
            if !d.handles_out.is_null() && theirs::<F>(CBID_REGIONS_REGISTER).is_none() {
                *d.handles_out.add(i) = ptr as usize;
            }
        }
        locks::lock(REGIONS.get()).extend(regions.iter().map(|r| (r.0, d.heap)));
    });
}

unsafe extern "C" fn regions_resize(domain: *const c_void, desc: *const RegionsResize) {
    type F = unsafe extern "C" fn(*const c_void, *const RegionsResize);
    if let Some(f) = theirs::<F>(CBID_REGIONS_RESIZE) {
        f(domain, desc);
    }
    boundary::enter("nvtxMemRegionsResize", || unsafe {
        let Some(d) = desc.as_ref().filter(|d| d.region_type == TYPE_VIRTUAL_ADDRESS) else { return };
        let (_, device) = crate::driver::current_context();
        // The same block at the same place with its new size: it replaces the old one.
        for (ptr, size) in ranges(d.elements, d.count, d.element_size) {
            pools::alloc(ptr, size, UNKNOWN_STREAM, device, pools::SOURCE_NVTX);
        }
    });
}

unsafe extern "C" fn regions_unregister(domain: *const c_void, desc: *const RegionsUnregister) {
    type F = unsafe extern "C" fn(*const c_void, *const RegionsUnregister);
    if let Some(f) = theirs::<F>(CBID_REGIONS_UNREGISTER) {
        f(domain, desc);
    }
    boundary::enter("nvtxMemRegionsUnregister", || unsafe {
        let Some(d) = desc.as_ref().filter(|d| matches!(d.ref_type, REF_POINTER | REF_HANDLE)) else { return };
        if d.elements.is_null() || d.element_size < 8 {
            return;
        }
        // A pointer or a handle: gpusan's handles are the regions' pointers.
        let refs: Vec<u64> =
            (0..d.count).map(|i| std::ptr::read_unaligned(d.elements.add(i * d.element_size) as *const u64)).collect();
        {
            let mut regions = locks::lock(REGIONS.get());
            refs.iter().for_each(|r| {
                regions.remove(r);
            });
        }
        free_all(refs);
    });
}
