//! nvJitLink, the linker library (cuda.core's `Linker` and numba-cuda use it when it is
//! installed, the driver's `cuLink*` otherwise): PTX inputs are instrumented on the way in
//! and the cubin it links is recorded as built from them, as for the driver's linker
//! (`families::link`, whose bookkeeping this shares).
//!
//! nvJitLink's entry points carry the version of the header a caller was built with
//! (`__nvJitLinkCreate_13_0`, `_13_1`, …; the functions keep their signatures across a major
//! version). The stand-ins are exported under the 13.0 names, which a program linked
//! against nvJitLink 13.0 binds to; `dlsym` hands them out for every version's name of the
//! same function ([`stand_in_name`]). LTO-IR inputs are linked as they are (unchecked).

use std::ffi::{c_char, c_void};

use crate::driver::hook::hooks;
use crate::driver::CUresult;
use crate::families::link::{self, Key, Linker};
use crate::state::{quietly, state};

/// `nvJitLinkHandle`.
type Handle = *mut c_void;
/// `nvJitLinkResult` (an `int` enum): success.
const SUCCESS: CUresult = 0;
/// `NVJITLINK_INPUT_PTX`, `_ANY`.
const INPUT_PTX: i32 = 2;
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
    fn __nvJitLinkCreate_13_0(handle: *mut Handle, n: u32, options: *const *const c_char) => |real| real(handle, n, options);
    fn __nvJitLinkAddData_13_0(handle: Handle, kind: i32, data: *const c_void, size: usize, name: *const c_char)
        => |real| add_data(real, handle, kind, data, size, name);
    fn __nvJitLinkAddFile_13_0(handle: Handle, kind: i32, path: *const c_char) => |real| add_file(real, handle, kind, path);
    fn __nvJitLinkComplete_13_0(handle: Handle) => |real| real(handle);
    fn __nvJitLinkGetLinkedCubinSize_13_0(handle: Handle, size: *mut usize) => |real| real(handle, size);
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
    super::by_name(&ours).map(|_| ours)
}

fn key(handle: Handle) -> Key {
    (Linker::NvJitLink, handle as usize)
}

fn substituting() -> bool {
    state().options.mode != gpusan_abi::Mode::Api
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
    if kind != INPUT_PTX || path.is_null() || !substituting() {
        return real(handle, kind, path);
    }
    const MAX_PTX: u64 = 1 << 30;
    let read = quietly(|| {
        let p = std::path::Path::new(std::ffi::OsStr::from_encoded_bytes_unchecked(
            std::ffi::CStr::from_ptr(path).to_bytes(),
        ));
        let small = std::fs::metadata(p).is_ok_and(|m| m.len() <= MAX_PTX);
        let text = small.then(|| std::fs::read(p).ok()).flatten()?;
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
        quietly(|| link::forget(key(h)));
    }
    real(handle)
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
