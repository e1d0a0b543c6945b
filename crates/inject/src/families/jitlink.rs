//! nvJitLink, the linker library (cuda.core's `Linker` and numba-cuda use it when it is
//! installed, the driver's `cuLink*` otherwise): PTX inputs are instrumented on the way in
//! and the cubin it links is recorded as built from them, as for the driver's linker
//! (`families::link`, whose bookkeeping this shares).
//!
//! nvJitLink's entry points carry the version of the header a caller was built with
//! (`__nvJitLinkCreate_13_0`, `_13_1`, …; the functions keep their signatures across a major
//! version). The stand-ins are exported under the 13.0 names, which a program linked
//! against nvJitLink 13.0 binds to; `dlsym` hands them out for every version's name of the
//! same function ([`stand_in_name`]).
//!
//! LTO-IR (numba-cuda compiles to it whenever nvJitLink is there) is followed: when a link
//! of LTO-IR and PTX completes, the same inputs are linked again with `-ptx`, the linked
//! PTX is instrumented and built into a cubin (`routes::built::link`), and the program gets
//! that cubin in place of the one nvJitLink made. Links that also hold machine code,
//! objects or libraries cannot be made PTX: they are linked as they are and listed
//! unchecked, as is every link where a step fails (the program gets nvJitLink's cubin).

use std::collections::HashMap;
use std::ffi::{c_char, c_void, CStr, CString};
use std::sync::Mutex;

use gpusan_runtime::built::Origin;
use gpusan_runtime::locks;
use gpusan_runtime::per_process::PerProcess;

use crate::driver::hook::hooks;
use crate::driver::{typed, CUresult, Slot};
use crate::families::link::{self, Key, Linker};
use crate::routes::{built, substitute};
use crate::state::{quietly, state};

/// `nvJitLinkHandle`.
type Handle = *mut c_void;
/// `nvJitLinkResult` (an `int` enum): success.
const SUCCESS: CUresult = 0;
/// `NVJITLINK_INPUT_PTX`, `_LTOIR`, `_ANY`.
const INPUT_PTX: i32 = 2;
const INPUT_LTOIR: i32 = 3;
const INPUT_ANY: i32 = 10;

/// What the report calls an input of type `kind` (`nvJitLinkInputType`).
fn input_name(kind: i32) -> &'static str {
    match kind {
        1 => "nvJitLink: machine code (cubin)",
        3 => "nvJitLink: LTO-IR",
        4 => "nvJitLink: fatbin",
        5 => "nvJitLink: object",
        6 => "nvJitLink: library",
        _ => "nvJitLink: another kind of",
    }
}

/// Whether the input at `data` is PTX text: it starts, after comments and blank lines,
/// with a PTX directive.
unsafe fn looks_like_ptx(data: *const c_void, size: usize) -> bool {
    let head = std::slice::from_raw_parts(data as *const u8, size.min(4096));
    let text = String::from_utf8_lossy(head);
    text.lines().map(str::trim).find(|l| !l.is_empty() && !l.starts_with("//")).is_some_and(|l| l.starts_with('.'))
}

hooks! {
    fn __nvJitLinkCreate_13_0(handle: *mut Handle, n: u32, options: *const *const c_char) => |real| create(real, handle, n, options);
    fn __nvJitLinkAddData_13_0(handle: Handle, kind: i32, data: *const c_void, size: usize, name: *const c_char)
        => |real| add_data(real, handle, kind, data, size, name);
    fn __nvJitLinkAddFile_13_0(handle: Handle, kind: i32, path: *const c_char) => |real| add_file(real, handle, kind, path);
    fn __nvJitLinkComplete_13_0(handle: Handle) => |real| complete(real, handle);
    fn __nvJitLinkGetLinkedCubinSize_13_0(handle: Handle, size: *mut usize) => |real| cubin_size(real, handle, size);
    fn __nvJitLinkGetLinkedCubin_13_0(handle: Handle, cubin: *mut c_void) => |real| get_cubin(real, handle, cubin);
    fn __nvJitLinkDestroy_13_0(handle: *mut Handle) => |real| destroy(real, handle);
}

/// The stand-in's name for an nvJitLink entry point of any version (`__nvJitLinkAddData_13_1`,
/// or the unversioned `nvJitLinkAddData` some loaders try): `None` for other names.
pub fn stand_in_name(name: &[u8]) -> Option<Vec<u8>> {
    let rest = name.strip_prefix(b"__nvJitLink").or_else(|| name.strip_prefix(b"nvJitLink"))?;
    let function = match rest.iter().position(|&b| b == b'_') {
        Some(i) => {
            let version = &rest[i + 1..];
            // `13_0`, `13_1`: the 13 series only, whose signatures the stand-ins have.
            if !version.starts_with(b"13_") || !version[3..].iter().all(u8::is_ascii_digit) {
                return None;
            }
            &rest[..i]
        }
        None => rest,
    };
    let ours = [b"__nvJitLink".as_slice(), function, b"_13_0"].concat();
    hooks().iter().any(|h| h.name.to_bytes() == ours.as_slice()).then_some(ours)
}

