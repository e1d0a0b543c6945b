//! Machine code built from instrumented PTX: the cubins NVRTC's door builds when a program
//! asks NVRTC for a relocatable cubin (otherwise it hands out the instrumented PTX itself,
//! recorded here all the same), those the driver's linker links from instrumented PTX, and
//! those the `ptxas` stand-in assembles. The program then loads a cubin, which on its face is
//! machine code gpusan cannot check; its digest says what it is (`gpusan_runtime::built`):
//! - built from instrumented PTX gpusan keeps in its cache: that PTX is loaded in the
//!   cubin's place (the same module, JIT-compiled as a whole program, which runs faster
//!   than the linker's relocatable build, `bench/results/prologue-ab.json`);
//! - built otherwise from instrumented PTX: the cubin is loaded, and its module's metadata
//!   names its kernels and lines;
//! - built from the program's own PTX because instrumenting failed: loaded, and listed as
//!   unchecked with the reason.
//!
//! Records are kept in this process and in the cache folder, so a cubin the program kept in
//! its own cache across runs (CuPy's, numba's, Triton's) is recognised on the next run.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::Mutex;

use gpusan_abi::Mode;
use gpusan_passes::meta::ModuleMeta;
use gpusan_runtime::built::{self, Built, Origin};
use gpusan_runtime::cache;
use gpusan_runtime::locks;
use gpusan_runtime::per_process::PerProcess;

use super::coverage::Route;
use super::kept::{self, Image};
use crate::driver::{real, CUDA_SUCCESS};

enum Known {
    Built { record: Built, meta: ModuleMeta, ptx: Option<Vec<u8>> },
    Unchecked(String),
}

static KNOWN: PerProcess<Mutex<Option<HashMap<String, Known>>>> = PerProcess::new(|| Mutex::new(None));

fn with<R>(f: impl FnOnce(&mut HashMap<String, Known>) -> R) -> R {
    f(locks::lock(KNOWN.get()).get_or_insert_with(HashMap::new))
}

/// `cubin` was built by `origin` from instrumented PTX whose metadata is `meta`; `ptx` is
/// that PTX (no NUL) with its cache key, when it may be loaded in the cubin's place.
pub fn record(cubin: &[u8], origin: Origin, meta: &ModuleMeta, ptx: Option<(&[u8], &str)>) {
    let digest = built::digest(cubin);
    let record = Built { origin, ptx_key: ptx.map(|(_, k)| k.to_string()), meta: meta.to_text() };
    if let Some(dir) = cache::dir() {
        built::write(&dir, &digest, &record);
    }
    let ptx = ptx.map(|(text, _)| text.to_vec());
    with(|m| m.insert(digest, Known::Built { record, meta: meta.clone(), ptx }));
}

/// `cubin` is the program's own machine code, built where gpusan meant to build an
/// instrumented one: `why` goes into the report when it is loaded.
pub fn record_unchecked(cubin: &[u8], why: String) {
    with(|m| m.insert(built::digest(cubin), Known::Unchecked(why)));
}

/// The metadata of an image gpusan made from instrumented PTX (a cubin, or PTX handed out
/// instrumented: its lines are those of the PTX before instrumenting, which the kernels'
/// records carry), if it is one.
pub fn meta_of(image: &[u8]) -> Option<(ModuleMeta, Route)> {
    let digest = built::digest(image);
    let here = with(|m| match m.get(&digest) {
        Some(Known::Built { meta, record, .. }) => Some((meta.clone(), route(record.origin))),
        _ => None,
    });
    here.or_else(|| {
        let record = built::read(&cache::dir()?, &digest)?;
        Some((ModuleMeta::from_text(&record.meta).ok()?, route(record.origin)))
    })
}

/// The route that checks what `origin` built.
fn route(origin: Origin) -> Route {
    match origin {
        Origin::Nvrtc => Route::Nvrtc,
        Origin::Linker => Route::Linker,
        Origin::Ptxas => Route::BuildTime,
    }
}

/// What to load for a cubin the program loads.
pub fn substitute(cubin: &[u8], mode: Mode) -> Image {
    let digest = built::digest(cubin);
    let here = with(|m| match m.get(&digest) {
        Some(Known::Built { record, meta, ptx }) => Some(Ok((record.clone(), meta.clone(), ptx.clone()))),
        Some(Known::Unchecked(why)) => Some(Err(why.clone())),
        None => None,
    });
    let (record, meta, ptx) = match here {
        Some(Ok(known)) => known,
        Some(Err(why)) => return Image::Original(why),
        None => {
            let Some(record) = cache::dir().and_then(|d| built::read(&d, &digest)) else {
                return Image::Original("machine code only (cubin)".into());
            };
            let Ok(meta) = ModuleMeta::from_text(&record.meta) else {
                return Image::Original("machine code only (cubin; gpusan's record of it is damaged)".into());
            };
            (record, meta, None)
        }
    };
    // The PTX stands in only for the mode it was instrumented for: its key names the pass.
    let ptx = ptx.or_else(|| {
        let key = record.ptx_key.as_deref()?;
        let (text, _) = kept::cached(key)?;
        Some(text)
    });
    match ptx {
        Some(mut text) if record.ptx_key.is_some() && mode.instruments_kernels() => {
            text.push(0);
            Image::Substitute { bytes: Box::leak(text.into_boxed_slice()), meta, route: route(record.origin) }
        }
        _ => Image::Built(meta, route(record.origin)),
    }
}

