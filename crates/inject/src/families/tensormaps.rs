//! Tensor maps: the descriptors `cp.async.bulk.tensor` (TMA) reads and writes global memory
//! through. No instrumentation sees a TMA access (the binary route has no patch point for
//! it, and PTX gives only the map's address), so the map is bounded where it is made: the
//! extent its tensor declares (`gpusan_runtime::tensormap`), judged against the registry
//! after the driver accepted the call. The call itself always goes through unchanged.
//!
//! `cuTensorMapReplaceAddress` moves a map made here to a new address: it is judged with
//! the tensor it was made with, as long as the map's bytes are still the ones the driver
//! wrote (a map copied in from elsewhere, or overwritten, is not judged: its tensor is not
//! known). Maps on memory gpusan did not allocate are not judged, only counted.

// Handlers mirror the driver functions they stand for, arguments and all.
#![allow(clippy::too_many_arguments)]

use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use gpusan_runtime::locks;
use gpusan_runtime::per_process::PerProcess;
use gpusan_runtime::tensormap::{check_tensor_map, Layout, Verdict, MAX_RANK};

use super::judge::{device, site};
use crate::driver::hook::hooks;
use crate::driver::{CUresult, CUDA_SUCCESS};
use crate::state::{quietly, state};

hooks! {
    fn cuTensorMapEncodeTiled(tm: *mut c_void, data_type: u32, rank: u32, address: *mut c_void, dims: *const u64,
        strides: *const u64, box_dim: *const u32, element_strides: *const u32, interleave: c_int, swizzle: c_int,
        l2: c_int, oob: c_int)
        => |real| encode(
            Made { api: "cuTensorMapEncodeTiled", tm, data_type, rank, address, dims, strides },
            || real(tm, data_type, rank, address, dims, strides, box_dim, element_strides, interleave, swizzle, l2, oob),
        );
    fn cuTensorMapEncodeIm2col(tm: *mut c_void, data_type: u32, rank: u32, address: *mut c_void, dims: *const u64,
        strides: *const u64, lower: *const c_int, upper: *const c_int, channels: u32, pixels: u32,
        element_strides: *const u32, interleave: c_int, swizzle: c_int, l2: c_int, oob: c_int)
        => |real| encode(
            Made { api: "cuTensorMapEncodeIm2col", tm, data_type, rank, address, dims, strides },
            || real(tm, data_type, rank, address, dims, strides, lower, upper, channels, pixels, element_strides,
                interleave, swizzle, l2, oob),
        );
    fn cuTensorMapEncodeIm2colWide(tm: *mut c_void, data_type: u32, rank: u32, address: *mut c_void,
        dims: *const u64, strides: *const u64, lower: c_int, upper: c_int, channels: u32, pixels: u32,
        element_strides: *const u32, interleave: c_int, wide_mode: c_int, swizzle: c_int, l2: c_int, oob: c_int)
        => |real| encode(
            Made { api: "cuTensorMapEncodeIm2colWide", tm, data_type, rank, address, dims, strides },
            || real(tm, data_type, rank, address, dims, strides, lower, upper, channels, pixels, element_strides,
                interleave, wide_mode, swizzle, l2, oob),
        );
    fn cuTensorMapReplaceAddress(tm: *mut c_void, address: *mut c_void)
        => |real| replace_address(tm, address, || real(tm, address));
}

/// `sizeof(CUtensorMap)`.
const MAP_BYTES: usize = 128;
/// Maps remembered for `cuTensorMapReplaceAddress`; past this many the oldest are forgotten
/// (a forgotten map's replacement is only counted).
const REMEMBERED: usize = 4096;

/// What a `cuTensorMapEncode*` call declared.
struct Made {
    api: &'static str,
    tm: *mut c_void,
    data_type: u32,
    rank: u32,
    address: *mut c_void,
    dims: *const u64,
    strides: *const u64,
}

/// A map's tensor, kept by value.
#[derive(Clone, Copy)]
struct Tensor {
    data_type: u32,
    rank: usize,
    dims: [u64; MAX_RANK],
    strides: [u64; MAX_RANK - 1],
}

impl Tensor {
    fn layout(&self) -> Layout<'_> {
        Layout { data_type: self.data_type, dims: &self.dims[..self.rank], strides: &self.strides[..self.rank - 1] }
    }
}

/// Maps made by this process, by the address of their `CUtensorMap`: the bytes the driver
/// wrote there and the tensor; with the order they were made in, to forget the oldest.
#[derive(Default)]
struct Maps {
    by_address: HashMap<usize, ([u8; MAP_BYTES], Tensor, u64)>,
    made: u64,
}

static MAPS: PerProcess<Mutex<Maps>> = PerProcess::new(|| Mutex::new(Maps::default()));
static JUDGED: PerProcess<AtomicU64> = PerProcess::new(|| AtomicU64::new(0));
static NOT_JUDGED: PerProcess<AtomicU64> = PerProcess::new(|| AtomicU64::new(0));