fn key(handle: Handle) -> Key {
    (Linker::NvJitLink, handle as usize)
}

fn substituting() -> bool {
    state().options.mode.instruments_kernels()
}

unsafe fn add_data(
    real: unsafe extern "C" fn(Handle, i32, *const c_void, usize, *const c_char) -> CUresult,
    handle: Handle,
    kind: i32,
    data: *const c_void,
    size: usize,
    name: *const c_char,
) -> CUresult {
    // `NVJITLINK_INPUT_ANY` is PTX when it reads as PTX.
    let ptx = kind == INPUT_PTX || (kind == INPUT_ANY && !data.is_null() && looks_like_ptx(data, size));
    if !ptx && substituting() {
        quietly(|| link::not_ptx(key(handle), input_name(kind)));
    }
    if substituting() && !data.is_null() {
        quietly(|| {
            keep_input(handle, if ptx { INPUT_PTX } else { kind }, std::slice::from_raw_parts(data as *const u8, size))
        });
    }
    let ours = (ptx && !data.is_null() && substituting())
        .then(|| quietly(|| link::instrument_input(key(handle), std::slice::from_raw_parts(data as *const u8, size))))
        .flatten()
        .flatten();
    let Some(ptx) = ours else { return real(handle, kind, data, size, name) };
    let r = real(handle, kind, ptx.as_ptr() as *const c_void, ptx.len(), name);
    if r == SUCCESS {
        return r;
    }
    quietly(|| link::refused(key(handle), r));
    real(handle, kind, data, size, name)
}

unsafe fn add_file(
    real: unsafe extern "C" fn(Handle, i32, *const c_char) -> CUresult,
    handle: Handle,
    kind: i32,
    path: *const c_char,
) -> CUresult {
    if (kind != INPUT_PTX && kind != INPUT_LTOIR) || path.is_null() || !substituting() {
        if substituting() {
            quietly(|| {
                link::not_ptx(key(handle), input_name(kind));
                keep_input(handle, kind, &[]);
            });
        }
        return real(handle, kind, path);
    }
    if kind == INPUT_LTOIR {
        quietly(|| {
            link::not_ptx(key(handle), input_name(kind));
            let p =
                std::path::Path::new(std::ffi::OsStr::from_encoded_bytes_unchecked(CStr::from_ptr(path).to_bytes()));
            let data = std::fs::metadata(p).is_ok_and(|m| m.len() <= 1 << 30).then(|| std::fs::read(p).ok()).flatten();
            keep_input(handle, if data.is_some() { kind } else { -1 }, data.as_deref().unwrap_or_default());
        });
        return real(handle, kind, path);
    }
    const MAX_PTX: u64 = 1 << 30;
    let read = quietly(|| {
        let p = std::path::Path::new(std::ffi::OsStr::from_encoded_bytes_unchecked(
            std::ffi::CStr::from_ptr(path).to_bytes(),
        ));
        let small = std::fs::metadata(p).is_ok_and(|m| m.len() <= MAX_PTX);
        let text = small.then(|| std::fs::read(p).ok()).flatten()?;
        keep_input(handle, INPUT_PTX, &text);
        link::instrument_input(key(handle), &text)
    })
    .flatten();
    let add = crate::driver::typed::<unsafe extern "C" fn(Handle, i32, *const c_void, usize, *const c_char) -> CUresult>(
        __nvJitLinkAddData_13_0::REAL.driver(c"__nvJitLinkAddData_13_0"),
    );
    let (Some(ptx), Some(add)) = (read, add) else { return real(handle, kind, path) };
    let r = add(handle, kind, ptx.as_ptr() as *const c_void, ptx.len(), path);
    if r == SUCCESS {
        return r;
    }
    quietly(|| link::refused(key(handle), r));
    real(handle, kind, path)
}

