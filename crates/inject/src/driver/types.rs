//! The driver's C types as gpusan uses them (`cuda.h`): handles, result codes, and the few
//! structures gpusan reads or fills in.

use std::ffi::{c_int, c_void};

/// `CUresult`: 0 is success.
pub type CUresult = c_int;
pub type CUdeviceptr = u64;
pub type CUdevice = c_int;
pub type CUcontext = *mut c_void;
pub type CUstream = *mut c_void;
pub type CUevent = *mut c_void;
pub type CUmodule = *mut c_void;
pub type CUlibrary = *mut c_void;
pub type CUfunction = *mut c_void;
pub type CUkernel = *mut c_void;
pub type CUgraph = *mut c_void;
pub type CUgraphNode = *mut c_void;
pub type CUgraphExec = *mut c_void;
pub type CUmemoryPool = *mut c_void;
pub type CUarray = *mut c_void;
pub type CUlinkState = *mut c_void;
/// `CUmemGenericAllocationHandle`.
pub type CUmemHandle = u64;
/// `CUipcMemHandle`: 64 opaque bytes, passed by value.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct CUipcMemHandle {
    pub reserved: [u8; 64],
}
/// `CUstreamCaptureStatus`: 0 none, 1 active, 2 invalidated.
pub type CUstreamCaptureStatus = u32;

pub const CUDA_SUCCESS: CUresult = 0;
pub const CUDA_ERROR_INVALID_VALUE: CUresult = 1;
pub const CUDA_ERROR_OUT_OF_MEMORY: CUresult = 2;
/// What a stand-in answers when the driver is not loaded (it has nothing to call).
pub const CUDA_ERROR_NOT_INITIALIZED: CUresult = 3;

/// A module or library the program loaded (its handle), as gpusan remembers it.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Loaded {
    Module(usize),
    Library(usize),
}

/// `CUDA_MEMCPY2D` (the `_v2` layout, `size_t` fields).
#[repr(C)]
pub struct Memcpy2D {
    pub src_x: usize,
    pub src_y: usize,
    pub src_type: u32,
    pub src_host: *const c_void,
    pub src_device: CUdeviceptr,
    pub src_array: CUarray,
    pub src_pitch: usize,
    pub dst_x: usize,
    pub dst_y: usize,
    pub dst_type: u32,
    pub dst_host: *mut c_void,
    pub dst_device: CUdeviceptr,
    pub dst_array: CUarray,
    pub dst_pitch: usize,
    pub width: usize,
    pub height: usize,
}

/// `CUDA_MEMCPY3D` (the `_v2` layout, `size_t` fields).
#[repr(C)]
pub struct Memcpy3D {
    pub src_x: usize,
    pub src_y: usize,
    pub src_z: usize,
    pub src_lod: usize,
    pub src_type: u32,
    pub src_host: *const c_void,
    pub src_device: CUdeviceptr,
    pub src_array: CUarray,
    pub reserved0: *mut c_void,
    pub src_pitch: usize,
    pub src_height: usize,
    pub dst_x: usize,
    pub dst_y: usize,
    pub dst_z: usize,
    pub dst_lod: usize,
    pub dst_type: u32,
    pub dst_host: *mut c_void,
    pub dst_device: CUdeviceptr,
    pub dst_array: CUarray,
    pub reserved1: *mut c_void,
    pub dst_pitch: usize,
    pub dst_height: usize,
    pub width: usize,
    pub height: usize,
    pub depth: usize,
}

/// `CUDA_MEM_ALLOC_NODE_PARAMS` (v1): the pool properties, then the access descriptors,
/// then the size asked for and the address the driver chose.
#[repr(C)]
pub struct MemAllocNodeParams {
    pub pool_props: [u8; 88],
    pub access_descs: *mut c_void,
    pub access_desc_count: usize,
    pub bytesize: usize,
    pub dptr: CUdeviceptr,
}

/// `CUDA_KERNEL_NODE_PARAMS_v2`: what a kernel node launches (`func`, or where that is null
/// `kern`, a library's kernel in context `ctx`) and how.
#[repr(C)]
pub struct KernelNodeParams {
    pub func: CUfunction,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared_mem_bytes: u32,
    pub kernel_params: *mut *mut c_void,
    pub extra: *mut *mut c_void,
    pub kern: CUkernel,
    pub ctx: CUcontext,
}

/// `CUgraphNodeParams`, the generic parameters of `cuGraphAddNode` (256 bytes): the node's
/// type, then (at byte 16) the parameters of that type, one of a union.
#[repr(C)]
pub struct GraphNodeParams {
    pub kind: c_int,
    pub reserved0: [c_int; 3],
    pub params: [i64; 29],
    pub reserved2: i64,
}

const _: () = assert!(std::mem::size_of::<GraphNodeParams>() == 256);

/// `CUmemLocation`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct MemLocation {
    pub kind: u32,
    pub id: i32,
}

/// `CUmemAllocationProp` (32 bytes).
#[repr(C)]
pub struct MemAllocationProp {
    pub kind: u32,
    pub requested_handle_types: u32,
    pub location: MemLocation,
    pub win32_handle_meta_data: *mut c_void,
    pub alloc_flags: [u8; 8],
}

const _: () = assert!(std::mem::size_of::<MemAllocationProp>() == 32);

/// `CUmemAccessDesc`.
#[repr(C)]
pub struct MemAccessDesc {
    pub location: MemLocation,
    pub flags: u32,
}

/// One key for the legacy stream's handles (null, `CU_STREAM_LEGACY`); others as they are.
pub fn legacy_as_one(stream: u64) -> u64 {
    const LEGACY: u64 = 1;
    if stream == 0 {
        LEGACY
    } else {
        stream
    }
}
