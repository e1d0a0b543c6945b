//! The program's call sites with the Python frames that led to them. Under a Python
//! interpreter (PyTorch, CuPy, a pytest session) the native stack of a CUDA call is the
//! interpreter's and the extension's C code; the user's `train.py:42` is only in the
//! interpreter's frames. When the calling thread holds the GIL, those frames are read
//! through the Python C API (found in the process with `dlsym`, nothing linked: absent, as
//! in any program that is no Python, there are simply none) and put ahead of the native
//! ones (`gpusan_runtime::pyframes`).
//!
//! Never acquires the GIL (a thread without it, a CUDA callback thread, the interpreter
//! shutting down: no Python frames) and never runs Python code: only C accessors of frames
//! and code objects. Cheap: at most [`MAX_PREFIX`] frames, a code object's file and
//! function read once (the object kept alive so its address keeps naming it), and each
//! (code object, line) tagged once. An exception the program has pending is set aside and
//! put back. Python 3.9 and later (the accessors appeared then).

use std::cell::Cell;
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::ops::Range;
use std::sync::{Arc, Mutex};

use gpusan_runtime::locks;
use gpusan_runtime::per_process::PerProcess;
use gpusan_runtime::pyframes::{tag, PyFrame};
use gpusan_runtime::registry::{capture_site_outside_after, SiteId, MAX_PREFIX};

use crate::driver::resolve::{real_dlsym, typed, Slot};

type Obj = *mut c_void;

/// The Python C API functions used, all found or none.
#[derive(Clone, Copy)]
struct Api {
    gil_check: unsafe extern "C" fn() -> c_int,
    current: unsafe extern "C" fn() -> Obj,
    this_thread: unsafe extern "C" fn() -> Obj,
    thread_frame: unsafe extern "C" fn(Obj) -> Obj,
    frame_code: unsafe extern "C" fn(Obj) -> Obj,
    frame_line: unsafe extern "C" fn(Obj) -> c_int,
    frame_back: unsafe extern "C" fn(Obj) -> Obj,
    get_attr: unsafe extern "C" fn(Obj, *const c_char) -> Obj,
    utf8: unsafe extern "C" fn(Obj) -> *const c_char,
    inc_ref: unsafe extern "C" fn(Obj),
    dec_ref: unsafe extern "C" fn(Obj),
    err_fetch: unsafe extern "C" fn(*mut Obj, *mut Obj, *mut Obj),
    err_restore: unsafe extern "C" fn(Obj, Obj, Obj),
}

fn find(name: &CStr) -> usize {
    unsafe { real_dlsym(libc::RTLD_DEFAULT, name.as_ptr()) as usize }
}

/// The API, looked for once per process: an interpreter is the program or is linked into
/// it before it calls CUDA.
fn api() -> Option<Api> {
    static FOUND: Slot = Slot::new();
    static API: std::sync::OnceLock<Option<Api>> = std::sync::OnceLock::new();
    if FOUND.resolve(|| find(c"PyGILState_Check")) == 0 {
        return None;
    }
    *API.get_or_init(|| unsafe {
        // `PyThreadState_GetUnchecked` is 3.13's name of the older `_PyThreadState_UncheckedGet`.
        let current = match find(c"PyThreadState_GetUnchecked") {
            0 => find(c"_PyThreadState_UncheckedGet"),
            p => p,
        };
        Some(Api {
            gil_check: typed(find(c"PyGILState_Check"))?,
            current: typed(current)?,
            this_thread: typed(find(c"PyGILState_GetThisThreadState"))?,
            thread_frame: typed(find(c"PyThreadState_GetFrame"))?,
            frame_code: typed(find(c"PyFrame_GetCode"))?,
            frame_line: typed(find(c"PyFrame_GetLineNumber"))?,
            frame_back: typed(find(c"PyFrame_GetBack"))?,
            get_attr: typed(find(c"PyObject_GetAttrString"))?,
            utf8: typed(find(c"PyUnicode_AsUTF8"))?,
            inc_ref: typed(find(c"Py_IncRef"))?,
            dec_ref: typed(find(c"Py_DecRef"))?,
            err_fetch: typed(find(c"PyErr_Fetch"))?,
            err_restore: typed(find(c"PyErr_Restore"))?,
        })
    })
}

/// A code object's file and function (none when they could not be read).
type Names = Option<(Arc<str>, Arc<str>)>;