unsafe fn get_cubin(
    real: unsafe extern "C" fn(Handle, *mut c_void) -> CUresult,
    handle: Handle,
    cubin: *mut c_void,
) -> CUresult {
    if let Some(ours) = quietly(|| ours(handle)).flatten().filter(|_| !cubin.is_null()) {
        std::ptr::copy_nonoverlapping(ours.as_ptr(), cubin as *mut u8, ours.len());
        return SUCCESS;
    }
    let r = real(handle, cubin);
    if r == SUCCESS && !cubin.is_null() {
        quietly(|| {
            let size_of = crate::driver::typed::<unsafe extern "C" fn(Handle, *mut usize) -> CUresult>(
                __nvJitLinkGetLinkedCubinSize_13_0::REAL.driver(c"__nvJitLinkGetLinkedCubinSize_13_0"),
            );
            let mut size = 0usize;
            if size_of.is_some_and(|f| f(handle, &mut size) == SUCCESS) {
                link::linked(key(handle), std::slice::from_raw_parts(cubin as *const u8, size));
            }
        });
    }
    r
}

unsafe fn destroy(real: unsafe extern "C" fn(*mut Handle) -> CUresult, handle: *mut Handle) -> CUresult {
    if !handle.is_null() {
        let h = *handle;
        quietly(|| {
            link::forget(key(h));
            lto(|m| m.remove(&(h as usize)));
        });
    }
    real(handle)
}

// ---- LTO-IR, followed ------------------------------------------------------------------

/// What a link needs to be made again as PTX.
#[derive(Default)]
struct Lto {
    options: Vec<CString>,
    /// Inputs in order: (kind, bytes, name). PTX inputs as the program gave them.
    inputs: Vec<(i32, Vec<u8>)>,
    /// An input that cannot be linked to PTX (machine code, objects, libraries, a file that
    /// could not be read).
    opaque: bool,
    /// The cubin built from the instrumented linked PTX, handed out instead of nvJitLink's.
    cubin: Option<Vec<u8>>,
}

static LTO: PerProcess<Mutex<Option<HashMap<usize, Lto>>>> = PerProcess::new(|| Mutex::new(None));

fn lto<R>(f: impl FnOnce(&mut HashMap<usize, Lto>) -> R) -> R {
    f(locks::lock(LTO.get()).get_or_insert_with(HashMap::new))
}

fn keep_input(handle: Handle, kind: i32, data: &[u8]) {
    lto(|m| {
        let l = m.entry(handle as usize).or_default();
        match kind {
            INPUT_PTX | INPUT_LTOIR => l.inputs.push((kind, data.to_vec())),
            _ => l.opaque = true,
        }
    });
}

fn ours(handle: Handle) -> Option<Vec<u8>> {
    lto(|m| m.get(&(handle as usize)).and_then(|l| l.cubin.clone()))
}

unsafe fn create(
    real: unsafe extern "C" fn(*mut Handle, u32, *const *const c_char) -> CUresult,
    handle: *mut Handle,
    n: u32,
    options: *const *const c_char,
) -> CUresult {
    let r = real(handle, n, options);
    if r == SUCCESS && !handle.is_null() && substituting() {
        quietly(|| {
            let options = (0..n as usize)
                .filter(|_| !options.is_null())
                .map(|i| *options.add(i))
                .filter(|p| !p.is_null())
                .map(|p| CStr::from_ptr(p).to_owned())
                .collect();
            lto(|m| m.insert(*handle as usize, Lto { options, ..Lto::default() }));
        });
    }
    r
}

unsafe fn complete(real: unsafe extern "C" fn(Handle) -> CUresult, handle: Handle) -> CUresult {
    let r = real(handle);
    if r == SUCCESS && substituting() {
        quietly(|| follow_lto(handle));
    }
    r
}

unsafe fn cubin_size(
    real: unsafe extern "C" fn(Handle, *mut usize) -> CUresult,
    handle: Handle,
    size: *mut usize,
) -> CUresult {
    match quietly(|| ours(handle)).flatten() {
        Some(c) if !size.is_null() => {
            *size = c.len();
            SUCCESS
        }
        _ => real(handle, size),
    }
}

/// A completed link with LTO-IR in it, made again as PTX, instrumented and built: the
/// cubin the program will get. Nothing for a link without LTO-IR (its PTX was instrumented
/// on the way in) or with inputs that cannot become PTX.
unsafe fn follow_lto(handle: Handle) {
    let Some((options, inputs)) = lto(|m| {
        let l = m.get(&(handle as usize))?;
        let has_lto = l.inputs.iter().any(|(k, _)| *k == INPUT_LTOIR);
        (has_lto && !l.opaque).then(|| (l.options.clone(), l.inputs.clone()))
    }) else {
        return;
    };
    let built = linked_ptx(&options, &inputs).and_then(|ptx| {
        let done = substitute::instrument_ptx(&ptx, state().options.mode)?;
        let mut text = done.text.clone();
        text.push(0);
        let cubin = built::link(&text, None, built::Optimization::Quick)?;
        built::record(&cubin, Origin::Linker, &done.meta, Some((&done.text, &done.key)));
        Ok(cubin)
    });
    match built {
        Ok(cubin) => {
            lto(|m| m.get_mut(&(handle as usize)).map(|l| l.cubin = Some(cubin)));
        }
        Err(why) => link::note(key(handle), format!("nvJitLink: LTO-IR not followed: {why}")),
    }
}

