//! The manager's own handle on the CUDA driver: `libcuda.so.1` loaded at run time (the
//! manager is built on machines without CUDA, and tests load the fake driver of
//! `crates/cli/tests/fake_cuda`), and only the calls the manager makes. Unlike the injected
//! library, nothing here stands in for anything: the manager is the driver's one client.

use std::ffi::{c_char, c_int, c_uint, c_ulonglong, c_void, CStr};
use std::path::Path;

use thiserror::Error;

pub type CUresult = c_int;
pub type CUdevice = c_int;
pub type CUcontext = *mut c_void;
pub type CUdeviceptr = u64;
/// `CUmemGenericAllocationHandle`.
pub type Handle = u64;

const CUDA_SUCCESS: CUresult = 0;
const CUDA_ERROR_NOT_READY: CUresult = 600;

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
type ModuleLoadData = unsafe extern "C" fn(*mut *mut c_void, *const c_void) -> CUresult;
type ModuleUnload = unsafe extern "C" fn(*mut c_void) -> CUresult;
type ModuleGetFunction = unsafe extern "C" fn(*mut *mut c_void, *mut c_void, *const c_char) -> CUresult;
type ModuleGetGlobal = unsafe extern "C" fn(*mut CUdeviceptr, *mut usize, *mut c_void, *const c_char) -> CUresult;
type CopyHtoD = unsafe extern "C" fn(CUdeviceptr, *const c_void, usize, *mut c_void) -> CUresult;
type CopyDtoH = unsafe extern "C" fn(*mut c_void, CUdeviceptr, usize, *mut c_void) -> CUresult;
type MemsetD8 = unsafe extern "C" fn(CUdeviceptr, u8, usize, *mut c_void) -> CUresult;
type MemsetD32 = unsafe extern "C" fn(CUdeviceptr, c_uint, usize, *mut c_void) -> CUresult;
type StreamCreate = unsafe extern "C" fn(*mut *mut c_void, c_uint) -> CUresult;
type StreamQuery = unsafe extern "C" fn(*mut c_void) -> CUresult;
type CopyDtoD = unsafe extern "C" fn(CUdeviceptr, CUdeviceptr, usize, *mut c_void) -> CUresult;
type HostRegister = unsafe extern "C" fn(*mut c_void, usize, c_uint) -> CUresult;
type HostUnregister = unsafe extern "C" fn(*mut c_void) -> CUresult;
type EventCreate = unsafe extern "C" fn(*mut *mut c_void, c_uint) -> CUresult;
type EventRecord = unsafe extern "C" fn(*mut c_void, *mut c_void) -> CUresult;
type EventOne = unsafe extern "C" fn(*mut c_void) -> CUresult;
type EventElapsed = unsafe extern "C" fn(*mut f32, *mut c_void, *mut c_void) -> CUresult;
type DeviceAttribute = unsafe extern "C" fn(*mut c_int, c_int, CUdevice) -> CUresult;
type DeviceName = unsafe extern "C" fn(*mut c_char, c_int, CUdevice) -> CUresult;
type DriverVersion = unsafe extern "C" fn(*mut c_int) -> CUresult;
type StreamDestroy = unsafe extern "C" fn(*mut c_void) -> CUresult;
type StreamSynchronize = unsafe extern "C" fn(*mut c_void) -> CUresult;
type TensorMapEncodeTiled = unsafe extern "C" fn(
    *mut c_void,
    c_uint,
    c_uint,
    *mut c_void,
    *const u64,
    *const u64,
    *const c_uint,
    *const c_uint,
    c_int,
    c_int,
    c_int,
    c_int,
) -> CUresult;
type TensorMapEncodeIm2col = unsafe extern "C" fn(
    *mut c_void,
    c_uint,
    c_uint,
    *mut c_void,
    *const u64,
    *const u64,
    *const c_int,
    *const c_int,
    c_uint,
    c_uint,
    *const c_uint,
    c_int,
    c_int,
    c_int,
    c_int,
) -> CUresult;
type LaunchKernel = unsafe extern "C" fn(
    *mut c_void,
    c_uint,
    c_uint,
    c_uint,
    c_uint,
    c_uint,
    c_uint,
    c_uint,
    *mut c_void,
    *mut *mut c_void,
    *mut *mut c_void,
) -> CUresult;

