//! What `gpusan run` adds to a Python program: gpusan's Python files (`python/gpusan/`,
//! shipped inside this binary) written once per gpusan build into the cache folder and put
//! first on the program's PYTHONPATH, whose `sitecustomize` installs the pool hooks of
//! PyTorch and CuPy when the program imports them (and chains to the program's own
//! `sitecustomize`); and `--torch-allocator async`, which makes PyTorch use its
//! stream-ordered allocator instead of the caching one.

use std::ffi::{OsStr, OsString};
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

use clap::ValueEnum;
use gpusan_runtime::cache;

/// The files, as they are written: path in the folder, then content. `sitecustomize.py` is
/// `python/gpusan/_sitecustomize.py` under the name Python looks for.
pub const FILES: &[(&str, &str)] = &[
    ("sitecustomize.py", include_str!("../../../python/gpusan/_sitecustomize.py")),
    ("gpusan/__init__.py", include_str!("../../../python/gpusan/__init__.py")),
    ("gpusan/_autoload.py", include_str!("../../../python/gpusan/_autoload.py")),
    ("gpusan/_pool.py", include_str!("../../../python/gpusan/_pool.py")),
    ("gpusan/_sitecustomize.py", include_str!("../../../python/gpusan/_sitecustomize.py")),
    ("gpusan/torch_hook.py", include_str!("../../../python/gpusan/torch_hook.py")),
    ("gpusan/_torch_shim.cpp", include_str!("../../../python/gpusan/_torch_shim.cpp")),
    ("gpusan/cupy_hook.py", include_str!("../../../python/gpusan/cupy_hook.py")),
    ("gpusan/__main__.py", include_str!("../../../python/gpusan/__main__.py")),
    ("gpusan/pytest_plugin.py", include_str!("../../../python/gpusan/pytest_plugin.py")),
];

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq)]
pub enum PythonHooks {
    /// gpusan's folder first on PYTHONPATH: PyTorch's and CuPy's pools report their blocks.
    On,
    /// PYTHONPATH left as it is: pooled tensors are checked against whole segments.
    Off,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq)]
pub enum TorchAllocator {
    /// PyTorch's allocator as the program has it (the caching one, followed by the hooks).
    Caching,
    /// PyTorch's stream-ordered allocator (`backend:cudaMallocAsync`): each tensor is a
    /// cudaMallocAsync block gpusan sees by itself.
    Async,
}

/// The folder (under the cache folder, named by gpusan's version and the files' digest)
/// holding the files, written now unless already there as they should be.
pub fn folder() -> Result<PathBuf, String> {
    let base = cache::dir().ok_or("no cache folder (set GPUSAN_CACHE_DIR or HOME)")?;
    let parts: Vec<&[u8]> = FILES.iter().flat_map(|(n, c)| [n.as_bytes(), c.as_bytes()]).collect();
    let key = cache::key(&parts);
    let dir = base.join("python").join(format!("{}-{}", env!("CARGO_PKG_VERSION"), &key[..16]));
    write_files(&dir)?;
    Ok(dir)
}

/// The program runs these files: the folders must be the user's own and closed to others,
/// and each file is rewritten (atomically) unless it holds exactly what it should.
fn write_files(dir: &Path) -> Result<(), String> {
    let me = unsafe { libc::geteuid() };
    let mut folders: Vec<&Path> = dir.ancestors().take(3).collect();
    folders.reverse();
    for f in folders.iter().copied().chain([dir.join("gpusan").as_path()]) {
        let _ = std::fs::DirBuilder::new().recursive(true).mode(0o700).create(f);
        let m = std::fs::metadata(f).map_err(|e| format!("{}: {e}", f.display()))?;
        if let Some(why) = cache::untrusted(m.uid(), m.mode(), me) {
            return Err(format!("{} is {why}", f.display()));
        }
    }
    for (name, content) in FILES {
        let path = dir.join(name);
        if std::fs::read(&path).is_ok_and(|c| c == content.as_bytes()) {
            continue;
        }
        if !cache::write_no_follow(&path, content.as_bytes()) {
            return Err(format!("{} could not be written", path.display()));
        }
    }
    Ok(())
}

/// PYTHONPATH with `first` before the program's own entries.
pub fn pythonpath(first: &Path, theirs: Option<&OsStr>) -> OsString {
    let mut p = OsString::from(first);
    if let Some(t) = theirs.filter(|t| !t.is_empty()) {
        p.push(":");
        p.push(t);
    }
    p
}

/// The allocator setting (`key:value,…`) with PyTorch's backend made cudaMallocAsync: the
/// program's other settings kept, its own `backend` replaced.
pub fn async_alloc_conf(theirs: Option<&str>) -> String {
    let mut kept: Vec<&str> = theirs
        .unwrap_or("")
        .split(',')
        .filter(|e| !e.trim().is_empty() && e.split(':').next().map(str::trim) != Some("backend"))
        .collect();
    kept.push("backend:cudaMallocAsync");
    kept.join(",")
}

/// The variables that hold PyTorch's allocator setting: `PYTORCH_CUDA_ALLOC_CONF`, and the
/// newer device-generic `PYTORCH_ALLOC_CONF` when the program sets it (it may take
/// precedence, so it gets the backend too).
pub const ALLOC_CONF_VARS: [&str; 2] = ["PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"];

/// The report's note for `--torch-allocator async`.
pub fn async_note(value: &str) -> String {
    format!(
        "--torch-allocator async: PyTorch ran with PYTORCH_CUDA_ALLOC_CONF={value}: each tensor is a \
         cudaMallocAsync block gpusan checks by itself, instead of a block of the caching allocator; \
         PyTorch's memory statistics, its caching-allocator settings (expandable segments, split \
         sizes) and its speed and memory use differ from a run without the option"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backend_is_replaced_and_the_rest_kept() {
        assert_eq!(async_alloc_conf(None), "backend:cudaMallocAsync");
        assert_eq!(
            async_alloc_conf(Some("expandable_segments:True, backend:native,max_split_size_mb:128")),
            "expandable_segments:True,max_split_size_mb:128,backend:cudaMallocAsync"
        );
    }

    #[test]
    fn the_programs_pythonpath_follows_gpusans() {
        let p = pythonpath(Path::new("/c/py"), Some(OsStr::new("/a:/b")));
        assert_eq!(p, "/c/py:/a:/b");
        assert_eq!(pythonpath(Path::new("/c/py"), Some(OsStr::new(""))), "/c/py");
        assert_eq!(pythonpath(Path::new("/c/py"), None), "/c/py");
    }

    /// The Python side names gpusan's variables as crates/abi does (it cannot use them).
    #[test]
    fn the_python_files_name_the_abis_variables() {
        let all: String = FILES.iter().map(|(_, c)| *c).collect();
        for var in [gpusan_abi::env::REPORT_DIR, gpusan_abi::env::CACHE_DIR] {
            assert!(all.contains(&format!("\"{var}\"")), "{var}");
        }
    }

    /// Every Python file of the package is shipped (a file added beside the others and left
    /// out here would be missing under `gpusan run`, its package shadowing an installed one).
    #[test]
    fn every_python_file_is_shipped() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../python/gpusan");
        for entry in std::fs::read_dir(&dir).unwrap() {
            let name = entry.unwrap().file_name().into_string().unwrap();
            if name.ends_with(".py") || name.ends_with(".cpp") {
                let shipped = format!("gpusan/{name}");
                assert!(FILES.iter().any(|(n, _)| *n == shipped), "{shipped} is not in python::FILES");
            }
        }
    }
}
