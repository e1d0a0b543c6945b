//! Kernel substitution: when the program loads a module (a fatbin cudart registers, PTX a
//! driver-API program or Triton passes), gpusan loads an instrumented build of the same
//! module in its place, before any of its kernels can run.
//!
//! The module's PTX (the newest PTX entry the GPU can JIT) goes through the pass of the
//! current mode; the driver compiles the result (`cuLink*`), and the machine code is kept
//! on disk keyed by a hash of the input, the pass and gpusan's version, so a second run
//! loads it directly. Whatever goes wrong — no PTX (machine code only), a parse error, a
//! JIT failure — the original module is loaded unchanged and listed as unchecked: a
//! program never fails because gpusan could not instrument it.

use std::collections::BTreeMap;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::sync::atomic::AtomicUsize;
use std::sync::Mutex;

use crate::hooks::CUresult;

type Ptr = *mut c_void;

/// What a load became.
pub enum Image {
    /// Load this instead (leaked: the driver may read a lazily loaded image later).
    Substitute(&'static [u8]),
    /// Load the original; the reason goes into the report.
    Original(String),
}

/// A module or library gpusan instrumented, for reading its counter back.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Loaded {
    Module(usize),
    Library(usize),
}

#[derive(Default)]
pub struct Modules {
    pub instrumented: Vec<Loaded>,
    /// Latest counter value read from each instrumented module.
    pub counts: BTreeMap<Loaded, u64>,
    /// Why modules were loaded unchanged ("no PTX: …"), with how often.
    pub unchecked: BTreeMap<String, u64>,
    pub substituted: u64,
    pub cache_hits: u64,
    /// Counting builds (`check/counting.rs`): the latest counters read from each module, in
    /// the order of `check::COUNTER_SYMBOLS`.
    pub check_dynamic: BTreeMap<Loaded, [u64; 4]>,
    /// Counting builds: the static counts of every module instrumented.
    pub check_static: gpusan_runtime::report::CheckCounts,
}

impl Modules {
    /// The dynamic counts of every module read so far, with the static ones.
    pub fn check_counts(&self) -> gpusan_runtime::report::CheckCounts {
        let mut c = self.check_static.clone();
        for [access, check, group, span] in self.check_dynamic.values() {
            c.accesses += access;
            c.checks += check;
            c.group_checks += group;
            c.span_entries += span;
        }
        c
    }

    fn add_static(&mut self, r: &gpusan_passes::check::CheckReport) {
        let c = &mut self.check_static;
        c.modules += 1;
        for f in &r.functions {
            c.static_accesses += u64::from(f.checked + f.shared + f.local + f.scope);
            c.static_grouped += u64::from(f.grouped);
            c.static_in_bounds += u64::from(f.static_in_bounds);
            c.static_group_checks += u64::from(f.group_checks);
        }
    }
}

pub static MODULES: Mutex<Option<Modules>> = Mutex::new(None);

pub fn with<R>(f: impl FnOnce(&mut Modules) -> R) -> R {
    let mut g = MODULES.lock().unwrap_or_else(|p| p.into_inner());
    f(g.get_or_insert_with(Modules::default))
}

/// The counter the `count` pass adds to every module it instruments.
pub const COUNTER: &CStr = c"__gpusan_count";

fn cache_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("GPUSAN_CACHE_DIR") {
        return Some(PathBuf::from(d));
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("gpusan"))
}

/// The PTX inside a loaded image, if any. `image` is what the program passed: a fatbin
/// registration wrapper, a fatbin, a cubin, or NUL-terminated PTX text.
pub unsafe fn ptx_of(image: *const c_void, max_arch: u32) -> Result<String, String> {
    if image.is_null() {
        return Err("null image".into());
    }
    let head = std::slice::from_raw_parts(image as *const u8, 4);
    let magic = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
    if magic == gpusan_fatbin::FATBIN_MAGIC || magic == gpusan_fatbin::WRAPPER_MAGIC {
        let fatbin = gpusan_fatbin::from_wrapper_ptr(image as *const u8).map_err(|e| e.to_string())?;
        let best = fatbin
            .entries
            .iter()
            .filter(|e| e.kind == gpusan_fatbin::EntryKind::Ptx && e.arch <= max_arch)
            .max_by_key(|e| e.arch)
            .ok_or_else(|| "no PTX for this GPU (machine code only)".to_string())?;
        return best.ptx_text().map(|t| t.into_owned()).map_err(|e| e.to_string());
    }
    if head == b"\x7fELF" {
        return Err("machine code only (cubin)".into());
    }
    // PTX text: NUL-terminated by the API's contract.
    let text = CStr::from_ptr(image as *const c_char).to_str().map_err(|_| "image is neither a fatbin nor text")?;
    if !text.contains(".version") {
        return Err("image is not PTX".into());
    }
    Ok(text.to_string())
}

fn key(ptx: &str, pass: &str) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (ptx, pass, env!("CARGO_PKG_VERSION")).hash(&mut h);
    h.finish()
}

