//! What substituting a module yields ([`Image`]) and the cache entries of instrumented PTX
//! read back ([`cached`]): shared by `substitute` (module loads) and `built` (cubins built
//! from instrumented PTX), which both decide what the driver loads.

use gpusan_passes::meta::ModuleMeta;
use gpusan_runtime::cache;

/// What a load became.
pub enum Image {
    /// Load `bytes` instead (leaked: the driver may read a lazily loaded image later);
    /// `meta` is what reports of its kernels need to know of it.
    Substitute { bytes: &'static [u8], meta: ModuleMeta, route: super::coverage::Route },
    /// Load the original; the reason goes into the report.
    Original(String),
    /// Load the original: machine code gpusan built from instrumented PTX (`routes::built`);
    /// `meta` is its module's.
    Built(ModuleMeta, super::coverage::Route),
}

/// The instrumented PTX and metadata cached under `key`, for a cubin built from it.
pub fn cached(key: &str) -> Option<(Vec<u8>, ModuleMeta)> {
    read_cached(&cache::dir()?, key)
}

/// The cached PTX of entry `key` in `dir` and its metadata; `None` (instrument again)
/// when either is missing, fails [`cache::read`]'s checks or is not what this cache writes.
pub fn read_cached(dir: &std::path::Path, key: &str) -> Option<(Vec<u8>, ModuleMeta)> {
    let text = cache::read(dir, &format!("{key}.ptx"), key)?;
    // The driver reads PTX up to its NUL: a file with one inside, or no `.version`, is not
    // what this cache wrote.
    if text.contains(&0) || !text.windows(8).any(|w| w == b".version") {
        return None;
    }
    let meta = String::from_utf8(cache::read(dir, &format!("{key}.meta"), key)?).ok()?;
    Some((text, ModuleMeta::from_text(&meta).ok()?))
}
