//! The forwarding functions: each has the signature of the driver function it stands for
//! and turns its call into a request to the manager (`client`). Out-parameters are written
//! only on success, as the driver does. Copies larger than a frame go in pieces.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use gpusan_runtime::locks;
use gpusan_serve::protocol::{Reply, Request, MAX_CHUNK};

use super::client::{self, call};
use crate::driver::types::{
    CUcontext, CUdevice, CUdeviceptr, CUevent, CUfunction, CUmodule, CUresult, CUstream, CUDA_SUCCESS,
};
use crate::driver::{boundary, peek};

const INVALID_VALUE: CUresult = 1;
const NOT_SUPPORTED: CUresult = 801;
const INVALID_DEVICE: CUresult = 101;
const INVALID_HANDLE: CUresult = 400;
const INVALID_CONTEXT: CUresult = 201;
const INVALID_IMAGE: CUresult = 200;
const NOT_FOUND: CUresult = 500;
const UNKNOWN: CUresult = 999;
/// The tenant's context: a token (the manager owns the one real context).
const CONTEXT: usize = 0x6765_6e63_0000;

/// A kernel's parameters, (offset, size) each, as the manager reported them.
type Layout = Vec<(u32, u32)>;
/// Each function handle's layout.
static LAYOUTS: Mutex<Option<HashMap<u64, Layout>>> = Mutex::new(None);

/// The forwarding function for `name`, if forwarded.
pub fn address(name: &[u8]) -> Option<usize> {
    Some(match name {
        b"cuInit" => cu_init as *const () as usize,
        b"cuDeviceGet" => cu_device_get as *const () as usize,
        b"cuDeviceGetCount" => cu_device_get_count as *const () as usize,
        b"cuDevicePrimaryCtxRetain" => cu_primary_ctx_retain as *const () as usize,
        b"cuCtxCreate_v2" => cu_ctx_create as *const () as usize,
        b"cuCtxCreate_v4" => cu_ctx_create_v4 as *const () as usize,
        b"cuCtxSynchronize" | b"cuStreamSynchronize" => cu_synchronize as *const () as usize,
        b"cuMemAlloc_v2" => cu_mem_alloc as *const () as usize,
        b"cuMemFree_v2" => cu_mem_free as *const () as usize,
        b"cuMemcpyHtoD_v2" => cu_memcpy_htod as *const () as usize,
        b"cuMemcpyDtoH_v2" => cu_memcpy_dtoh as *const () as usize,
        b"cuMemsetD8_v2" => cu_memset_d8 as *const () as usize,
        b"cuModuleLoadData" => cu_module_load_data as *const () as usize,
        b"cuModuleLoadDataEx" => cu_module_load_data_ex as *const () as usize,
        b"cuModuleLoadFatBinary" => cu_module_load_fat_binary as *const () as usize,
        b"cuModuleGetFunction" => cu_module_get_function as *const () as usize,
        b"cuModuleGetGlobal_v2" => cu_module_get_global as *const () as usize,
        b"cuModuleUnload" => cu_module_unload as *const () as usize,
        b"cuLaunchKernel" => cu_launch_kernel as *const () as usize,
        b"cuDeviceGetAttribute" => cu_device_get_attribute as *const () as usize,
        b"cuDeviceGetName" => cu_device_get_name as *const () as usize,
        b"cuDriverGetVersion" => cu_driver_get_version as *const () as usize,
        b"cuDeviceTotalMem_v2" => cu_device_total_mem as *const () as usize,
        b"cuMemGetInfo_v2" => cu_mem_get_info as *const () as usize,
        b"cuCtxGetCurrent" => cu_ctx_get_current as *const () as usize,
        b"cuCtxSetCurrent" => cu_ctx_set_current as *const () as usize,
        b"cuCtxGetDevice" => cu_ctx_get_device as *const () as usize,
        b"cuCtxPushCurrent_v2" => cu_ctx_push_current as *const () as usize,
        b"cuCtxPopCurrent_v2" => cu_ctx_pop_current as *const () as usize,
        b"cuStreamCreate" => cu_stream_create as *const () as usize,
        b"cuStreamCreateWithPriority" => cu_stream_create_with_priority as *const () as usize,
        b"cuStreamDestroy_v2" => cu_stream_destroy as *const () as usize,
        b"cuStreamQuery" => cu_stream_query as *const () as usize,
        b"cuStreamWaitEvent" => cu_stream_wait_event as *const () as usize,
        b"cuEventCreate" => cu_event_create as *const () as usize,
        b"cuEventRecord" => cu_event_record as *const () as usize,
        b"cuEventSynchronize" => cu_event_synchronize as *const () as usize,
        b"cuEventQuery" => cu_event_query as *const () as usize,
        b"cuEventDestroy_v2" => cu_event_destroy as *const () as usize,
        b"cuEventElapsedTime" | b"cuEventElapsedTime_v2" => cu_event_elapsed_time as *const () as usize,
        b"cuMemcpyHtoDAsync_v2" => cu_memcpy_htod_async as *const () as usize,
        b"cuMemcpyDtoHAsync_v2" => cu_memcpy_dtoh_async as *const () as usize,
        b"cuMemsetD8Async" => cu_memset_d8_async as *const () as usize,
        b"cuMemsetD32_v2" => cu_memset_d32 as *const () as usize,
        b"cuMemsetD32Async" => cu_memset_d32_async as *const () as usize,
        b"cuTensorMapEncodeTiled" => cu_tensor_map_encode_tiled as *const () as usize,
        b"cuTensorMapEncodeIm2col" => cu_tensor_map_encode_im2col as *const () as usize,
        _ => return None,
    })
}

