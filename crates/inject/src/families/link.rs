//! The driver's linker (`cuLink*`: numba-cuda, cuda-python's `Linker`, programs that link
//! PTX at run time): PTX handed to it is instrumented on the way in, and the cubin it
//! links is recorded as built from instrumented PTX (`routes::built`), so that when the
//! program loads it its kernels are checked and named.
//!
//! One PTX input per link is instrumented (the first): each instrumented module numbers its
//! functions from 0, and a report could not tell two apart in one linked module. Further
//! PTX inputs are linked as they are and the cubin is recorded with the first one's
//! metadata; inputs already instrumented (NVRTC's door hands its PTX out so) are only
//! recorded. Instrumented PTX declares the device ABI weak, since a link may hold several.
//! A PTX input the pass refuses, or instrumented PTX the linker refuses, is linked as the
//! program gave it, and the reason goes into the report.

// Handlers mirror the driver functions they stand for, arguments and all.
#![allow(clippy::too_many_arguments)]

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::Mutex;

use gpusan_passes::meta::ModuleMeta;
use gpusan_runtime::built::Origin;
use gpusan_runtime::locks;
use gpusan_runtime::per_process::PerProcess;

use crate::driver::hook::hooks;
use crate::driver::{real, CUlinkState, CUresult, CUDA_SUCCESS};
use crate::routes::{built, substitute};
use crate::state::{quietly, state};

type Options = *mut c_int;
type Values = *mut *mut c_void;

hooks! {
    fn cuLinkAddData_v2(s: CUlinkState, kind: c_int, data: *mut c_void, size: usize, name: *const c_char, n: u32, o: Options, v: Values)
        => |real| add_data(real, s, kind, data, size, name, n, o, v);
    fn cuLinkAddData(s: CUlinkState, kind: c_int, data: *mut c_void, size: usize, name: *const c_char, n: u32, o: Options, v: Values)
        => |real| add_data(real, s, kind, data, size, name, n, o, v);
    fn cuLinkAddFile_v2(s: CUlinkState, kind: c_int, path: *const c_char, n: u32, o: Options, v: Values)
        => |real| add_file(real, s, kind, path, n, o, v);
    fn cuLinkAddFile(s: CUlinkState, kind: c_int, path: *const c_char, n: u32, o: Options, v: Values)
        => |real| add_file(real, s, kind, path, n, o, v);
    fn cuLinkComplete(s: CUlinkState, cubin: *mut *mut c_void, size: *mut usize) => |real| complete(real, s, cubin, size);
    fn cuLinkDestroy(s: CUlinkState) => |real| destroy(real, s);
}

/// `CU_JIT_INPUT_PTX`.
const INPUT_PTX: c_int = 1;

/// What the report calls an input of type `kind` (`CUjitInputType`).
fn input_name(kind: c_int) -> &'static str {
    match kind {
        0 => "driver linker: machine code (cubin)",
        2 => "driver linker: fatbin",
        3 => "driver linker: object",
        4 => "driver linker: library",
        5 => "driver linker: LTO-IR",
        _ => "driver linker: another kind of",
    }
}

#[derive(Default)]
struct Link {
    /// The metadata of the PTX input instrumented (or found instrumented).
    meta: Option<ModuleMeta>,
    /// Why PTX inputs were linked unchecked.
    unchecked: Vec<String>,
    /// Instrumented inputs, kept until the link is destroyed.
    kept: Vec<Vec<u8>>,
}

/// Which linker a link state belongs to: their handles are of separate spaces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Linker {
    Driver,
    NvJitLink,
}

/// A link in progress: its linker and handle.
pub type Key = (Linker, usize);

static LINKS: PerProcess<Mutex<Option<HashMap<Key, Link>>>> = PerProcess::new(|| Mutex::new(None));

fn links<R>(f: impl FnOnce(&mut HashMap<Key, Link>) -> R) -> R {
    f(locks::lock(LINKS.get()).get_or_insert_with(HashMap::new))
}

fn substituting() -> bool {
    state().options.mode.instruments_kernels()
}

/// An input of link `s` that is not PTX and may hold kernels gpusan cannot check (LTO-IR,
/// machine code): the report says so if the linked module is loaded without a checked part.
pub fn not_ptx(s: Key, what: &str) {
    note(s, format!("{what} input"));
}

/// Why link `s`, if its module is loaded without a checked part, was not checked.
pub fn note(s: Key, why: String) {
    links(|l| l.entry(s).or_default().unchecked.insert(0, why));
}

