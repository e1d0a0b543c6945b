//! The manager's own handle on the CUDA driver: `libcuda.so.1` loaded at run time (the
//! manager is built on machines without CUDA, and tests load the fake driver of
//! `crates/cli/tests/fake_cuda`), and only the calls the manager makes. Unlike the injected
//! library, nothing here stands in for anything: the manager is the driver's one client.

use std::ffi::{c_int, c_uint, c_ulonglong, c_void};
use std::path::Path;

use thiserror::Error;

pub type CUresult = c_int;
pub type CUdevice = c_int;
pub type CUcontext = *mut c_void;
pub type CUdeviceptr = u64;
/// `CUmemGenericAllocationHandle`.
pub type Handle = u64;

const CUDA_SUCCESS: CUresult = 0;

/// A driver call that failed, and the driver's code.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum DriverError {
    #[error("{call} failed: CUDA error {code}")]
    Call { call: &'static str, code: CUresult },
    #[error("the CUDA driver ({path}) could not be loaded: {why}")]
    Load { path: String, why: String },
}

// The layouts of `CUmemAllocationProp`, `CUmemLocation` and `CUmemAccessDesc` (cuda.h).
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct MemLocation {
    kind: c_uint,
    id: c_int,
}

#[repr(C)]
struct AllocationProp {
    kind: c_uint,
    handle_types: c_uint,
    location: MemLocation,
    win32: *mut c_void,
    flags: [u8; 8],
}

#[repr(C)]
struct AccessDesc {
    location: MemLocation,
    flags: c_uint,
}

const CU_MEM_ALLOCATION_TYPE_PINNED: c_uint = 1;
const CU_MEM_LOCATION_TYPE_DEVICE: c_uint = 1;
const CU_MEM_ACCESS_FLAGS_PROT_READWRITE: c_uint = 3;
const CU_MEM_ALLOC_GRANULARITY_MINIMUM: c_int = 0;

type Init = unsafe extern "C" fn(c_uint) -> CUresult;
type DeviceGet = unsafe extern "C" fn(*mut CUdevice, c_int) -> CUresult;
type PrimaryRetain = unsafe extern "C" fn(*mut CUcontext, CUdevice) -> CUresult;
type CtxSetCurrent = unsafe extern "C" fn(CUcontext) -> CUresult;
type Granularity = unsafe extern "C" fn(*mut usize, *const AllocationProp, c_int) -> CUresult;
type AddressReserve = unsafe extern "C" fn(*mut CUdeviceptr, usize, usize, CUdeviceptr, c_ulonglong) -> CUresult;
type AddressFree = unsafe extern "C" fn(CUdeviceptr, usize) -> CUresult;
type Create = unsafe extern "C" fn(*mut Handle, usize, *const AllocationProp, c_ulonglong) -> CUresult;
type Release = unsafe extern "C" fn(Handle) -> CUresult;
type Map = unsafe extern "C" fn(CUdeviceptr, usize, usize, Handle, c_ulonglong) -> CUresult;
type Unmap = unsafe extern "C" fn(CUdeviceptr, usize) -> CUresult;
type SetAccess = unsafe extern "C" fn(CUdeviceptr, usize, *const AccessDesc, usize) -> CUresult;

/// The driver, loaded, with one device's primary context current on the calling thread.
pub struct Driver {
    device: CUdevice,
    context: CUcontext,
    granularity: u64,
    init: Init,
    ctx_set_current: CtxSetCurrent,
    address_reserve: AddressReserve,
    address_free: AddressFree,
    create: Create,
    release: Release,
    map: Map,
    unmap: Unmap,
    set_access: SetAccess,
    // Last: the functions above point into it.
    _lib: libloading::Library,
}

// SAFETY: the driver's functions may be called from any thread; the context handle is the
// driver's, valid for the process.
unsafe impl Send for Driver {}
unsafe impl Sync for Driver {}

fn check(call: &'static str, code: CUresult) -> Result<(), DriverError> {
    if code == CUDA_SUCCESS {
        Ok(())
    } else {
        Err(DriverError::Call { call, code })
    }
}