/// Runs a forwarding function's work under the boundary: a panic in gpusan's part becomes
/// the driver's "unknown error" for this call, never an unwind into the program.
fn forwarded(place: &'static str, work: impl FnOnce() -> CUresult) -> CUresult {
    boundary::contain(place, work, || UNKNOWN)
}

fn done(r: Result<Reply, CUresult>) -> CUresult {
    match r {
        Ok(_) => CUDA_SUCCESS,
        Err(code) => code,
    }
}

unsafe extern "C" fn cu_init(_flags: c_uint) -> CUresult {
    forwarded("cu_init", || match client::hello() {
        Ok(_) => CUDA_SUCCESS,
        Err(code) => code,
    })
}

unsafe extern "C" fn cu_device_get(device: *mut CUdevice, ordinal: i32) -> CUresult {
    forwarded("cu_device_get", || {
        if device.is_null() {
            return INVALID_VALUE;
        }
        if ordinal != 0 {
            return INVALID_DEVICE; // a tenant sees one GPU: the manager's
        }
        *device = 0;
        CUDA_SUCCESS
    })
}

unsafe extern "C" fn cu_device_get_count(count: *mut i32) -> CUresult {
    forwarded("cu_device_get_count", || {
        if count.is_null() {
            return INVALID_VALUE;
        }
        *count = 1;
        CUDA_SUCCESS
    })
}

unsafe extern "C" fn cu_primary_ctx_retain(ctx: *mut CUcontext, device: CUdevice) -> CUresult {
    forwarded("cu_primary_ctx_retain", || {
        if ctx.is_null() {
            return INVALID_VALUE;
        }
        if device != 0 {
            return INVALID_DEVICE;
        }
        if let Err(code) = client::hello() {
            return code;
        }
        *ctx = CONTEXT as CUcontext;
        CUDA_SUCCESS
    })
}

unsafe extern "C" fn cu_ctx_create(ctx: *mut CUcontext, _flags: c_uint, device: CUdevice) -> CUresult {
    forwarded("cu_ctx_create", || cu_primary_ctx_retain(ctx, device))
}

unsafe extern "C" fn cu_ctx_create_v4(
    ctx: *mut CUcontext,
    _params: *mut c_void,
    _flags: c_uint,
    device: CUdevice,
) -> CUresult {
    forwarded("cu_ctx_create_v4", || cu_primary_ctx_retain(ctx, device))
}

unsafe extern "C" fn cu_synchronize(_stream: CUstream) -> CUresult {
    forwarded("cu_synchronize", || done(call(&Request::Synchronize)))
}

unsafe extern "C" fn cu_mem_alloc(ptr: *mut CUdeviceptr, bytes: usize) -> CUresult {
    forwarded("cu_mem_alloc", || {
        if ptr.is_null() || bytes == 0 {
            return INVALID_VALUE;
        }
        match call(&Request::MemAlloc { bytes: bytes as u64 }) {
            Ok(Reply::Pointer(p)) => {
                *ptr = p;
                CUDA_SUCCESS
            }
            Ok(_) => NOT_SUPPORTED,
            Err(code) => code,
        }
    })
}

unsafe extern "C" fn cu_mem_free(ptr: CUdeviceptr) -> CUresult {
    forwarded("cu_mem_free", || done(call(&Request::MemFree { ptr })))
}