/// What to hand the linker for a PTX input `ptx` of link `s`: `Some(instrumented)`
/// (NUL-terminated), or `None` for the input as given.
pub fn instrument_input(s: Key, ptx: &[u8]) -> Option<Vec<u8>> {
    let end = ptx.iter().position(|&b| b == 0).unwrap_or(ptx.len());
    let note = |why: String| links(|l| l.entry(s).or_default().unchecked.push(why));
    let Ok(text) = std::str::from_utf8(&ptx[..end]) else {
        note("PTX given to the linker is not text".into());
        return None;
    };
    if gpusan_passes::declares_abi(text) {
        links(|l| {
            l.entry(s).or_default().meta.get_or_insert_with(|| ModuleMeta::of_ptx(text));
        });
        return None;
    }
    if links(|l| l.get(&s).is_some_and(|l| l.meta.is_some())) {
        note("a second PTX input of one link (only the first is instrumented)".into());
        return None;
    }
    match substitute::instrument_ptx(text, state().options.mode) {
        Ok(done) => {
            let mut out = gpusan_passes::weak_abi(std::str::from_utf8(&done.text).unwrap_or_default()).into_bytes();
            out.push(0);
            links(|l| {
                let link = l.entry(s).or_default();
                link.meta = Some(done.meta);
                link.kept.push(out.clone());
            });
            Some(out)
        }
        Err(why) => {
            note(why);
            None
        }
    }
}

/// The instrumented input was refused: it is linked as given, and the report says why.
pub fn refused(s: Key, r: CUresult) {
    links(|l| {
        let link = l.entry(s).or_default();
        link.meta = None;
        link.unchecked.push(format!("instrumented PTX refused by the linker (error {r})"));
    });
}

unsafe fn add_data(
    real: unsafe extern "C" fn(CUlinkState, c_int, *mut c_void, usize, *const c_char, u32, Options, Values) -> CUresult,
    s: CUlinkState,
    kind: c_int,
    data: *mut c_void,
    size: usize,
    name: *const c_char,
    n: u32,
    o: Options,
    v: Values,
) -> CUresult {
    if kind != INPUT_PTX && substituting() {
        quietly(|| not_ptx((Linker::Driver, s as usize), input_name(kind)));
    }
    let ours = (kind == INPUT_PTX && !data.is_null() && substituting())
        .then(|| {
            quietly(|| {
                instrument_input((Linker::Driver, s as usize), std::slice::from_raw_parts(data as *const u8, size))
            })
        })
        .flatten()
        .flatten();
    let Some(ptx) = ours else { return real(s, kind, data, size, name, n, o, v) };
    let r = real(s, kind, ptx.as_ptr() as *mut c_void, ptx.len(), name, n, o, v);
    if r == CUDA_SUCCESS {
        return r;
    }
    quietly(|| refused((Linker::Driver, s as usize), r));
    real(s, kind, data, size, name, n, o, v)
}

unsafe fn add_file(
    real: unsafe extern "C" fn(CUlinkState, c_int, *const c_char, u32, Options, Values) -> CUresult,
    s: CUlinkState,
    kind: c_int,
    path: *const c_char,
    n: u32,
    o: Options,
    v: Values,
) -> CUresult {
    if kind != INPUT_PTX || path.is_null() || !substituting() {
        return real(s, kind, path, n, o, v);
    }
    // Read here, and given to the linker as data under the file's name.
    const MAX_PTX: u64 = 1 << 30;
    let read = quietly(|| {
        let p = std::path::Path::new(std::ffi::OsStr::from_encoded_bytes_unchecked(CStr::from_ptr(path).to_bytes()));
        let small = std::fs::metadata(p).is_ok_and(|m| m.len() <= MAX_PTX);
        let text = small.then(|| std::fs::read(p).ok()).flatten()?;
        instrument_input((Linker::Driver, s as usize), &text)
    })
    .flatten();
    let (Some(ptx), Some(add)) = (read, real::cuLinkAddData_v2()) else { return real(s, kind, path, n, o, v) };
    let r = add(s, kind, ptx.as_ptr() as *mut c_void, ptx.len(), path, n, o, v);
    if r == CUDA_SUCCESS {
        return r;
    }
    quietly(|| refused((Linker::Driver, s as usize), r));
    real(s, kind, path, n, o, v)
}

unsafe fn complete(
    real: unsafe extern "C" fn(CUlinkState, *mut *mut c_void, *mut usize) -> CUresult,
    s: CUlinkState,
    cubin: *mut *mut c_void,
    size: *mut usize,
) -> CUresult {
    let r = real(s, cubin, size);
    if r == CUDA_SUCCESS && !cubin.is_null() && !size.is_null() && !(*cubin).is_null() {
        quietly(|| linked((Linker::Driver, s as usize), std::slice::from_raw_parts(*cubin as *const u8, *size)));
    }
    r
}

/// Link `s` made `cubin`: recorded as built from its instrumented PTX input, or unchecked
/// with the reason its PTX was not instrumented.
pub fn linked(s: Key, cubin: &[u8]) {
    let (meta, unchecked) = links(|l| l.get(&s).map(|l| (l.meta.clone(), l.unchecked.clone()))).unwrap_or_default();
    match (meta, unchecked.first()) {
        (Some(meta), _) => built::record(cubin, Origin::Linker, &meta, None),
        (None, Some(why)) => built::record_unchecked(cubin, format!("linked code not instrumented: {why}")),
        (None, None) => {}
    }
}

/// Link `s` is gone.
pub fn forget(s: Key) {
    links(|l| l.remove(&s));
}

unsafe fn destroy(real: unsafe extern "C" fn(CUlinkState) -> CUresult, s: CUlinkState) -> CUresult {
    let r = real(s);
    quietly(|| forget((Linker::Driver, s as usize)));
    r
}