/// `CU_JIT_INPUT_PTX`, `CU_JIT_OPTIMIZATION_LEVEL`, `CU_JIT_TARGET`.
const INPUT_PTX: i32 = 1;
const JIT_OPTIMIZATION_LEVEL: i32 = 7;
const JIT_TARGET: i32 = 9;

/// How hard the driver's linker works on a cubin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Optimization {
    /// ptxas's default (`-O3`): the cubin's code is what will run.
    Full,
    /// `-O0`: the cubin is a stand-in for the PTX it was built from, which is kept and
    /// loaded in its place ([`substitute`]), so its code runs only if that PTX is lost. The
    /// program still gets a valid cubin, for a fraction of a full build's time: otherwise a
    /// first run compiles every kernel twice (the link, then the JIT).
    Quick,
}

/// A cubin built by the driver's linker from `ptx` (NUL-terminated), in the current
/// context, for `target` (a compute capability as one number) or the context's device.
pub fn link(ptx: &[u8], target: Option<u32>, optimization: Optimization) -> Result<Vec<u8>, String> {
    if crate::driver::current_context().0 == 0 {
        return Err("no CUDA context was current to build the cubin in".into());
    }
    let (Some(create), Some(add), Some(complete), Some(destroy)) =
        (real::cuLinkCreate_v2(), real::cuLinkAddData_v2(), real::cuLinkComplete(), real::cuLinkDestroy())
    else {
        return Err("the driver has no linker".into());
    };
    let mut options = vec![JIT_OPTIMIZATION_LEVEL];
    let mut values = vec![if optimization == Optimization::Quick { 0 } else { 3 } as *mut c_void];
    if let Some(target) = target {
        options.push(JIT_TARGET);
        values.push(target as usize as *mut c_void);
    }
    let n = options.len() as u32;
    let mut state = std::ptr::null_mut();
    // SAFETY: the driver's linker, with buffers of ours that outlive the calls; the cubin it
    // hands back lives until the state is destroyed, and is copied before.
    unsafe {
        let r = create(n, options.as_mut_ptr(), values.as_mut_ptr(), &mut state);
        if r != CUDA_SUCCESS {
            return Err(format!("the driver's linker could not start (error {r})"));
        }
        let name = c"gpusan-instrumented";
        let mut r = add(
            state,
            INPUT_PTX,
            ptx.as_ptr() as *mut c_void,
            ptx.len(),
            name.as_ptr(),
            0,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        );
        let (mut out, mut size) = (std::ptr::null_mut(), 0usize);
        if r == CUDA_SUCCESS {
            r = complete(state, &mut out, &mut size);
        }
        let cubin =
            (r == CUDA_SUCCESS && !out.is_null()).then(|| std::slice::from_raw_parts(out as *const u8, size).to_vec());
        destroy(state);
        cubin.ok_or_else(|| format!("the driver's linker refused the instrumented PTX (error {r})"))
    }
}

/// The program caches that keep machine code across runs, keyed without regard to gpusan:
/// (variable, folder under gpusan's). CuPy keeps the cubins NVRTC made, numba its linked
/// code, PyTorch its jiterator kernels. Triton needs none: it keys its cache on ptxas's
/// `--version`, to which the `ptxas` stand-in adds a line.
const PROGRAM_CACHES: [(&str, &str); 3] =
    [("CUPY_CACHE_DIR", "cupy"), ("NUMBA_CACHE_DIR", "numba"), ("PYTORCH_KERNEL_CACHE_PATH", "torch-kernels")];

/// Points the program's own kernel caches at folders of this gpusan build and mode, before
/// the program reads its environment (called from the library's constructor). Their
/// entries are instrumented machine code: a later run without gpusan, or with another
/// gpusan, must never load them, and a later run with this one must find them (the
/// records above then say what they are). A folder the user chose gets a subfolder.
pub fn separate_program_caches() {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    let Some(mode) = var(gpusan_abi::env::MODE).and_then(|m| Mode::from_name(&m.to_string_lossy())) else { return };
    if !mode.instruments_kernels() || var(gpusan_abi::env::PROGRAM_CACHES).is_some() {
        return;
    }
    let Some(base) = cache::dir() else { return };
    let build = format!("{}-{}", &env!("GPUSAN_PASS_FINGERPRINT")[..12], mode.name());
    let set = |k: &str, v: &std::path::Path| {
        if let (Ok(k), Ok(v)) = (std::ffi::CString::new(k), std::ffi::CString::new(v.as_os_str().as_encoded_bytes())) {
            // SAFETY: called from the constructor, before the program's threads exist.
            unsafe { libc::setenv(k.as_ptr(), v.as_ptr(), 1) };
        }
    };
    for (name, folder) in PROGRAM_CACHES {
        let dir = match var(name) {
            Some(theirs) => std::path::PathBuf::from(theirs).join(format!("gpusan-{build}")),
            None => base.join("programs").join(&build).join(folder),
        };
        set(name, &dir);
    }
    set(gpusan_abi::env::PROGRAM_CACHES, std::path::Path::new("1"));
}