unsafe extern "C" fn cu_memcpy_htod(dst: CUdeviceptr, src: *const c_void, bytes: usize) -> CUresult {
    forwarded("cu_memcpy_htod", || {
        if bytes == 0 {
            return CUDA_SUCCESS;
        }
        if src.is_null() {
            return INVALID_VALUE;
        }
        // SAFETY: the program's buffer of `bytes` bytes, as the driver would read it.
        let data = std::slice::from_raw_parts(src.cast::<u8>(), bytes);
        if let Some(r) = client::copy_in(dst, data) {
            return r.err().unwrap_or(CUDA_SUCCESS);
        }
        for (i, piece) in data.chunks(MAX_CHUNK as usize).enumerate() {
            let at = dst + (i as u64) * MAX_CHUNK;
            if let Err(code) = call(&Request::CopyHtoD { dst: at, data: piece.to_vec() }) {
                return code;
            }
        }
        CUDA_SUCCESS
    })
}

unsafe extern "C" fn cu_memcpy_dtoh(dst: *mut c_void, src: CUdeviceptr, bytes: usize) -> CUresult {
    forwarded("cu_memcpy_dtoh", || {
        if bytes == 0 {
            return CUDA_SUCCESS;
        }
        if dst.is_null() {
            return INVALID_VALUE;
        }
        // SAFETY: the program's buffer of `bytes` bytes, as the driver would write it.
        let out = std::slice::from_raw_parts_mut(dst.cast::<u8>(), bytes);
        if let Some(r) = client::copy_out(src, out) {
            return r.err().unwrap_or(CUDA_SUCCESS);
        }
        for (i, piece) in out.chunks_mut(MAX_CHUNK as usize).enumerate() {
            let at = src + (i as u64) * MAX_CHUNK;
            match call(&Request::CopyDtoH { src: at, bytes: piece.len() as u64 }) {
                Ok(Reply::Bytes(b)) if b.len() == piece.len() => piece.copy_from_slice(&b),
                Ok(_) => return NOT_SUPPORTED,
                Err(code) => return code,
            }
        }
        CUDA_SUCCESS
    })
}

unsafe extern "C" fn cu_memset_d8(dst: CUdeviceptr, value: u8, count: usize) -> CUresult {
    forwarded("cu_memset_d8", || done(call(&Request::MemsetD8 { dst, value, count: count as u64 })))
}

/// The bytes of a module image the driver would read: PTX text up to its NUL, a fatbin
/// (or the registration wrapper pointing to one) as long as its header says, a cubin as
/// long as its ELF headers say (the manager loads machine code only for a tenant alone on
/// the GPU, with `gpusan serve --allow-native`). Every byte is checked readable first
/// ([`peek`]): `None` for an image cut short or headers that make no sense, which the
/// driver would refuse too.
unsafe fn module_image(image: *const c_void) -> Option<Vec<u8>> {
    const FATBIN_MAGIC: u32 = 0xBA55_ED50;
    const WRAPPER_MAGIC: u32 = 0x4662_43B1;
    let mut p = image.cast::<u8>();
    let mut magic = u32::from_le_bytes(bytes_at(p, 4)?.try_into().ok()?);
    if magic == WRAPPER_MAGIC {
        // __fatBinC_Wrapper_t: magic, version, then the fatbin's address.
        p = usize::from_le_bytes(bytes_at(p.add(8), 8)?.try_into().ok()?) as *const u8;
        magic = u32::from_le_bytes(bytes_at(p, 4)?.try_into().ok()?);
    }
    if magic == FATBIN_MAGIC {
        // Header: magic, u16 version, u16 header size, u64 size of the entries after it.
        let h = bytes_at(p, 16)?;
        let header = u64::from(u16::from_le_bytes([h[6], h[7]]));
        let entries = u64::from_le_bytes(h[8..16].try_into().ok()?);
        let len = header.checked_add(entries).filter(|&l| l <= MAX_CHUNK)?;
        return bytes_at(p, len as usize);
    }
    if magic.to_le_bytes() == *b"\x7fELF" {
        return bytes_at(p, elf_len(p)?);
    }
    let len = peek::text_len(p, MAX_CHUNK as usize)?;
    bytes_at(p, len)
}

/// `len` bytes at `p`, if every one is readable.
unsafe fn bytes_at(p: *const u8, len: usize) -> Option<Vec<u8>> {
    // SAFETY: checked readable just before; the program's image stays put during its call.
    (!p.is_null() && peek::readable(p, len)).then(|| std::slice::from_raw_parts(p, len).to_vec())
}