impl Driver {
    /// Loads the driver at `path` (`libcuda.so.1` to let the loader find it), initialises
    /// it and makes device `ordinal`'s primary context current.
    pub fn open(path: &Path, ordinal: c_int) -> Result<Driver, DriverError> {
        let load = |why: String| DriverError::Load { path: path.display().to_string(), why };
        // SAFETY: loading the CUDA driver runs its initialisers, which have no preconditions.
        let lib = unsafe { libloading::Library::new(path) }.map_err(|e| load(e.to_string()))?;
        macro_rules! sym {
            ($name:literal, $ty:ty) => {{
                // SAFETY: the symbol has this signature in cuda.h.
                let s: libloading::Symbol<$ty> =
                    unsafe { lib.get(concat!($name, "\0").as_bytes()) }.map_err(|e| load(e.to_string()))?;
                *s
            }};
        }
        let init = sym!("cuInit", Init);
        let device_get = sym!("cuDeviceGet", DeviceGet);
        let primary_retain = sym!("cuDevicePrimaryCtxRetain", PrimaryRetain);
        let granularity = sym!("cuMemGetAllocationGranularity", Granularity);
        let mut d = Driver {
            device: 0,
            context: std::ptr::null_mut(),
            granularity: 0,
            init,
            ctx_set_current: sym!("cuCtxSetCurrent", CtxSetCurrent),
            address_reserve: sym!("cuMemAddressReserve", AddressReserve),
            address_free: sym!("cuMemAddressFree", AddressFree),
            create: sym!("cuMemCreate", Create),
            release: sym!("cuMemRelease", Release),
            map: sym!("cuMemMap", Map),
            unmap: sym!("cuMemUnmap", Unmap),
            set_access: sym!("cuMemSetAccess", SetAccess),
            _lib: lib,
        };
        // SAFETY: out-parameters of ours; the functions are the driver's.
        unsafe {
            check("cuInit", (d.init)(0))?;
            check("cuDeviceGet", device_get(&mut d.device, ordinal))?;
            check("cuDevicePrimaryCtxRetain", primary_retain(&mut d.context, d.device))?;
            d.make_current()?;
            let prop = d.prop();
            let mut g = 0usize;
            check("cuMemGetAllocationGranularity", granularity(&mut g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM))?;
            d.granularity = g as u64;
        }
        Ok(d)
    }

    /// Makes the manager's context current on the calling thread (each thread of the
    /// manager's that calls the driver).
    pub fn make_current(&self) -> Result<(), DriverError> {
        // SAFETY: the primary context retained in `open`.
        check("cuCtxSetCurrent", unsafe { (self.ctx_set_current)(self.context) })
    }

    /// The driver's granularity of physical allocations and mappings.
    pub fn granularity(&self) -> u64 {
        self.granularity
    }

    fn prop(&self) -> AllocationProp {
        AllocationProp {
            kind: CU_MEM_ALLOCATION_TYPE_PINNED,
            handle_types: 0,
            location: MemLocation { kind: CU_MEM_LOCATION_TYPE_DEVICE, id: self.device },
            win32: std::ptr::null_mut(),
            flags: [0; 8],
        }
    }

    /// Reserves `size` bytes of virtual address space aligned to `alignment`.
    pub fn reserve(&self, size: u64, alignment: u64) -> Result<CUdeviceptr, DriverError> {
        let mut at = 0;
        // SAFETY: an out-parameter of ours.
        check("cuMemAddressReserve", unsafe {
            (self.address_reserve)(&mut at, size as usize, alignment as usize, 0, 0)
        })?;
        Ok(at)
    }

    pub fn free_reservation(&self, at: CUdeviceptr, size: u64) -> Result<(), DriverError> {
        // SAFETY: a reservation of ours, all of it unmapped by the caller.
        check("cuMemAddressFree", unsafe { (self.address_free)(at, size as usize) })
    }

    /// `size` bytes of physical memory on the device.
    pub fn create(&self, size: u64) -> Result<Handle, DriverError> {
        let prop = self.prop();
        let mut h = 0;
        // SAFETY: an out-parameter and a property of ours.
        check("cuMemCreate", unsafe { (self.create)(&mut h, size as usize, &prop, 0) })?;
        Ok(h)
    }

    pub fn release(&self, handle: Handle) -> Result<(), DriverError> {
        // SAFETY: a handle of ours; its memory stays until its last mapping goes.
        check("cuMemRelease", unsafe { (self.release)(handle) })
    }

    /// Maps all of `handle` (`size` bytes) at `at`, readable and writable from the device.
    pub fn map(&self, at: CUdeviceptr, size: u64, handle: Handle) -> Result<(), DriverError> {
        // SAFETY: a range of a reservation of ours, unmapped, and a handle of ours.
        check("cuMemMap", unsafe { (self.map)(at, size as usize, 0, handle, 0) })?;
        let access = AccessDesc { location: self.prop().location, flags: CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
        // SAFETY: the range just mapped.
        let opened = check("cuMemSetAccess", unsafe { (self.set_access)(at, size as usize, &access, 1) });
        if opened.is_err() {
            let _ = self.unmap(at, size);
        }
        opened
    }

    pub fn unmap(&self, at: CUdeviceptr, size: u64) -> Result<(), DriverError> {
        // SAFETY: a mapping of ours, exactly.
        check("cuMemUnmap", unsafe { (self.unmap)(at, size as usize) })
    }
}
