//! Kernel substitution: when the program loads a module (a fatbin cudart registers, PTX a
//! driver-API program or Triton passes), gpusan loads an instrumented build of the same
//! module in its place, before any of its kernels can run.
//!
//! The module's PTX (the newest PTX entry the GPU can JIT) goes through the pass of the
//! current mode, and the driver gets the instrumented PTX to load as the program's own,
//! JIT-compiled like any PTX module (and kept in the driver's JIT cache). The instrumented
//! PTX is kept on disk ([`cache`]: keyed by a SHA-256 of the input, the pass's options and
//! a fingerprint of the pass's code, each file verified before use), so a second run
//! neither instruments nor compiles again; the module's metadata (`gpusan_passes::meta`:
//! function numbers, line map) lies next to it (`<key>.ptx`, `<key>.meta`), and one
//! without the other is no cache entry. Whatever
//! goes wrong — no PTX (machine code only), a parse error — the original module is loaded
//! unchanged and listed as unchecked: a program never fails because gpusan could not
//! instrument it.
//!
//! Why not compile to a cubin ourselves (`cuLink*`) and keep that: the link API compiles
//! PTX as relocatable code, and instrumented kernels, which read module variables on their
//! fast paths, ran 1.2–1.4× slower that way than loaded as PTX (`bench/probes/prologue_ab.cu`:
//! the stencil 0.65 ms against 0.45 ms, gemm 0.19 against 0.16; native code alike both
//! ways).

use std::collections::BTreeMap;
use std::ffi::c_void;
use std::sync::Mutex;

use gpusan_passes::meta::ModuleMeta;
use gpusan_runtime::locks;
use gpusan_runtime::per_process::PerProcess;

use crate::driver::Loaded;
use crate::routes::passes;
use gpusan_abi::Mode;
use gpusan_runtime::cache;

pub use super::kept::Image;