/// An ELF64 file's length: the end of its last section or header table (its headers say).
unsafe fn elf_len(p: *const u8) -> Option<usize> {
    let h = bytes_at(p, 64)?;
    if h[4] != 2 {
        return None; // not ELFCLASS64
    }
    let u16_at = |b: &[u8], o: usize| u64::from(u16::from_le_bytes([b[o], b[o + 1]]));
    let u64_at = |b: &[u8], o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap_or_default());
    let (phoff, phentsize, phnum) = (u64_at(&h, 0x20), u16_at(&h, 0x36), u16_at(&h, 0x38));
    let (shoff, shentsize, shnum) = (u64_at(&h, 0x28), u16_at(&h, 0x3a), u16_at(&h, 0x3c));
    if shnum > 0 && shentsize != 64 {
        return None;
    }
    let tables = shoff.checked_add(shentsize * shnum)?;
    let mut end = phoff.checked_add(phentsize * phnum)?.max(tables);
    if end > MAX_CHUNK {
        return None;
    }
    let sections = bytes_at(p.add(shoff as usize), (shentsize * shnum) as usize)?;
    for sh in sections.chunks_exact(64) {
        const SHT_NOBITS: u32 = 8;
        if u32::from_le_bytes(sh[4..8].try_into().ok()?) == SHT_NOBITS {
            continue;
        }
        end = end.max(u64_at(sh, 0x18).checked_add(u64_at(sh, 0x20))?);
    }
    (end <= MAX_CHUNK).then_some(end as usize)
}

unsafe extern "C" fn cu_module_load_data(module: *mut CUmodule, image: *const c_void) -> CUresult {
    forwarded("cu_module_load_data", || {
        if module.is_null() || image.is_null() {
            return INVALID_VALUE;
        }
        let Some(bytes) = module_image(image) else {
            client::refused("cuModuleLoadData: an image whose headers give no length (not forwarded)");
            return INVALID_IMAGE;
        };
        match call(&Request::ModuleLoad { image: bytes }) {
            Ok(Reply::Module(m)) => {
                *module = m as CUmodule;
                CUDA_SUCCESS
            }
            Ok(_) => NOT_SUPPORTED,
            Err(code) => code,
        }
    })
}

/// JIT options only tune the PTX compiler: the manager compiles with its own.
unsafe extern "C" fn cu_module_load_data_ex(
    module: *mut CUmodule,
    image: *const c_void,
    _n: c_uint,
    _options: *mut c_void,
    _values: *mut *mut c_void,
) -> CUresult {
    forwarded("cu_module_load_data_ex", || cu_module_load_data(module, image))
}

unsafe extern "C" fn cu_module_load_fat_binary(module: *mut CUmodule, image: *const c_void) -> CUresult {
    forwarded("cu_module_load_fat_binary", || cu_module_load_data(module, image))
}

unsafe extern "C" fn cu_module_get_function(f: *mut CUfunction, module: CUmodule, name: *const c_char) -> CUresult {
    forwarded("cu_module_get_function", || {
        if f.is_null() || name.is_null() {
            return INVALID_VALUE;
        }
        let name = CStr::from_ptr(name).to_string_lossy().into_owned();
        match call(&Request::GetFunction { module: module as u64, name }) {
            Ok(Reply::Function { handle, params }) => {
                locks::lock(&LAYOUTS).get_or_insert_with(HashMap::new).insert(handle, params);
                *f = handle as CUfunction;
                CUDA_SUCCESS
            }
            Ok(_) => NOT_SUPPORTED,
            Err(code) => code,
        }
    })
}

/// A variable's copy in the tenant's partition, where its fenced kernels use it.
unsafe extern "C" fn cu_module_get_global(
    ptr: *mut CUdeviceptr,
    bytes: *mut usize,
    module: CUmodule,
    name: *const c_char,
) -> CUresult {
    forwarded("cu_module_get_global", || {
        if name.is_null() {
            return INVALID_VALUE;
        }
        let name = CStr::from_ptr(name).to_string_lossy().into_owned();
        if name.starts_with("__gpusan_") {
            // gpusan's own bookkeeping asking for its device ABI's variables, which only
            // modules of its other modes have: not the manager's business.
            return NOT_FOUND;
        }
        match call(&Request::GetGlobal { module: module as u64, name }) {
            Ok(Reply::Global { ptr: p, bytes: n }) => {
                if !ptr.is_null() {
                    *ptr = p;
                }
                if !bytes.is_null() {
                    *bytes = n as usize;
                }
                CUDA_SUCCESS
            }
            Ok(_) => NOT_SUPPORTED,
            Err(code) => code,
        }
    })
}