/// Code objects read so far (by address, each kept alive by a reference of ours), and the
/// tags of (code object, line) pairs.
#[derive(Default)]
struct Interned {
    code: HashMap<usize, Names>,
    tags: HashMap<(usize, u32), u64>,
}

/// Code objects kept at most: past it, new ones are read at each capture (and not kept).
const MAX_CODE: usize = 1 << 16;

static INTERNED: PerProcess<Mutex<Interned>> = PerProcess::new(|| Mutex::new(Interned::default()));

thread_local! {
    /// Set while this thread reads frames: an allocation the reading makes that reaches CUDA
    /// (a finalizer run by Python's collector) is not read again inside it.
    static READING: Cell<bool> = const { Cell::new(false) };
}

/// The program's call stack from its first frame outside `own` (gpusan's library), with the
/// Python frames above the call first when the calling thread runs Python code.
pub fn site(own: Range<u64>) -> SiteId {
    let py = python_frames();
    capture_site_outside_after(own, &py)
}

/// The tags of the Python frames of the calling thread, innermost first; none unless it
/// holds the GIL.
pub fn python_frames() -> Vec<u64> {
    let Some(api) = api() else { return Vec::new() };
    if READING.with(|r| r.replace(true)) {
        return Vec::new();
    }
    // SAFETY: the interpreter's own functions, called only while this thread holds the GIL.
    let tags = unsafe { read(&api) };
    READING.with(|r| r.set(false));
    tags
}

unsafe fn read(api: &Api) -> Vec<u64> {
    let mut tags = Vec::new();
    let tstate = (api.current)();
    // 3.11's "current" thread state is the GIL holder's, whichever thread asks: it must be
    // this thread's own, and the GIL held.
    if tstate.is_null() || (api.gil_check)() == 0 || (api.this_thread)() != tstate {
        return tags;
    }
    let null = std::ptr::null_mut;
    let (mut kind, mut value, mut trace): (Obj, Obj, Obj) = (null(), null(), null());
    (api.err_fetch)(&mut kind, &mut value, &mut trace);
    let mut frame = (api.thread_frame)(tstate);
    while !frame.is_null() && tags.len() < MAX_PREFIX {
        let code = (api.frame_code)(frame);
        let line = (api.frame_line)(frame).max(0) as u32;
        if !code.is_null() {
            tags.extend(tag_of(api, code, line));
            (api.dec_ref)(code);
        }
        let back = (api.frame_back)(frame);
        (api.dec_ref)(frame);
        frame = back;
    }
    if !frame.is_null() {
        (api.dec_ref)(frame);
    }
    (api.err_restore)(kind, value, trace);
    tags
}

/// The tag of line `line` of `code`, interned.
unsafe fn tag_of(api: &Api, code: Obj, line: u32) -> Option<u64> {
    let key = (code as usize, line);
    let mut interned = locks::lock(INTERNED.get());
    if let Some(&t) = interned.tags.get(&key) {
        return Some(t);
    }
    let names = match interned.code.get(&key.0) {
        Some(names) => names.clone(),
        None => {
            let names = names_of(api, code);
            if interned.code.len() < MAX_CODE {
                (api.inc_ref)(code);
                interned.code.insert(key.0, names.clone());
            }
            names
        }
    };
    let (file, function) = names?;
    let t = tag(PyFrame { file, function, line })?;
    if interned.code.contains_key(&key.0) {
        interned.tags.insert(key, t);
    }
    Some(t)
}

/// A code object's `co_filename` and `co_qualname` (3.11+, `co_name` before).
unsafe fn names_of(api: &Api, code: Obj) -> Names {
    let text = |attr: &CStr| -> Option<Arc<str>> {
        let o = (api.get_attr)(code, attr.as_ptr());
        if o.is_null() {
            return None;
        }
        let s = (api.utf8)(o);
        let text = (!s.is_null()).then(|| Arc::from(CStr::from_ptr(s).to_string_lossy().as_ref()));
        (api.dec_ref)(o);
        text
    };
    let file = text(c"co_filename");
    let function = text(c"co_qualname").or_else(|| text(c"co_name"));
    // A failed lookup leaves an exception set: cleared by the caller's restore.
    let null = std::ptr::null_mut;
    let mut ignored: (Obj, Obj, Obj) = (null(), null(), null());
    (api.err_fetch)(&mut ignored.0, &mut ignored.1, &mut ignored.2);
    for o in [ignored.0, ignored.1, ignored.2].into_iter().filter(|o| !o.is_null()) {
        (api.dec_ref)(o);
    }
    Some((file?, function?))
}