/// Compiles PTX to machine code with the driver's JIT (needs a current context).
unsafe fn jit(ptx: &str) -> Option<Vec<u8>> {
    static CREATE: AtomicUsize = AtomicUsize::new(0);
    static ADD: AtomicUsize = AtomicUsize::new(0);
    static COMPLETE: AtomicUsize = AtomicUsize::new(0);
    static DESTROY: AtomicUsize = AtomicUsize::new(0);
    let create = crate::hooks::driver_fn(&CREATE, c"cuLinkCreate_v2");
    let add = crate::hooks::driver_fn(&ADD, c"cuLinkAddData_v2");
    let complete = crate::hooks::driver_fn(&COMPLETE, c"cuLinkComplete");
    let destroy = crate::hooks::driver_fn(&DESTROY, c"cuLinkDestroy");
    if create == 0 || add == 0 || complete == 0 || destroy == 0 {
        return None;
    }
    let create: unsafe extern "C" fn(u32, *mut c_int, *mut Ptr, *mut Ptr) -> CUresult = std::mem::transmute(create);
    let add: unsafe extern "C" fn(Ptr, c_int, Ptr, usize, *const c_char, u32, *mut c_int, *mut Ptr) -> CUresult =
        std::mem::transmute(add);
    let complete: unsafe extern "C" fn(Ptr, *mut Ptr, *mut usize) -> CUresult = std::mem::transmute(complete);
    let destroy: unsafe extern "C" fn(Ptr) -> CUresult = std::mem::transmute(destroy);
    const JIT_INPUT_PTX: c_int = 1;
    let mut state: Ptr = std::ptr::null_mut();
    if create(0, std::ptr::null_mut(), std::ptr::null_mut(), &mut state) != 0 {
        return None;
    }
    let mut text = ptx.as_bytes().to_vec();
    text.push(0);
    let mut out = None;
    let ok = add(
        state,
        JIT_INPUT_PTX,
        text.as_mut_ptr() as Ptr,
        text.len(),
        c"gpusan".as_ptr(),
        0,
        std::ptr::null_mut(),
        std::ptr::null_mut(),
    ) == 0;
    if ok {
        let (mut cubin, mut size): (Ptr, usize) = (std::ptr::null_mut(), 0);
        if complete(state, &mut cubin, &mut size) == 0 && !cubin.is_null() {
            out = Some(std::slice::from_raw_parts(cubin as *const u8, size).to_vec());
        }
    }
    destroy(state);
    out
}

/// Decides what to load for `image` in a run whose mode is the pass `pass`.
pub unsafe fn substitute(image: *const c_void, pass: &str) -> Image {
    let ptx = match ptx_of(image, 90) {
        Ok(p) => p,
        Err(why) => return Image::Original(why),
    };
    let k = key(&ptx, &crate::passes::cache_name(pass));
    // A counting build is instrumented at every load: the report needs its static counts.
    let counting = pass == "check" && crate::passes::counting();
    let cached = if counting { None } else { cache_dir().map(|d| d.join(format!("{k:016x}.cubin"))) };
    if let Some(bytes) = cached.as_ref().and_then(|p| std::fs::read(p).ok()).filter(|b| b.starts_with(b"\x7fELF")) {
        with(|m| m.cache_hits += 1);
        return Image::Substitute(Box::leak(bytes.into_boxed_slice()));
    }
    let instrumented = match crate::passes::instrument(&ptx, pass) {
        Ok(out) => {
            if let (true, Some(r)) = (counting, &out.check) {
                with(|m| m.add_static(r));
            }
            out.ptx
        }
        Err(why) => return Image::Original(format!("not instrumented: {why}")),
    };
    if let Some(cubin) = crate::capture::relaxed(|| jit(&instrumented)) {
        if let Some(p) = &cached {
            if let Some(dir) = p.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            // Write then rename: a concurrent reader never sees half a file.
            let tmp = p.with_extension(format!("tmp{}", std::process::id()));
            if std::fs::write(&tmp, &cubin).is_ok() {
                let _ = std::fs::rename(&tmp, p);
            }
        }
        return Image::Substitute(Box::leak(cubin.into_boxed_slice()));
    }
    // No context to JIT in yet (cudart can register before one exists): hand the driver
    // the instrumented PTX; it compiles it itself.
    let mut text = instrumented.into_bytes();
    text.push(0);
    Image::Substitute(Box::leak(text.into_boxed_slice()))
}

/// Reads the counters of every instrumented module (call after a synchronization): the
/// `count` pass's, or in a counting `check` build the four of `check/counting.rs`.
pub fn read_counters() {
    let loaded = with(|m| m.instrumented.clone());
    let counting = crate::state::state().options.mode == "check" && crate::passes::counting();
    for l in loaded {
        if counting {
            let mut values = [0u64; 4];
            let read = gpusan_passes::check::COUNTER_SYMBOLS
                .iter()
                .zip(&mut values)
                .all(|(name, v)| read_u64(l, name).map(|x| *v = x).is_some());
            if read {
                with(|m| m.check_dynamic.insert(l, values));
            }
        } else if let Some(value) = COUNTER.to_str().ok().and_then(|name| read_u64(l, name)) {
            with(|m| m.counts.insert(l, value));
        }
    }
}

/// A `.u64` module variable's value, through the driver.
fn read_u64(l: Loaded, name: &str) -> Option<u64> {
    let (ptr, size) = crate::mirror::global_of(l, name)?;
    if size != 8 {
        return None;
    }
    let mut value = 0u64;
    unsafe { crate::capture::dtoh(&mut value as *mut u64 as Ptr, ptr, 8) }.then_some(value)
}