unsafe extern "C" fn cu_module_unload(module: CUmodule) -> CUresult {
    forwarded("cu_module_unload", || done(call(&Request::ModuleUnload { module: module as u64 })))
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn cu_launch_kernel(
    f: CUfunction,
    gx: c_uint,
    gy: c_uint,
    gz: c_uint,
    bx: c_uint,
    by: c_uint,
    bz: c_uint,
    shared: c_uint,
    _stream: CUstream,
    params: *mut *mut c_void,
    extra: *mut *mut c_void,
) -> CUresult {
    forwarded("cu_launch_kernel", || {
        if !extra.is_null() {
            client::refused("cuLaunchKernel: parameters passed through `extra` are not forwarded yet");
            return NOT_SUPPORTED;
        }
        let Some(layout) = locks::lock(&LAYOUTS).as_ref().and_then(|l| l.get(&(f as u64)).cloned()) else {
            return INVALID_HANDLE;
        };
        let len = layout.iter().map(|&(o, s)| o + s).max().unwrap_or(0) as usize;
        let mut packed = vec![0u8; len];
        for (i, &(offset, size)) in layout.iter().enumerate() {
            if params.is_null() {
                return INVALID_VALUE;
            }
            // SAFETY: the program passes one pointer per parameter, each to its value's bytes.
            let p = *params.add(i);
            if p.is_null() {
                return INVALID_VALUE;
            }
            let src = std::slice::from_raw_parts(p.cast::<u8>(), size as usize);
            packed[offset as usize..(offset + size) as usize].copy_from_slice(src);
        }
        // Not waited for, as a native launch is not: a refusal fails the next synchronization.
        let launch =
            Request::Launch { function: f as u64, grid: [gx, gy, gz], block: [bx, by, bz], shared, params: packed };
        match client::send(&launch) {
            Ok(()) => CUDA_SUCCESS,
            Err(code) => code,
        }
    })
}

// ---- devices, contexts, streams and events (issue 18: what driver-API programs use
// around their launches). A tenant's streams are all its one stream in the manager: work
// is ordered as the program ordered it and more (streams may overlap, need not).

/// Device attributes asked once each: the GPU does not change.
static ATTRIBUTES: Mutex<Option<HashMap<i32, i64>>> = Mutex::new(None);
/// Stream tokens handed out (`cuStreamCreate`): nonzero, never a real stream.
static STREAMS: AtomicUsize = AtomicUsize::new(0);
const STREAM_TOKEN: usize = 0x7374_0000_0000;

unsafe extern "C" fn cu_device_get_attribute(value: *mut c_int, attribute: c_int, device: CUdevice) -> CUresult {
    forwarded("cu_device_get_attribute", || {
        if value.is_null() {
            return INVALID_VALUE;
        }
        if device != 0 {
            return INVALID_DEVICE;
        }
        if let Some(v) = locks::lock(&ATTRIBUTES).as_ref().and_then(|a| a.get(&attribute).copied()) {
            *value = v as c_int;
            return CUDA_SUCCESS;
        }
        match call(&Request::DeviceAttribute { attribute }) {
            Ok(Reply::Value(v)) => {
                locks::lock(&ATTRIBUTES).get_or_insert_with(HashMap::new).insert(attribute, v);
                *value = v as c_int;
                CUDA_SUCCESS
            }
            Ok(_) => NOT_SUPPORTED,
            Err(code) => code,
        }
    })
}

unsafe extern "C" fn cu_device_get_name(name: *mut c_char, len: c_int, device: CUdevice) -> CUresult {
    forwarded("cu_device_get_name", || {
        if name.is_null() || len <= 0 {
            return INVALID_VALUE;
        }
        if device != 0 {
            return INVALID_DEVICE;
        }
        match call(&Request::DeviceName) {
            Ok(Reply::Text(t)) => {
                let bytes = t.as_bytes();
                let n = bytes.len().min(len as usize - 1);
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), name.cast::<u8>(), n);
                *name.add(n) = 0;
                CUDA_SUCCESS
            }
            Ok(_) => NOT_SUPPORTED,
            Err(code) => code,
        }
    })
}

