//! Host call sites: interned backtraces captured cheaply where the program allocates, frees
//! or launches ([`SiteId`]), symbolized into [`Frame`]s only when a report needs them, and
//! which frames are the CUDA runtime's own (folded in reports).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

use serde::{Deserialize, Serialize};

use super::{hex, hex_option};
use crate::locks;
use crate::per_process::{fork_waits, PerProcess};

/// An interned host backtrace: raw return addresses, captured cheaply at allocation time and
/// symbolized only when a report needs them. Process-wide; [`SiteId::UNKNOWN`] is no site.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SiteId(u32);

impl SiteId {
    pub const UNKNOWN: SiteId = SiteId(0);

    /// For passing ids through FFI and for fixtures; an id never captured symbolizes to nothing.
    pub const fn from_raw(raw: u32) -> Self {
        SiteId(raw)
    }

    pub const fn raw(self) -> u32 {
        self.0
    }
}

/// One symbolized frame. Inlined calls give several frames for one address.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Frame {
    /// Demangled, with its parameters.
    pub function: Option<String>,
    pub file: Option<String>,
    pub line: Option<u32>,
    /// The return address (the call is the instruction before it).
    #[serde(with = "hex")]
    #[cfg_attr(feature = "schema", schemars(schema_with = "crate::registry::hex::schema"))]
    pub address: u64,
    /// The function's symbol as the module spells it, where demangling changed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub symbol: Option<String>,
    /// The executable or library the address is in (found by `gpusan_runtime::symbols`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub module: Option<String>,
    /// The call's offset in `module`, as `addr2line -e MODULE OFFSET` takes it.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "hex_option")]
    #[cfg_attr(feature = "schema", schemars(schema_with = "crate::registry::hex::schema"))]
    pub offset: Option<u64>,
}

impl Frame {
    /// A frame known by its address alone.
    pub fn at(address: u64) -> Frame {
        Frame { function: None, file: None, line: None, address, symbol: None, module: None, offset: None }
    }

    /// Whether the frame is the CUDA runtime's or driver's own, or gpusan's, rather than the
    /// program's: reports fold such frames into one line. Statically linked cudart is known
    /// by its internal symbols (`__cudart*`, `cudart::`), the launch code nvcc writes into
    /// the program by its reserved names (`__device_stub_*`, `__wrapper__device_stub_*`,
    /// `__cudaLaunchKernel_helper`); an address of 0 is where an unwinder ran off the end of
    /// a runtime thread's stack.
    pub fn in_cuda_runtime(&self) -> bool {
        if self.address == 0 {
            return true;
        }
        let module = self.module.as_deref().map(|m| m.rsplit('/').next().unwrap_or(m)).unwrap_or_default();
        // `libsanitizer-public`: the Compute Sanitizer API's, which calls gpusan's callbacks.
        let runtime_module =
            ["libcudart", "libcuda.so", "libgpusan", "libsanitizer-public"].iter().any(|p| module.starts_with(p));
        let internal = |name: &str| {
            ["__cuda", "cudart::", "__device_stub_", "__wrapper__device_stub_", "libcudart_static_"]
                .iter()
                .any(|p| name.starts_with(p))
                || mangled_internal(name)
        };
        // Statically linked cudart's public entry points (`cudaLaunchKernel`) live in the
        // program's own module; without line information they cannot be the user's code.
        let static_cudart_api = |name: &str| {
            self.line.is_none()
                && name
                    .strip_prefix("cuda")
                    .and_then(|rest| rest.chars().next())
                    .is_some_and(|c| c.is_ascii_uppercase())
        };
        let names = [self.symbol.as_deref(), self.function.as_deref()];
        runtime_module || names.into_iter().flatten().any(|n| internal(n) || static_cudart_api(n))
    }
}

/// An Itanium-mangled name of a reserved launch helper (`_Z25__cudaLaunchKernel_helper…`,
/// `_Z23__device_stub__Z4fillPfiPfi`): its length prefix, then one of the reserved names.
fn mangled_internal(name: &str) -> bool {
    let Some(rest) = name.strip_prefix("_Z") else { return false };
    let body = rest.trim_start_matches(|c: char| c.is_ascii_digit());
    ["__cuda", "__device_stub_", "__wrapper__device_stub_"].iter().any(|p| body.starts_with(p))
}