/// A handle of the driver's (module, function, stream) as the manager keeps it.
pub type Raw = u64;

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
    module_load_data: ModuleLoadData,
    module_unload: ModuleUnload,
    module_get_function: ModuleGetFunction,
    module_get_global: ModuleGetGlobal,
    copy_htod: CopyHtoD,
    copy_dtoh: CopyDtoH,
    memset_d8: MemsetD8,
    memset_d32: MemsetD32,
    stream_create: StreamCreate,
    stream_query: StreamQuery,
    copy_dtod: CopyDtoD,
    host_register: HostRegister,
    host_unregister: HostUnregister,
    event_create: EventCreate,
    event_record: EventRecord,
    event_synchronize: EventOne,
    event_query: EventOne,
    event_destroy: EventOne,
    event_elapsed: EventElapsed,
    device_attribute: DeviceAttribute,
    device_name: DeviceName,
    driver_version: DriverVersion,
    stream_destroy: StreamDestroy,
    stream_synchronize: StreamSynchronize,
    launch_kernel: LaunchKernel,
    /// `None` with a driver before CUDA 12 (no tensor maps).
    tensor_map_encode_tiled: Option<TensorMapEncodeTiled>,
    tensor_map_encode_im2col: Option<TensorMapEncodeIm2col>,
    // Last: the functions above point into it.
    _lib: libloading::Library,
}

// SAFETY: the driver's functions may be called from any thread; the context handle is the
// driver's, valid for the process.
unsafe impl Send for Driver {}
unsafe impl Sync for Driver {}

