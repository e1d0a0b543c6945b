//! Where one context's allocation table lives in device memory, and how it grows.
//!
//! Layout: `[lookup cache: LOOKUP_CACHE_BYTES][header: 32 B][entries: 32 B each]`; a
//! module's `__gpusan_table` points at the header. Kernels read the table while the
//! program runs, so memory a module may still point at is never freed.
//!
//! Preferred: the driver's virtual memory management. Each context reserves one virtual
//! range, once, with room for [`RESERVED_ENTRIES`] entries (`cuMemAddressReserve`: address
//! space only, no memory), and maps physical memory at the end of what is mapped as the
//! table grows, in multiples of the allocation granularity (`cuMemCreate` pinned on the
//! context's device, `cuMemMap`, `cuMemSetAccess` read/write for that device). The table
//! never moves: modules are pointed once, nothing is abandoned, and the memory held is the
//! cache, header and entries rounded up to a granule (2 MiB on current GPUs), i.e. at most
//! 32 B × entries + cache + header + one granule.
//!
//! Fallback, when a VMM call fails (a driver or device without it, memory exhausted, a
//! table past the reservation): `cuMemAlloc` buffers of the cache plus a power of two bytes. Outgrowing
//! one allocates the next and moves the table; the outgrown buffer (or the reservation's
//! mapped memory) stays held, since a kernel running on another stream may still read it.
//! [`TableMemory::held_bytes`] counts all of it, and the report shows the sum.
//!
//! Physical memory is not unmapped when the table shrinks, for the same reason: memory
//! follows the peak entry count, not the current one.
//!
//! Every driver call goes through [`capture::relaxed`] (growth can happen while another
//! stream captures) and through [`crate::driver::real`], so none of them reaches gpusan's own
//! hooks of the program's `cuMemMap`/`cuMemUnmap`. Nothing here panics: a failed call falls back.

use gpusan_abi::table::{table_bytes, LOOKUP_CACHE_BYTES};

use crate::capture;
use crate::driver::{real, MemAccessDesc, MemAllocationProp, MemLocation, CUDA_SUCCESS};

/// Entries the reserved range has room for (2 GiB of entries, far beyond the allocation
/// counts of real programs; address space only). A larger table moves to `cuMemAlloc`.
const RESERVED_ENTRIES: u64 = 1 << 26;
/// Entries the first `cuMemAlloc` buffer of the fallback has room for.
const MIN_BUFFER_ENTRIES: u64 = 1024;

// cuda.h enumerators.
const ALLOCATION_TYPE_PINNED: u32 = 1;
const LOCATION_TYPE_DEVICE: u32 = 1;
const ACCESS_PROT_READWRITE: u32 = 3;
const ALLOC_GRANULARITY_MINIMUM: u32 = 0;

/// Pinned device memory on `device`.
fn pinned_on(device: i32) -> MemAllocationProp {
    MemAllocationProp {
        kind: ALLOCATION_TYPE_PINNED,
        requested_handle_types: 0,
        location: MemLocation { kind: LOCATION_TYPE_DEVICE, id: device },
        win32_handle_meta_data: std::ptr::null_mut(),
        alloc_flags: [0; 8],
    }
}

fn round_up(n: u64, to: u64) -> u64 {
    n.div_ceil(to) * to
}

/// A reserved range; `[base, base + mapped)` is backed by memory.
struct Reservation {
    base: u64,
    size: u64,
    mapped: u64,
    granule: u64,
}

enum Place {
    Nowhere,
    Reserved(Reservation),
    Buffer { ptr: u64, bytes: u64 },
}

/// Where the table is after [`TableMemory::fit`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placed {
    /// The header's address (what `__gpusan_table` holds).
    pub table: u64,
    /// The table is at a new address (its first placement included): every module must be
    /// pointed at it and the whole table uploaded.
    pub moved: bool,
}

/// One context's table memory.
pub struct TableMemory {
    place: Place,
    device: i32,
    held: u64,
    moves: u64,
}

impl TableMemory {
    /// Nothing allocated yet; memory comes from `device` (the context's).
    pub fn new(device: i32) -> Self {
        TableMemory { place: Place::Nowhere, device, held: 0, moves: 0 }
    }

    /// The header's address, 0 before the first placement.
    pub fn table(&self) -> u64 {
        match &self.place {
            Place::Nowhere => 0,
            Place::Reserved(r) => r.base + LOOKUP_CACHE_BYTES,
            Place::Buffer { ptr, .. } => ptr + LOOKUP_CACHE_BYTES,
        }
    }

    /// Device bytes held for the table: memory mapped into the reservation and every
    /// `cuMemAlloc` buffer, outgrown ones included.
    pub fn held_bytes(&self) -> u64 {
        self.held
    }

    /// Times the table moved after its first placement (each move leaves memory held).
    pub fn moves(&self) -> u64 {
        self.moves
    }