unsafe extern "C" fn cu_driver_get_version(version: *mut c_int) -> CUresult {
    forwarded("cu_driver_get_version", || {
        if version.is_null() {
            return INVALID_VALUE;
        }
        match call(&Request::DriverVersion) {
            Ok(Reply::Value(v)) => {
                *version = v as c_int;
                CUDA_SUCCESS
            }
            Ok(_) => NOT_SUPPORTED,
            Err(code) => code,
        }
    })
}

/// The tenant's memory: its partition (the GPU a fenced tenant sees).
unsafe fn mem_info() -> Result<(u64, u64), CUresult> {
    match call(&Request::MemInfo) {
        Ok(Reply::MemInfo { free, total }) => Ok((free, total)),
        Ok(_) => Err(NOT_SUPPORTED),
        Err(code) => Err(code),
    }
}

unsafe extern "C" fn cu_device_total_mem(bytes: *mut usize, device: CUdevice) -> CUresult {
    forwarded("cu_device_total_mem", || {
        if bytes.is_null() {
            return INVALID_VALUE;
        }
        if device != 0 {
            return INVALID_DEVICE;
        }
        match mem_info() {
            Ok((_, total)) => {
                *bytes = total as usize;
                CUDA_SUCCESS
            }
            Err(code) => code,
        }
    })
}

unsafe extern "C" fn cu_mem_get_info(free: *mut usize, total: *mut usize) -> CUresult {
    forwarded("cu_mem_get_info", || {
        if free.is_null() || total.is_null() {
            return INVALID_VALUE;
        }
        match mem_info() {
            Ok((f, t)) => {
                *free = f as usize;
                *total = t as usize;
                CUDA_SUCCESS
            }
            Err(code) => code,
        }
    })
}

unsafe extern "C" fn cu_ctx_get_current(ctx: *mut CUcontext) -> CUresult {
    forwarded("cu_ctx_get_current", || {
        if ctx.is_null() {
            return INVALID_VALUE;
        }
        *ctx = if client::connected() { CONTEXT as CUcontext } else { std::ptr::null_mut() };
        CUDA_SUCCESS
    })
}

unsafe extern "C" fn cu_ctx_set_current(ctx: CUcontext) -> CUresult {
    forwarded("cu_ctx_set_current", || {
        if ctx.is_null() || ctx as usize == CONTEXT {
            CUDA_SUCCESS
        } else {
            INVALID_CONTEXT
        }
    })
}

/// A tenant has one context, the token: pushing it (or nothing) changes nothing.
unsafe extern "C" fn cu_ctx_push_current(ctx: CUcontext) -> CUresult {
    forwarded("cu_ctx_push_current", || cu_ctx_set_current(ctx))
}

unsafe extern "C" fn cu_ctx_pop_current(ctx: *mut CUcontext) -> CUresult {
    forwarded("cu_ctx_pop_current", || {
        if !ctx.is_null() {
            *ctx = if client::connected() { CONTEXT as CUcontext } else { std::ptr::null_mut() };
        }
        CUDA_SUCCESS
    })
}

unsafe extern "C" fn cu_ctx_get_device(device: *mut CUdevice) -> CUresult {
    forwarded("cu_ctx_get_device", || {
        if device.is_null() {
            return INVALID_VALUE;
        }
        *device = 0;
        CUDA_SUCCESS
    })
}

unsafe extern "C" fn cu_stream_create(stream: *mut CUstream, _flags: c_uint) -> CUresult {
    forwarded("cu_stream_create", || {
        if stream.is_null() {
            return INVALID_VALUE;
        }
        *stream = (STREAM_TOKEN + STREAMS.fetch_add(1, Ordering::Relaxed) + 1) as CUstream;
        CUDA_SUCCESS
    })
}

unsafe extern "C" fn cu_stream_create_with_priority(
    stream: *mut CUstream,
    flags: c_uint,
    _priority: c_int,
) -> CUresult {
    forwarded("cu_stream_create_with_priority", || cu_stream_create(stream, flags))
}

unsafe extern "C" fn cu_stream_destroy(_stream: CUstream) -> CUresult {
    forwarded("cu_stream_destroy", || CUDA_SUCCESS)
}

unsafe extern "C" fn cu_stream_query(_stream: CUstream) -> CUresult {
    forwarded("cu_stream_query", || done(call(&Request::Query)))
}

/// The tenant's streams are one stream in the manager: what `event` marks is already
/// before anything the stream does next.
unsafe extern "C" fn cu_stream_wait_event(_stream: CUstream, _event: CUevent, _flags: c_uint) -> CUresult {
    forwarded("cu_stream_wait_event", || CUDA_SUCCESS)
}