/// How much of each stack is kept, and how many distinct stacks at most.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SiteConfig {
    /// Frames kept per site, 1 to [`SiteConfig::MAX_DEPTH`].
    pub depth: usize,
    /// Distinct sites kept; later new stacks become [`SiteId::UNKNOWN`], bounding memory.
    pub max_sites: usize,
}

impl SiteConfig {
    pub const MAX_DEPTH: usize = 64;
}

impl Default for SiteConfig {
    fn default() -> Self {
        SiteConfig { depth: 16, max_sites: 1 << 20 }
    }
}

static SITE_DEPTH: AtomicUsize = AtomicUsize::new(16);
static MAX_SITES: AtomicUsize = AtomicUsize::new(1 << 20);
/// How many frames the unwinder reports up to and including `capture_site` itself; fixed for
/// a build, found on the first capture. `usize::MAX` until then.
static OWN_FRAMES: AtomicUsize = AtomicUsize::new(usize::MAX);
/// The same for `capture_site_outside`.
static OWN_FRAMES_OUTSIDE: AtomicUsize = AtomicUsize::new(usize::MAX);
/// The same for `capture_site_outside_after`.
static OWN_FRAMES_AFTER: AtomicUsize = AtomicUsize::new(usize::MAX);

/// FxHash: the keys are return addresses, not attacker-chosen, and SipHash over 16 of them
/// would be a visible part of the capture cost.
#[derive(Default)]
struct FxHasher(u64);

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

struct SiteTable {
    stacks: Vec<Arc<[u64]>>,
    index: HashMap<Arc<[u64]>, SiteId, BuildHasherDefault<FxHasher>>,
}

/// Per process: a child made by `fork` starts with no sites, like its registry.
static SITES: PerProcess<RwLock<SiteTable>> =
    PerProcess::new(|| RwLock::new(SiteTable { stacks: vec![Arc::from([])], index: HashMap::default() }));

/// Sets the depth and bound of future captures.
pub fn configure_sites(config: SiteConfig) {
    SITE_DEPTH.store(config.depth.clamp(1, SiteConfig::MAX_DEPTH), Ordering::Relaxed);
    MAX_SITES.store(config.max_sites, Ordering::Relaxed);
}

/// The current host stack, starting `skip_frames` frames above the caller (0: the caller
/// itself), interned. Costs one unwind of the kept frames and a hash lookup; no symbols.
///
/// Frames count as the unwinder sees them: a function that returns `capture_site(..)`
/// directly may be compiled as a tail call and have no frame of its own, so use the id
/// before returning it, and mark wrappers counted by `skip_frames` `#[inline(never)]`.
#[inline(never)]
pub fn capture_site(skip_frames: usize) -> SiteId {
    let mut skip = skip_frames;
    let target = capture_site as fn(usize) -> SiteId as usize;
    capture(target, &OWN_FRAMES, |_| skip.checked_sub(1).map(|left| skip = left).is_some(), &[])
}

/// The current host stack from its first frame outside `own`, interned: `own` holds the
/// code of the library that captures (an injected one), whose frames, however many and
/// whatever inlining made of them, are none of the program's.
#[inline(never)]
pub fn capture_site_outside(own: Range<u64>) -> SiteId {
    let target = capture_site_outside as fn(Range<u64>) -> SiteId as usize;
    capture(target, &OWN_FRAMES_OUTSIDE, |ip| own.contains(&ip), &[])
}

/// Frames a site may carry ahead of its native ones ([`capture_site_outside_after`]).
pub const MAX_PREFIX: usize = 16;

/// As [`capture_site_outside`], the site's stack starting with `prefix` (the Python frames
/// above the call, as [`crate::pyframes`] tags them, innermost first; at most
/// [`MAX_PREFIX`] are kept) and going on with the native frames.
#[inline(never)]
pub fn capture_site_outside_after(own: Range<u64>, prefix: &[u64]) -> SiteId {
    let target = capture_site_outside_after as fn(Range<u64>, &[u64]) -> SiteId as usize;
    capture(target, &OWN_FRAMES_AFTER, |ip| own.contains(&ip), prefix)
}