    /// Makes room for a table of `bytes` (header and entries); `None` if no memory could
    /// be had (the table stays where it was, as it was).
    pub fn fit(&mut self, bytes: u64) -> Option<Placed> {
        let need = LOOKUP_CACHE_BYTES.checked_add(bytes)?;
        match &mut self.place {
            Place::Reserved(r) if need <= r.mapped => return Some(Placed { table: self.table(), moved: false }),
            Place::Reserved(r) => {
                if need <= r.size {
                    if let Some(added) = unsafe { map_more(r, need, self.device) } {
                        self.held += added;
                        return Some(Placed { table: self.table(), moved: false });
                    }
                }
            }
            Place::Buffer { bytes, .. } if need <= *bytes => return Some(Placed { table: self.table(), moved: false }),
            Place::Buffer { .. } => {}
            Place::Nowhere => {
                if let Some(r) = unsafe { reserve(need, self.device) } {
                    self.held += r.mapped;
                    self.place = Place::Reserved(r);
                    return Some(Placed { table: self.table(), moved: true });
                }
            }
        }
        // The header and entries double; the cache in front of them stays its size.
        let floor = table_bytes(MIN_BUFFER_ENTRIES).next_power_of_two();
        let size = LOOKUP_CACHE_BYTES + bytes.checked_next_power_of_two()?.max(floor);
        let ptr = unsafe { mem_alloc(size) }?;
        if !matches!(self.place, Place::Nowhere) {
            self.moves += 1;
        }
        self.held += size;
        self.place = Place::Buffer { ptr, bytes: size };
        Some(Placed { table: self.table(), moved: true })
    }
}

/// Reserves the range and maps its first `need` bytes (rounded up to the granularity).
unsafe fn reserve(need: u64, device: i32) -> Option<Reservation> {
    let granule = granularity(device).filter(|&g| g > 0)?;
    let size = round_up(LOOKUP_CACHE_BYTES + table_bytes(RESERVED_ENTRIES), granule);
    if need > size {
        return None;
    }
    let base = address_reserve(size, granule)?;
    let mut r = Reservation { base, size, mapped: 0, granule };
    if map_more(&mut r, need, device).is_none() {
        address_free(base, size);
        return None;
    }
    Some(r)
}

/// Maps memory behind what is mapped, up to `need` bytes from the base rounded up to the
/// granularity; the bytes added.
unsafe fn map_more(r: &mut Reservation, need: u64, device: i32) -> Option<u64> {
    let to = round_up(need, r.granule).min(r.size);
    let (at, bytes) = (r.base + r.mapped, to.checked_sub(r.mapped).filter(|&b| b > 0)?);
    let handle = mem_create(bytes, device)?;
    let mapped = mem_map(at, bytes, handle);
    // The mapping keeps the memory alive; released now, it goes back at the unmap.
    mem_release(handle);
    if !mapped {
        return None;
    }
    if !set_access(at, bytes, device) {
        mem_unmap(at, bytes);
        return None;
    }
    r.mapped = to;
    Some(bytes)
}

/// Calls the real driver function `$f` (from [`real`]) in the relaxed capture mode; `None` if
/// the driver lacks it.
macro_rules! relaxed_call {
    ($f:ident($($value:expr),*)) => {
        real::$f().map(|f| capture::relaxed(|| f($($value),*)))
    };
}

unsafe fn granularity(device: i32) -> Option<u64> {
    let prop = pinned_on(device);
    let mut g = 0usize;
    let r = relaxed_call!(cuMemGetAllocationGranularity(&mut g, &prop, ALLOC_GRANULARITY_MINIMUM));
    (r == Some(CUDA_SUCCESS)).then_some(g as u64)
}

unsafe fn address_reserve(size: u64, alignment: u64) -> Option<u64> {
    let mut p = 0u64;
    let r = relaxed_call!(cuMemAddressReserve(&mut p, size as usize, alignment as usize, 0, 0));
    (r == Some(CUDA_SUCCESS) && p != 0).then_some(p)
}

unsafe fn address_free(base: u64, size: u64) {
    relaxed_call!(cuMemAddressFree(base, size as usize));
}

unsafe fn mem_create(bytes: u64, device: i32) -> Option<u64> {
    let prop = pinned_on(device);
    let mut handle = 0u64;
    let r = relaxed_call!(cuMemCreate(&mut handle, bytes as usize, &prop, 0));
    (r == Some(CUDA_SUCCESS)).then_some(handle)
}

unsafe fn mem_release(handle: u64) {
    relaxed_call!(cuMemRelease(handle));
}

unsafe fn mem_map(at: u64, bytes: u64, handle: u64) -> bool {
    relaxed_call!(cuMemMap(at, bytes as usize, 0, handle, 0)) == Some(CUDA_SUCCESS)
}

unsafe fn mem_unmap(at: u64, bytes: u64) {
    relaxed_call!(cuMemUnmap(at, bytes as usize));
}

unsafe fn set_access(at: u64, bytes: u64, device: i32) -> bool {
    let desc = MemAccessDesc {
        location: MemLocation { kind: LOCATION_TYPE_DEVICE, id: device },
        flags: ACCESS_PROT_READWRITE,
    };
    relaxed_call!(cuMemSetAccess(at, bytes as usize, &desc, 1)) == Some(CUDA_SUCCESS)
}

unsafe fn mem_alloc(bytes: u64) -> Option<u64> {
    let mut p = 0u64;
    let r = relaxed_call!(cuMemAlloc_v2(&mut p, bytes as usize));
    (r == Some(CUDA_SUCCESS)).then_some(p)
}