/// Tensor maps judged against the registry, and those that were not (memory gpusan did not
/// allocate, a tensor it does not know): the report's counters.
pub fn counts() -> (u64, u64) {
    (JUDGED.get().load(Ordering::Relaxed), NOT_JUDGED.get().load(Ordering::Relaxed))
}

fn encode(made: Made, real: impl FnOnce() -> CUresult) -> CUresult {
    let r = real();
    if r == CUDA_SUCCESS {
        quietly(|| {
            // The driver accepted the call: the arrays it read are there to read.
            match unsafe { tensor(&made) } {
                Some(t) => {
                    judge(made.api, made.address as u64, &t);
                    remember(made.tm, t);
                }
                None => count(&NOT_JUDGED),
            }
        });
    }
    r
}

fn replace_address(tm: *mut c_void, address: *mut c_void, real: impl FnOnce() -> CUresult) -> CUresult {
    // Looked up before the call, which changes the map's bytes.
    let tensor = quietly(|| made_here(tm)).flatten();
    let r = real();
    if r == CUDA_SUCCESS {
        quietly(|| match tensor {
            Some(t) => {
                judge("cuTensorMapReplaceAddress", address as u64, &t);
                remember(tm, t);
            }
            None => count(&NOT_JUDGED),
        });
    }
    r
}

/// The tensor `made` declares, when its rank is one the driver accepts.
///
/// # Safety
/// `made.dims` holds `rank` values and `made.strides` `rank - 1` (the driver read them).
unsafe fn tensor(made: &Made) -> Option<Tensor> {
    let rank = made.rank as usize;
    if rank == 0 || rank > MAX_RANK || made.dims.is_null() || (rank > 1 && made.strides.is_null()) {
        return None;
    }
    let mut t = Tensor { data_type: made.data_type, rank, dims: [0; MAX_RANK], strides: [0; MAX_RANK - 1] };
    t.dims[..rank].copy_from_slice(std::slice::from_raw_parts(made.dims, rank));
    if rank > 1 {
        t.strides[..rank - 1].copy_from_slice(std::slice::from_raw_parts(made.strides, rank - 1));
    }
    Some(t)
}

fn count(counter: &PerProcess<AtomicU64>) {
    counter.get().fetch_add(1, Ordering::Relaxed);
}

/// Judges a map of `tensor` at `address`; a finding is reported with the program's stack.
fn judge(api: &'static str, address: u64, tensor: &Tensor) {
    let st = state();
    match check_tensor_map(&st.registry, api, device(address), &tensor.layout()) {
        Verdict::Inside => count(&JUDGED),
        Verdict::NotJudged => count(&NOT_JUDGED),
        Verdict::Finding(f) => {
            count(&JUDGED);
            st.report(f.to_report(site(), crate::variables::name_of(&f.alloc)));
        }
    }
}

/// The map's bytes, read without faulting (before a call: the pointer is the program's).
fn bytes_at(tm: *mut c_void) -> Option<[u8; MAP_BYTES]> {
    let p = tm as *const u8;
    if p.is_null() || !crate::driver::peek::readable(p, MAP_BYTES) {
        return None;
    }
    let mut out = [0u8; MAP_BYTES];
    // SAFETY: the range was just found readable.
    out.copy_from_slice(unsafe { std::slice::from_raw_parts(p, MAP_BYTES) });
    Some(out)
}

/// Keeps the map the driver just wrote at `tm` (it succeeded writing all of it, so its
/// bytes are read directly: no system call on the path of every encode).
fn remember(tm: *mut c_void, tensor: Tensor) {
    if tm.is_null() {
        return;
    }
    let mut bytes = [0u8; MAP_BYTES];
    // SAFETY: the driver has just written the whole map there.
    bytes.copy_from_slice(unsafe { std::slice::from_raw_parts(tm as *const u8, MAP_BYTES) });
    let mut maps = locks::lock(MAPS.get());
    if maps.by_address.len() >= REMEMBERED && !maps.by_address.contains_key(&(tm as usize)) {
        let oldest = maps.by_address.iter().min_by_key(|(_, (_, _, n))| *n).map(|(k, _)| *k);
        oldest.map(|k| maps.by_address.remove(&k));
    }
    maps.made += 1;
    let n = maps.made;
    maps.by_address.insert(tm as usize, (bytes, tensor, n));
}

/// The tensor of the map at `tm`, if gpusan saw it made and its bytes are still those.
fn made_here(tm: *mut c_void) -> Option<Tensor> {
    let maps = locks::lock(MAPS.get());
    let (bytes, tensor, _) = maps.by_address.get(&(tm as usize))?;
    (bytes_at(tm).as_ref() == Some(bytes)).then_some(*tensor)
}