unsafe extern "C" fn cu_event_create(event: *mut CUevent, flags: c_uint) -> CUresult {
    forwarded("cu_event_create", || {
        if event.is_null() {
            return INVALID_VALUE;
        }
        match call(&Request::EventCreate { flags }) {
            Ok(Reply::Event(e)) => {
                *event = e as CUevent;
                CUDA_SUCCESS
            }
            Ok(_) => NOT_SUPPORTED,
            Err(code) => code,
        }
    })
}

unsafe extern "C" fn cu_event_record(event: CUevent, _stream: CUstream) -> CUresult {
    forwarded("cu_event_record", || done(call(&Request::EventRecord { event: event as u64 })))
}

unsafe extern "C" fn cu_event_synchronize(event: CUevent) -> CUresult {
    forwarded("cu_event_synchronize", || done(call(&Request::EventSynchronize { event: event as u64 })))
}

unsafe extern "C" fn cu_event_query(event: CUevent) -> CUresult {
    forwarded("cu_event_query", || done(call(&Request::EventQuery { event: event as u64 })))
}

unsafe extern "C" fn cu_event_destroy(event: CUevent) -> CUresult {
    forwarded("cu_event_destroy", || done(call(&Request::EventDestroy { event: event as u64 })))
}

unsafe extern "C" fn cu_event_elapsed_time(ms: *mut f32, start: CUevent, end: CUevent) -> CUresult {
    forwarded("cu_event_elapsed_time", || {
        if ms.is_null() {
            return INVALID_VALUE;
        }
        match call(&Request::EventElapsed { start: start as u64, end: end as u64 }) {
            Ok(Reply::Float(v)) => {
                *ms = v;
                CUDA_SUCCESS
            }
            Ok(_) => NOT_SUPPORTED,
            Err(code) => code,
        }
    })
}

// Asynchronous copies and sets are made at once: returning when the work is done is one
// of the behaviours the asynchronous calls allow.

unsafe extern "C" fn cu_memcpy_htod_async(
    dst: CUdeviceptr,
    src: *const c_void,
    bytes: usize,
    _s: CUstream,
) -> CUresult {
    forwarded("cu_memcpy_htod_async", || cu_memcpy_htod(dst, src, bytes))
}

unsafe extern "C" fn cu_memcpy_dtoh_async(dst: *mut c_void, src: CUdeviceptr, bytes: usize, _s: CUstream) -> CUresult {
    forwarded("cu_memcpy_dtoh_async", || cu_memcpy_dtoh(dst, src, bytes))
}

unsafe extern "C" fn cu_memset_d8_async(dst: CUdeviceptr, value: u8, count: usize, _s: CUstream) -> CUresult {
    forwarded("cu_memset_d8_async", || cu_memset_d8(dst, value, count))
}

unsafe extern "C" fn cu_memset_d32(dst: CUdeviceptr, value: c_uint, count: usize) -> CUresult {
    forwarded("cu_memset_d32", || done(call(&Request::MemsetD32 { dst, value, count: count as u64 })))
}

unsafe extern "C" fn cu_memset_d32_async(dst: CUdeviceptr, value: c_uint, count: usize, _s: CUstream) -> CUresult {
    forwarded("cu_memset_d32_async", || cu_memset_d32(dst, value, count))
}

/// The manager's answer to a map request: its 128 bytes into the program's `tm`.
///
/// # Safety
/// `tm` points at 128 writable bytes (a `CUtensorMap`).
unsafe fn map_reply(reply: Result<Reply, CUresult>, tm: *mut c_void) -> CUresult {
    match reply {
        Ok(Reply::Bytes(b)) if b.len() == 128 => {
            std::ptr::copy_nonoverlapping(b.as_ptr(), tm.cast::<u8>(), 128);
            CUDA_SUCCESS
        }
        Ok(_) => NOT_SUPPORTED,
        Err(code) => code,
    }
}