/// The PTX nvJitLink links of `inputs` with `options` and `-ptx`.
unsafe fn linked_ptx(options: &[CString], inputs: &[(i32, Vec<u8>)]) -> Result<String, String> {
    static PTX_SIZE: Slot = Slot::new();
    static PTX: Slot = Slot::new();
    type Create = unsafe extern "C" fn(*mut Handle, u32, *const *const c_char) -> CUresult;
    type Add = unsafe extern "C" fn(Handle, i32, *const c_void, usize, *const c_char) -> CUresult;
    let missing = || "nvJitLink lacks a function".to_string();
    let create = typed::<Create>(__nvJitLinkCreate_13_0::REAL.driver(c"__nvJitLinkCreate_13_0")).ok_or_else(missing)?;
    let add = typed::<Add>(__nvJitLinkAddData_13_0::REAL.driver(c"__nvJitLinkAddData_13_0")).ok_or_else(missing)?;
    let complete = typed::<unsafe extern "C" fn(Handle) -> CUresult>(
        __nvJitLinkComplete_13_0::REAL.driver(c"__nvJitLinkComplete_13_0"),
    )
    .ok_or_else(missing)?;
    let destroy = typed::<unsafe extern "C" fn(*mut Handle) -> CUresult>(
        __nvJitLinkDestroy_13_0::REAL.driver(c"__nvJitLinkDestroy_13_0"),
    )
    .ok_or_else(missing)?;
    // Not stood in for: found under the first 13.x name the library has.
    let any_version = |slot: &Slot, function: &str| {
        slot.resolve(|| {
            (0..10)
                .filter_map(|v| CString::new(format!("__nvJitLink{function}_13_{v}")).ok())
                .map(|n| crate::driver::resolve::find_now(&n))
                .find(|&a| a != 0)
                .unwrap_or(0)
        })
    };
    let size_of =
        typed::<unsafe extern "C" fn(Handle, *mut usize) -> CUresult>(any_version(&PTX_SIZE, "GetLinkedPtxSize"))
            .ok_or_else(missing)?;
    let get = typed::<unsafe extern "C" fn(Handle, *mut c_char) -> CUresult>(any_version(&PTX, "GetLinkedPtx"))
        .ok_or_else(missing)?;
    let mut all: Vec<&CStr> = options.iter().map(CString::as_c_str).collect();
    all.push(c"-ptx");
    let pointers: Vec<*const c_char> = all.iter().map(|c| c.as_ptr()).collect();
    let mut h: Handle = std::ptr::null_mut();
    let r = create(&mut h, pointers.len() as u32, pointers.as_ptr());
    if r != SUCCESS {
        return Err(format!("a PTX link could not start (error {r})"));
    }
    let mut r = SUCCESS;
    for (kind, data) in inputs {
        if r == SUCCESS {
            r = add(h, *kind, data.as_ptr() as *const c_void, data.len(), c"gpusan-relink".as_ptr());
        }
    }
    if r == SUCCESS {
        r = complete(h);
    }
    let mut size = 0usize;
    let mut text = None;
    if r == SUCCESS && size_of(h, &mut size) == SUCCESS && size > 0 {
        let mut buf = vec![0u8; size];
        if get(h, buf.as_mut_ptr() as *mut c_char) == SUCCESS {
            let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
            buf.truncate(end);
            text = String::from_utf8(buf).ok();
        }
    }
    destroy(&mut h);
    text.ok_or_else(|| format!("the link as PTX failed (error {r})"))
}

#[cfg(test)]
mod tests {
    use super::stand_in_name;

    #[test]
    fn every_13_version_of_an_entry_point_gets_the_stand_in() {
        let ours = Some(b"__nvJitLinkAddData_13_0".to_vec());
        assert_eq!(stand_in_name(b"__nvJitLinkAddData_13_0"), ours);
        assert_eq!(stand_in_name(b"__nvJitLinkAddData_13_2"), ours);
        assert_eq!(stand_in_name(b"nvJitLinkAddData"), ours);
        assert_eq!(stand_in_name(b"__nvJitLinkAddData_12_0"), None, "another major version's ABI");
        assert_eq!(stand_in_name(b"__nvJitLinkVersion_13_0"), None, "not watched");
        assert_eq!(stand_in_name(b"cuLinkAddData_v2"), None);
    }
}