/// The stack above `target`'s frame (`own_frames` counts the frames up to it), from the
/// first frame `skip` lets through, after `prefix`.
#[inline(always)]
fn capture(target: usize, own_frames: &AtomicUsize, mut skip: impl FnMut(u64) -> bool, prefix: &[u64]) -> SiteId {
    const CALIBRATION_LIMIT: usize = 32;
    let known = own_frames.load(Ordering::Relaxed);
    let prefix = &prefix[..prefix.len().min(MAX_PREFIX)];
    let depth = SITE_DEPTH.load(Ordering::Relaxed).clamp(1, SiteConfig::MAX_DEPTH) + prefix.len();
    let mut own = known;
    let (mut seen, mut skipping, mut n) = (0, true, prefix.len());
    let mut buf = [0u64; SiteConfig::MAX_DEPTH + MAX_PREFIX];
    buf[..n].copy_from_slice(prefix);
    // One closure for both cases, so the first (calibrating) capture walks exactly the frames
    // later ones do. Naming functions costs an FDE search per frame, hence done once.
    let mut on_frame = |frame: &backtrace::Frame| {
        seen += 1;
        if own == usize::MAX {
            if frame.symbol_address() as usize == target {
                own = seen;
            }
            return seen < CALIBRATION_LIMIT;
        }
        if seen <= own {
            return true;
        }
        if skipping && skip(frame.ip() as u64) {
            return true;
        }
        skipping = false;
        buf[n] = frame.ip() as u64;
        n += 1;
        n < depth
    };
    #[cfg(unix)]
    // SAFETY: the lock `backtrace::trace` adds guards Windows' dbghelp, which is not
    // thread-safe; on Unix the walk is `_Unwind_Backtrace`, which is, and a process-wide lock
    // would serialise every allocating thread of the program.
    unsafe {
        backtrace::trace_unsynchronized(&mut on_frame);
    }
    #[cfg(not(unix))]
    backtrace::trace(&mut on_frame);
    if known == usize::MAX {
        // Not found: keep every frame from now on (a few runtime frames on top of each stack).
        own_frames.store(if own == usize::MAX { 0 } else { own }, Ordering::Relaxed);
        if own == usize::MAX {
            return SiteId::UNKNOWN;
        }
    }
    intern(&buf[..n])
}

fn intern(stack: &[u64]) -> SiteId {
    if stack.is_empty() {
        return SiteId::UNKNOWN;
    }
    if let Some(&id) = locks::read(SITES.get()).index.get(stack) {
        return id;
    }
    let mut table = locks::write(SITES.get());
    if let Some(&id) = table.index.get(stack) {
        return id;
    }
    let Ok(raw) = u32::try_from(table.stacks.len()) else { return SiteId::UNKNOWN };
    if table.stacks.len() > MAX_SITES.load(Ordering::Relaxed) {
        return SiteId::UNKNOWN;
    }
    let stack: Arc<[u64]> = Arc::from(stack);
    table.stacks.push(stack.clone());
    table.index.insert(stack, SiteId(raw));
    SiteId(raw)
}

/// The raw return addresses of a site, innermost first.
pub fn site_addresses(site: SiteId) -> Vec<u64> {
    locks::read(SITES.get()).stacks.get(site.0 as usize).map_or_else(Vec::new, |s| s.to_vec())
}

/// Resolves a site to functions, files and lines. Slow (reads debug information on first
/// use): call it when writing reports, never on an allocation path. Addresses that do not
/// resolve give a frame with only the address.
pub fn symbolize(site: SiteId) -> Vec<Frame> {
    // `backtrace::resolve` keeps a process-wide lock and caches of its own: a fork waits
    // rather than leave them half-held in the child (where, if it could not wait, frames
    // keep only their addresses).
    fork_waits(|| symbolize_now(site)).unwrap_or_else(|| site_addresses(site).into_iter().map(Frame::at).collect())
}

fn symbolize_now(site: SiteId) -> Vec<Frame> {
    let mut frames = Vec::new();
    for address in site_addresses(site) {
        if let Some(py) = crate::pyframes::frame(address) {
            let (function, file) = (Some(py.function.to_string()), Some(py.file.to_string()));
            frames.push(Frame { function, file, line: Some(py.line), ..Frame::at(address) });
            continue;
        }
        let place = crate::symbols::resolve(address);
        let at = Frame { module: place.module, offset: place.offset, ..Frame::at(address) };
        if place.functions.is_empty() {
            frames.push(at.clone());
        }
        for f in place.functions {
            frames.push(Frame { function: f.name, symbol: f.symbol, file: f.file, line: f.line, ..at.clone() });
        }
    }
    frames
}