/// `cuTensorMapEncodeTiled`: the manager makes the map (a tensor inside the tenant's
/// partition only) and remembers it; a kernel's tensor copies run with no other map.
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn cu_tensor_map_encode_tiled(
    tm: *mut c_void,
    data_type: c_uint,
    rank: c_uint,
    address: *mut c_void,
    dims: *const u64,
    strides: *const u64,
    box_dim: *const c_uint,
    element_strides: *const c_uint,
    interleave: c_int,
    swizzle: c_int,
    l2_promotion: c_int,
    oob_fill: c_int,
) -> CUresult {
    forwarded("cu_tensor_map_encode_tiled", || {
        // The driver's own limit on the rank; arrays of what the rank says, as it reads them.
        let rank = rank as usize;
        if tm.is_null() || rank == 0 || rank > 5 || dims.is_null() || box_dim.is_null() || element_strides.is_null() {
            return INVALID_VALUE;
        }
        if rank > 1 && strides.is_null() {
            return INVALID_VALUE;
        }
        let read = |p: *const u64, n: usize| -> Vec<u64> { std::slice::from_raw_parts(p, n).to_vec() };
        let read32 = |p: *const c_uint, n: usize| -> Vec<u32> { std::slice::from_raw_parts(p, n).to_vec() };
        let m = gpusan_serve::protocol::TiledMap {
            data_type,
            address: address as u64,
            dims: read(dims, rank),
            strides: if rank > 1 { read(strides, rank - 1) } else { Vec::new() },
            box_dim: read32(box_dim, rank),
            element_strides: read32(element_strides, rank),
            interleave,
            swizzle,
            l2_promotion,
            oob_fill,
        };
        map_reply(call(&Request::TensorMapEncodeTiled(m)), tm)
    })
}

/// `cuTensorMapEncodeIm2col`, as [`cu_tensor_map_encode_tiled`].
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn cu_tensor_map_encode_im2col(
    tm: *mut c_void,
    data_type: c_uint,
    rank: c_uint,
    address: *mut c_void,
    dims: *const u64,
    strides: *const u64,
    lower: *const c_int,
    upper: *const c_int,
    channels: c_uint,
    pixels: c_uint,
    element_strides: *const c_uint,
    interleave: c_int,
    swizzle: c_int,
    l2_promotion: c_int,
    oob_fill: c_int,
) -> CUresult {
    forwarded("cu_tensor_map_encode_im2col", || {
        // The driver's limits: 3 to 5 dimensions, the corners for all but the outer two.
        let rank = rank as usize;
        let null = [dims.is_null(), strides.is_null(), lower.is_null(), upper.is_null(), element_strides.is_null()];
        if tm.is_null() || !(3..=5).contains(&rank) || null.iter().any(|&n| n) {
            return INVALID_VALUE;
        }
        let m = gpusan_serve::protocol::Im2colMap {
            data_type,
            address: address as u64,
            dims: std::slice::from_raw_parts(dims, rank).to_vec(),
            strides: std::slice::from_raw_parts(strides, rank - 1).to_vec(),
            lower: std::slice::from_raw_parts(lower, rank - 2).to_vec(),
            upper: std::slice::from_raw_parts(upper, rank - 2).to_vec(),
            channels,
            pixels,
            element_strides: std::slice::from_raw_parts(element_strides, rank).to_vec(),
            interleave,
            swizzle,
            l2_promotion,
            oob_fill,
        };
        map_reply(call(&Request::TensorMapEncodeIm2col(m)), tm)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cubin is sent whole: its length is where its last section or table ends.
    #[test]
    fn a_cubins_length_comes_from_its_elf_headers() {
        let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fatbin/tests/fixtures");
        for name in ["vars.cubin", "vars-rdc.cubin"] {
            let bytes = std::fs::read(fixtures.join(name)).unwrap();
            let mut padded = bytes.clone();
            padded.extend_from_slice(&[0xee; 64]); // what lies after it in the program's memory
                                                   // SAFETY: a buffer of ours, longer than the ELF file in it.
            assert_eq!(unsafe { elf_len(padded.as_ptr()) }, Some(bytes.len()), "{name}");
            // SAFETY: as above.
            assert_eq!(unsafe { module_image(padded.as_ptr().cast()) }, Some(bytes.clone()), "{name}");
            // Cut short: its section table lies past what is readable.
            let cut = bytes.len() / 2;
            // SAFETY: a mapping of ours, its second page made unreadable.
            unsafe {
                let page = 4096usize;
                let m = libc::mmap(
                    std::ptr::null_mut(),
                    2 * page,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                );
                assert_ne!(m, libc::MAP_FAILED);
                let at = (m as *mut u8).add(page - cut.min(page));
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), at, cut.min(page));
                libc::mprotect((m as *mut u8).add(page).cast(), page, libc::PROT_NONE);
                assert_eq!(module_image(at.cast()), None, "{name}: a cubin cut short was read past its end");
                libc::munmap(m, 2 * page);
            }
        }
    }
}