#[derive(Default)]
pub struct Modules {
    /// The modules and libraries gpusan instrumented, for reading their counters back.
    pub instrumented: Vec<Loaded>,
    /// Latest counter value read from each instrumented module.
    pub counts: BTreeMap<Loaded, u64>,
    /// Why modules were loaded unchanged ("no PTX: …"), with how often.
    pub unchecked: BTreeMap<String, u64>,
    pub substituted: u64,
    pub cache_hits: u64,
    /// Counting builds (`check/counting.rs`): the latest counters read from each module, in
    /// the order of `gpusan_abi::COUNTER_SYMBOLS`.
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

static MODULES: PerProcess<Mutex<Option<Modules>>> = PerProcess::new(|| Mutex::new(None));

pub fn with<R>(f: impl FnOnce(&mut Modules) -> R) -> R {
    let mut g = locks::lock(MODULES.get());
    f(g.get_or_insert_with(Modules::default))
}

/// The counter the `count` pass adds to every module it instruments.
const COUNTER: &str = gpusan_abi::COUNT_SYMBOL;

/// The PTX inside a loaded image, if any: from a fatbin, the newest entry for `max_arch`
/// or older. `image` is what the program passed (see [`crate::image`]).
pub unsafe fn ptx_of(image: *const c_void, max_arch: u32) -> Result<String, String> {
    use gpusan_fatbin::EntryKind;
    match crate::image::read(image)? {
        crate::image::Image::Fatbin(fatbin) => {
            let ptx = || fatbin.entries.iter().filter(|e| e.kind == EntryKind::Ptx);
            let Some(best) = ptx().filter(|e| e.arch <= max_arch).max_by_key(|e| e.arch) else {
                return Err(match ptx().map(|e| e.arch).min() {
                    Some(arch) => format!("no PTX this GPU can compile: its oldest is for compute_{arch}"),
                    None => "no PTX for this GPU (machine code only)".to_string(),
                });
            };
            best.ptx_text().map(|t| t.into_owned()).map_err(|e| e.to_string())
        }
        crate::image::Image::Cubin(_) => Err("machine code only (cubin)".into()),
        crate::image::Image::Text(text) if text.contains(".version") => Ok(text.to_string()),
        crate::image::Image::Text(_) => Err("image is not PTX".into()),
    }
}

/// The architecture whose PTX a load gets: the current context's device's (a library may
/// load with no context current: then device 0's, where programs start). Where the driver
/// does not say, the newest PTX: if that is too new, the driver refuses the instrumented
/// build and the original is loaded.
pub fn target_arch() -> u32 {
    let (_, device) = crate::driver::current_context();
    crate::driver::real::device_arch(device.max(0)).unwrap_or(u32::MAX)
}

fn key(ptx: &str, pass: &str) -> String {
    let parts = [ptx, pass, env!("CARGO_PKG_VERSION"), env!("GPUSAN_PASS_FINGERPRINT")];
    cache::key(&parts.map(str::as_bytes))
}

/// Decides what to load for `image` in a run whose mode is `mode` (a pass).
pub unsafe fn substitute(image: *const c_void, mode: Mode) -> Image {
    if let Ok(crate::image::Image::Cubin(cubin)) = crate::image::read(image) {
        return super::built::substitute(cubin, mode);
    }
    let ptx = match ptx_of(image, target_arch()) {
        Ok(p) => p,
        Err(why) => return Image::Original(why),
    };
    if gpusan_passes::declares_abi(&ptx) {
        // Instrumented already (handed out so by NVRTC's door, or built so): checked as it is.
        return match super::built::meta_of(ptx.as_bytes()) {
            Some((meta, route)) => Image::Built(meta, route),
            None => Image::Built(ModuleMeta::of_ptx(&ptx), super::coverage::Route::BuildTime),
        };
    }
    match instrument_ptx(&ptx, mode) {
        Ok(Instrumented { mut text, meta, .. }) => {
            text.push(0);
            Image::Substitute {
                bytes: Box::leak(text.into_boxed_slice()),
                meta,
                route: super::coverage::Route::PtxAtLoad,
            }
        }
        Err(why) => Image::Original(why),
    }
}

/// A module's PTX instrumented: the text (no NUL), its metadata, and the cache key it is
/// kept under (written when the cache folder can be used).
pub struct Instrumented {
    pub text: Vec<u8>,
    pub meta: ModuleMeta,
    pub key: String,
}

/// `ptx` instrumented by the pass of `mode`, from the cache when it holds it. The error
/// says why not, for the report.
pub fn instrument_ptx(ptx: &str, mode: Mode) -> Result<Instrumented, String> {
    let k = key(ptx, &passes::cache_name(mode));
    // A counting build is instrumented at every load: the report needs its static counts.
    let counting = mode == Mode::Check && passes::counting();
    let cached = if counting { None } else { cache::dir() };
    if let Some((text, meta)) = cached.as_deref().and_then(|d| super::kept::read_cached(d, &k)) {
        with(|m| m.cache_hits += 1);
        return Ok(Instrumented { text, meta, key: k });
    }
    let (text, meta) = match passes::instrument(ptx, mode) {
        Ok(out) => {
            if let (true, Some(r)) = (counting, &out.check) {
                with(|m| m.add_static(r));
            }
            (out.ptx.into_bytes(), out.meta)
        }
        Err(why) => return Err(format!("not instrumented: {why}")),
    };
    if let Some(dir) = &cached {
        // The metadata first: a reader that finds the PTX mostly finds its metadata too.
        cache::write(dir, &format!("{k}.meta"), &k, meta.to_text().as_bytes());
        cache::write(dir, &format!("{k}.ptx"), &k, &text);
    }
    Ok(Instrumented { text, meta, key: k })
}

/// What reports of a module gpusan did not instrument need to know of it: read from the
/// newest PTX in its image, if any (modules that declare the device ABI themselves, built
/// by the `ptxas` stand-in, whose records number functions alike).
pub unsafe fn meta_of_image(image: *const c_void) -> Option<ModuleMeta> {
    ptx_of(image, u32::MAX).ok().map(|ptx| ModuleMeta::of_ptx(&ptx))
}

/// The driver refused what [`substitute`] gave for `image`. A cached file is the likely
/// cause (cut short by a full disk, or edited): it goes, so the next run instruments again
/// instead of refusing forever.
pub unsafe fn refused(image: *const c_void, mode: Mode) {
    let Ok(ptx) = ptx_of(image, target_arch()) else { return };
    if let Some(dir) = cache::dir() {
        let k = key(&ptx, &passes::cache_name(mode));
        let _ = std::fs::remove_file(dir.join(format!("{k}.meta")));
        let _ = std::fs::remove_file(dir.join(format!("{k}.ptx")));
    }
}

/// Reads the counters of every instrumented module (call after a synchronization): the
/// `count` pass's, or in a counting `check` build the four of `check/counting.rs`.
pub fn read_counters() {
    let check = crate::state::state().options.mode == Mode::Check;
    let counting = check && passes::counting();
    // A plain check build has no counter: asking every module for one at every
    // synchronization is a failed driver lookup per module (hundreds in a PyTorch job).
    if check && !counting {
        return;
    }
    let loaded = with(|m| m.instrumented.clone());
    for l in loaded {
        if counting {
            let mut values = [0u64; 4];
            let read = gpusan_abi::COUNTER_SYMBOLS
                .iter()
                .zip(&mut values)
                .all(|(name, v)| read_u64(l, name).map(|x| *v = x).is_some());
            if read {
                with(|m| m.check_dynamic.insert(l, values));
            }
        } else if let Some(value) = read_u64(l, COUNTER) {
            with(|m| m.counts.insert(l, value));
        }
    }
}

/// A `.u64` module variable's value, through the driver.
fn read_u64(l: Loaded, name: &str) -> Option<u64> {
    let (ptr, size) = crate::capture::global_of(l, name)?;
    if size != 8 {
        return None;
    }
    let mut value = 0u64;
    unsafe { crate::capture::dtoh(&mut value as *mut u64 as *mut c_void, ptr, 8) }.then_some(value)
}