/// A tensor map an encode call (`encode`, given where to write) made: the driver writes a
/// `CUtensorMap`, 128 bytes aligned to 64.
fn encoded_map(call: &'static str, encode: impl FnOnce(*mut c_void) -> CUresult) -> Result<[u8; 128], DriverError> {
    #[repr(C, align(64))]
    struct Map([u8; 128]);
    let mut out = Map([0; 128]);
    check(call, encode(out.0.as_mut_ptr().cast()))?;
    Ok(out.0)
}

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
            module_load_data: sym!("cuModuleLoadData", ModuleLoadData),
            module_unload: sym!("cuModuleUnload", ModuleUnload),
            module_get_function: sym!("cuModuleGetFunction", ModuleGetFunction),
            module_get_global: sym!("cuModuleGetGlobal_v2", ModuleGetGlobal),
            copy_htod: sym!("cuMemcpyHtoDAsync_v2", CopyHtoD),
            copy_dtoh: sym!("cuMemcpyDtoHAsync_v2", CopyDtoH),
            memset_d8: sym!("cuMemsetD8Async", MemsetD8),
            memset_d32: sym!("cuMemsetD32Async", MemsetD32),
            stream_create: sym!("cuStreamCreate", StreamCreate),
            stream_query: sym!("cuStreamQuery", StreamQuery),
            copy_dtod: sym!("cuMemcpyDtoDAsync_v2", CopyDtoD),
            host_register: sym!("cuMemHostRegister_v2", HostRegister),
            host_unregister: sym!("cuMemHostUnregister", HostUnregister),
            event_create: sym!("cuEventCreate", EventCreate),
            event_record: sym!("cuEventRecord", EventRecord),
            event_synchronize: sym!("cuEventSynchronize", EventOne),
            event_query: sym!("cuEventQuery", EventOne),
            event_destroy: sym!("cuEventDestroy_v2", EventOne),
            event_elapsed: sym!("cuEventElapsedTime_v2", EventElapsed),
            device_attribute: sym!("cuDeviceGetAttribute", DeviceAttribute),
            device_name: sym!("cuDeviceGetName", DeviceName),
            driver_version: sym!("cuDriverGetVersion", DriverVersion),
            stream_destroy: sym!("cuStreamDestroy_v2", StreamDestroy),
            stream_synchronize: sym!("cuStreamSynchronize", StreamSynchronize),
            launch_kernel: sym!("cuLaunchKernel", LaunchKernel),
            // SAFETY: the symbol has this signature in cuda.h.
            tensor_map_encode_tiled: unsafe { lib.get::<TensorMapEncodeTiled>(b"cuTensorMapEncodeTiled\0") }
                .ok()
                .map(|s| *s),
            // SAFETY: the symbol has this signature in cuda.h.
            tensor_map_encode_im2col: unsafe { lib.get::<TensorMapEncodeIm2col>(b"cuTensorMapEncodeIm2col\0") }
                .ok()
                .map(|s| *s),
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

    /// Loads a module image (NUL-terminated PTX or machine code).
    pub fn module_load(&self, image: &[u8]) -> Result<Raw, DriverError> {
        let mut m = std::ptr::null_mut();
        // SAFETY: an out-parameter of ours; the image is the caller's, NUL-terminated if text.
        check("cuModuleLoadData", unsafe { (self.module_load_data)(&mut m, image.as_ptr().cast()) })?;
        Ok(m as Raw)
    }

    pub fn module_unload(&self, module: Raw) -> Result<(), DriverError> {
        // SAFETY: a module this driver loaded.
        check("cuModuleUnload", unsafe { (self.module_unload)(module as *mut c_void) })
    }

    pub fn function(&self, module: Raw, name: &CStr) -> Result<Raw, DriverError> {
        let mut f = std::ptr::null_mut();
        // SAFETY: an out-parameter of ours, a loaded module, a NUL-terminated name.
        check("cuModuleGetFunction", unsafe {
            (self.module_get_function)(&mut f, module as *mut c_void, name.as_ptr())
        })?;
        Ok(f as Raw)
    }

    /// The address and size of a module's variable.
    pub fn global(&self, module: Raw, name: &CStr) -> Result<(CUdeviceptr, u64), DriverError> {
        let (mut at, mut size) = (0, 0usize);
        // SAFETY: out-parameters of ours, a loaded module, a NUL-terminated name.
        check("cuModuleGetGlobal", unsafe {
            (self.module_get_global)(&mut at, &mut size, module as *mut c_void, name.as_ptr())
        })?;
        Ok((at, size as u64))
    }

    // Copies and sets go on the tenant's stream, behind the kernels it launched before: the
    // tenant's program made them on its legacy stream, which orders them so; the manager's
    // legacy stream would not (the tenant's stream does not wait for it). A copy returns
    // when it is done, as the synchronous call the tenant made does.

    /// Copies `data` to `dst` on `stream`, after the work queued there; returns when done.
    pub fn copy_htod(&self, dst: CUdeviceptr, data: &[u8], stream: Raw) -> Result<(), DriverError> {
        // SAFETY: the caller checked `dst`'s range is device memory of the tenant's; `data`
        // stays alive until the stream has finished with it.
        check("cuMemcpyHtoDAsync", unsafe {
            (self.copy_htod)(dst, data.as_ptr().cast(), data.len(), stream as *mut c_void)
        })?;
        self.stream_synchronize(stream)
    }

    /// Copies from `src` into `out` on `stream`, after the work queued there; returns when
    /// done.
    pub fn copy_dtoh(&self, out: &mut [u8], src: CUdeviceptr, stream: Raw) -> Result<(), DriverError> {
        // SAFETY: as above, for `src`; `out` stays borrowed until the stream is done.
        check("cuMemcpyDtoHAsync", unsafe {
            (self.copy_dtoh)(out.as_mut_ptr().cast(), src, out.len(), stream as *mut c_void)
        })?;
        self.stream_synchronize(stream)
    }

    /// Sets `count` bytes at `dst` on `stream`, in order with the tenant's other work.
    pub fn memset_d8(&self, dst: CUdeviceptr, value: u8, count: u64, stream: Raw) -> Result<(), DriverError> {
        // SAFETY: as above.
        check("cuMemsetD8Async", unsafe { (self.memset_d8)(dst, value, count as usize, stream as *mut c_void) })
    }

    /// Copies `len` bytes from `src` to `dst` on `stream`, after the work queued there.
    pub fn copy_dtod(&self, dst: CUdeviceptr, src: CUdeviceptr, len: u64, stream: Raw) -> Result<(), DriverError> {
        // SAFETY: the caller checked both ranges are device memory it may copy.
        check("cuMemcpyDtoDAsync", unsafe { (self.copy_dtod)(dst, src, len as usize, stream as *mut c_void) })
    }

    /// Pins `len` bytes at `at` for the GPU's copies (a tenant's shared segment).
    ///
    /// # Safety
    /// `at..at + len` must stay mapped until [`Driver::host_unregister`].
    pub unsafe fn host_register(&self, at: *mut u8, len: usize) -> Result<(), DriverError> {
        check("cuMemHostRegister", (self.host_register)(at.cast(), len, 0))
    }

    /// Unpins what [`Driver::host_register`] pinned at `at`.
    pub fn host_unregister(&self, at: *mut u8) -> Result<(), DriverError> {
        // SAFETY: memory this driver registered.
        check("cuMemHostUnregister", unsafe { (self.host_unregister)(at.cast()) })
    }

    /// Copies `len` bytes from host memory at `src` to `dst` on `stream`; returns when done.
    ///
    /// # Safety
    /// `src..src + len` must be readable (pinned: the tenant's segment).
    pub unsafe fn copy_htod_from(
        &self,
        dst: CUdeviceptr,
        src: *const u8,
        len: usize,
        stream: Raw,
    ) -> Result<(), DriverError> {
        check("cuMemcpyHtoDAsync", (self.copy_htod)(dst, src.cast(), len, stream as *mut c_void))?;
        self.stream_synchronize(stream)
    }

    /// Copies `len` bytes from `src` into host memory at `out` on `stream`; returns when done.
    ///
    /// # Safety
    /// `out..out + len` must be writable (pinned: the tenant's segment).
    pub unsafe fn copy_dtoh_into(
        &self,
        out: *mut u8,
        src: CUdeviceptr,
        len: usize,
        stream: Raw,
    ) -> Result<(), DriverError> {
        check("cuMemcpyDtoHAsync", (self.copy_dtoh)(out.cast(), src, len, stream as *mut c_void))?;
        self.stream_synchronize(stream)
    }

    /// Sets `count` 32-bit words at `dst` on `stream`, in order with the tenant's other work.
    pub fn memset_d32(&self, dst: CUdeviceptr, value: u32, count: u64, stream: Raw) -> Result<(), DriverError> {
        // SAFETY: as for `memset_d8`.
        check("cuMemsetD32Async", unsafe { (self.memset_d32)(dst, value, count as usize, stream as *mut c_void) })
    }

    /// Whether `stream`'s work is done: `Ok(true)`, `Ok(false)` while it runs.
    pub fn stream_query(&self, stream: Raw) -> Result<bool, DriverError> {
        // SAFETY: a stream of ours.
        match unsafe { (self.stream_query)(stream as *mut c_void) } {
            CUDA_ERROR_NOT_READY => Ok(false),
            code => check("cuStreamQuery", code).map(|()| true),
        }
    }

    pub fn event_create(&self, flags: u32) -> Result<Raw, DriverError> {
        let mut e = std::ptr::null_mut();
        // SAFETY: an out-parameter of ours.
        check("cuEventCreate", unsafe { (self.event_create)(&mut e, flags) })?;
        Ok(e as Raw)
    }

    pub fn event_record(&self, event: Raw, stream: Raw) -> Result<(), DriverError> {
        // SAFETY: an event and a stream of ours.
        check("cuEventRecord", unsafe { (self.event_record)(event as *mut c_void, stream as *mut c_void) })
    }

    pub fn event_synchronize(&self, event: Raw) -> Result<(), DriverError> {
        // SAFETY: an event of ours.
        check("cuEventSynchronize", unsafe { (self.event_synchronize)(event as *mut c_void) })
    }

    /// Whether the work before `event`'s record is done.
    pub fn event_query(&self, event: Raw) -> Result<bool, DriverError> {
        // SAFETY: an event of ours.
        match unsafe { (self.event_query)(event as *mut c_void) } {
            CUDA_ERROR_NOT_READY => Ok(false),
            code => check("cuEventQuery", code).map(|()| true),
        }
    }

    pub fn event_destroy(&self, event: Raw) -> Result<(), DriverError> {
        // SAFETY: an event of ours, not used again.
        check("cuEventDestroy", unsafe { (self.event_destroy)(event as *mut c_void) })
    }

    pub fn event_elapsed(&self, start: Raw, end: Raw) -> Result<f32, DriverError> {
        let mut ms = 0f32;
        // SAFETY: an out-parameter of ours, two events of ours.
        check("cuEventElapsedTime", unsafe {
            (self.event_elapsed)(&mut ms, start as *mut c_void, end as *mut c_void)
        })?;
        Ok(ms)
    }

    /// `cuTensorMapEncodeTiled` on `m`: the 128-byte map. The lengths of `m`'s arrays are
    /// the caller's to have checked against its rank (`dims`' length).
    pub fn tensor_map_encode_tiled(&self, m: &crate::protocol::TiledMap) -> Result<[u8; 128], DriverError> {
        const NAME: &str = "cuTensorMapEncodeTiled";
        // 801: CUDA_ERROR_NOT_SUPPORTED.
        let f = self.tensor_map_encode_tiled.ok_or(DriverError::Call { call: NAME, code: 801 })?;
        let rank = m.dims.len();
        if rank == 0 || m.strides.len() + 1 != rank || m.box_dim.len() != rank || m.element_strides.len() != rank {
            // 1: CUDA_ERROR_INVALID_VALUE.
            return Err(DriverError::Call { call: NAME, code: 1 });
        }
        // SAFETY: arrays of the lengths the rank says, checked above.
        encoded_map(NAME, |out| unsafe {
            f(
                out,
                m.data_type,
                rank as c_uint,
                m.address as *mut c_void,
                m.dims.as_ptr(),
                m.strides.as_ptr(),
                m.box_dim.as_ptr(),
                m.element_strides.as_ptr(),
                m.interleave,
                m.swizzle,
                m.l2_promotion,
                m.oob_fill,
            )
        })
    }

    /// `cuTensorMapEncodeIm2col` on `m`: the 128-byte map. The lengths of `m`'s arrays are
    /// checked against its rank (`dims`' length, 3 to 5).
    pub fn tensor_map_encode_im2col(&self, m: &crate::protocol::Im2colMap) -> Result<[u8; 128], DriverError> {
        const NAME: &str = "cuTensorMapEncodeIm2col";
        let f = self.tensor_map_encode_im2col.ok_or(DriverError::Call { call: NAME, code: 801 })?;
        let rank = m.dims.len();
        let corners = rank.saturating_sub(2);
        if !(3..=5).contains(&rank)
            || m.strides.len() + 1 != rank
            || m.lower.len() != corners
            || m.upper.len() != corners
            || m.element_strides.len() != rank
        {
            return Err(DriverError::Call { call: NAME, code: 1 });
        }
        // SAFETY: arrays of the lengths the rank says, checked above.
        encoded_map(NAME, |out| unsafe {
            f(
                out,
                m.data_type,
                rank as c_uint,
                m.address as *mut c_void,
                m.dims.as_ptr(),
                m.strides.as_ptr(),
                m.lower.as_ptr(),
                m.upper.as_ptr(),
                m.channels,
                m.pixels,
                m.element_strides.as_ptr(),
                m.interleave,
                m.swizzle,
                m.l2_promotion,
                m.oob_fill,
            )
        })
    }

    pub fn device_attribute(&self, attribute: i32) -> Result<i64, DriverError> {
        let mut v: c_int = 0;
        // SAFETY: an out-parameter of ours; the driver checks the attribute.
        check("cuDeviceGetAttribute", unsafe { (self.device_attribute)(&mut v, attribute, self.device) })?;
        Ok(i64::from(v))
    }

    pub fn device_name(&self) -> Result<String, DriverError> {
        let mut buf = [0 as c_char; 256];
        // SAFETY: a buffer of ours of the length given.
        check("cuDeviceGetName", unsafe { (self.device_name)(buf.as_mut_ptr(), buf.len() as c_int, self.device) })?;
        buf[buf.len() - 1] = 0;
        // SAFETY: NUL-terminated (its last byte at the latest).
        Ok(unsafe { CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned())
    }

    pub fn driver_version(&self) -> Result<i64, DriverError> {
        let mut v: c_int = 0;
        // SAFETY: an out-parameter of ours.
        check("cuDriverGetVersion", unsafe { (self.driver_version)(&mut v) })?;
        Ok(i64::from(v))
    }

    /// A non-blocking stream (it never waits for the legacy stream, which other tenants'
    /// work may use).
    pub fn stream_create(&self) -> Result<Raw, DriverError> {
        let mut s = std::ptr::null_mut();
        // SAFETY: an out-parameter of ours. 1: CU_STREAM_NON_BLOCKING.
        check("cuStreamCreate", unsafe { (self.stream_create)(&mut s, 1) })?;
        Ok(s as Raw)
    }

    pub fn stream_destroy(&self, stream: Raw) -> Result<(), DriverError> {
        // SAFETY: a stream of ours.
        check("cuStreamDestroy", unsafe { (self.stream_destroy)(stream as *mut c_void) })
    }

    pub fn stream_synchronize(&self, stream: Raw) -> Result<(), DriverError> {
        // SAFETY: a stream of ours.
        check("cuStreamSynchronize", unsafe { (self.stream_synchronize)(stream as *mut c_void) })
    }

    /// Launches `function` on `stream` with `params`, pointers to each parameter's bytes.
    pub fn launch(
        &self,
        function: Raw,
        grid: [u32; 3],
        block: [u32; 3],
        shared: u32,
        stream: Raw,
        params: &mut [*mut c_void],
    ) -> Result<(), DriverError> {
        // SAFETY: a function of ours; `params` point at buffers laid out as the kernel's
        // parameters, alive for the call (the driver copies them).
        check("cuLaunchKernel", unsafe {
            (self.launch_kernel)(
                function as *mut c_void,
                grid[0],
                grid[1],
                grid[2],
                block[0],
                block[1],
                block[2],
                shared,
                stream as *mut c_void,
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        })
    }
}
