//! `gpusan nvcc-env`: a CUDA toolkit whose ptxas is gpusan's stand-in, for build-time
//! instrumentation of everything nvcc compiles.
//!
//! nvcc cannot be pointed at another ptxas by PATH order or option: its `nvcc.profile`
//! puts nvcc's own folder (`_HERE_`) first on the PATH of every tool it runs. `_HERE_` is
//! the folder nvcc was *invoked* from, symlinks not resolved (checked with `nvcc -dryrun`
//! on CUDA 13.0), so a folder of symlinks is a complete toolkit: every entry of the real
//! toolkit linked, except `bin/ptxas`, which links to gpusan. Nothing of the real install
//! is changed and nothing large is copied.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;

/// Written into the toolkit folder so an existing one is recognised (and only then
/// replaced).
const MARKER: &str = ".gpusan-toolkit";

#[derive(Args)]
pub struct NvccEnvArgs {
    /// The CUDA toolkit to wrap (the folder holding bin/nvcc). Default: the one whose nvcc
    /// is on PATH, else $CUDA_HOME, $CUDA_PATH, /usr/local/cuda.
    #[arg(long, value_name = "DIR")]
    cuda: Option<PathBuf>,
    /// Where to create the wrapped toolkit. Default: ~/.cache/gpusan/toolkit-<hash>
    /// ($GPUSAN_CACHE_DIR instead of ~/.cache/gpusan).
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

pub fn run(a: NvccEnvArgs) -> Result<()> {
    let cuda = match a.cuda {
        Some(c) => c,
        None => find_toolkit()?,
    };
    let cuda = cuda.canonicalize().with_context(|| format!("{}", cuda.display()))?;
    if !cuda.join("bin/nvcc").is_file() || !cuda.join("bin/ptxas").is_file() {
        bail!("{} is not a CUDA toolkit (no bin/nvcc and bin/ptxas)", cuda.display());
    }
    let me = std::env::current_exe().context("locating the gpusan binary")?;
    let dir = match a.dir {
        Some(d) => d,
        None => default_dir(&cuda, &me)?,
    };
    create(&cuda, &me, &dir)?;
    let dir = dir.canonicalize()?;
    let bin = dir.join("bin");
    let real = cuda.join("bin/ptxas");
    let mut out = std::io::stdout().lock();
    writeln!(out, "# gpusan: nvcc in {} assembles through gpusan's ptxas stand-in (check pass)", bin.display())?;
    writeln!(out, "export PATH={}:\"$PATH\"", quote(&bin))?;
    writeln!(out, "export {}={}", gpusan_abi::env::REAL_PTXAS, quote(&real))?;
    writeln!(out, "export CUDACXX={}", quote(&bin.join("nvcc")))?;
    Ok(())
}

fn quote(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', r"'\''"))
}

/// The toolkit of the `nvcc` on PATH (symlinks resolved), else the usual places.
fn find_toolkit() -> Result<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    for d in std::env::split_paths(&path) {
        let nvcc = d.join("nvcc");
        if let Ok(real) = nvcc.canonicalize() {
            // A wrapped toolkit's nvcc resolves to the real one, as wanted.
            if let Some(top) = real.parent().and_then(Path::parent) {
                return Ok(top.to_path_buf());
            }
        }
    }
    let homes = ["CUDA_HOME", "CUDA_PATH"].iter().filter_map(std::env::var_os).map(PathBuf::from);
    homes
        .chain([PathBuf::from("/usr/local/cuda")])
        .find(|h| h.join("bin/nvcc").is_file())
        .context("no CUDA toolkit found (nvcc not on PATH, no $CUDA_HOME, no /usr/local/cuda): pass --cuda DIR")
}

fn default_dir(cuda: &Path, me: &Path) -> Result<PathBuf> {
    // Empty is unset, as for the runtime's cache: not the working folder.
    let base = match std::env::var_os(gpusan_abi::env::CACHE_DIR).filter(|d| !d.is_empty()) {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(std::env::var_os("HOME").context("HOME is not set: pass --dir")?).join(".cache/gpusan"),
    };
    // One folder per (toolkit, gpusan binary): FNV-1a, stable across runs and builds.
    let mut h: u64 = 0xcbf29ce484222325;
    for b in cuda.as_os_str().as_encoded_bytes().iter().chain(b"\0").chain(me.as_os_str().as_encoded_bytes()) {
        h = (h ^ u64::from(*b)).wrapping_mul(0x100000001b3);
    }
    Ok(base.join(format!("toolkit-{h:016x}")))
}

/// Builds the wrapped toolkit in `dir` (replacing one gpusan made there before).
pub fn create(cuda: &Path, gpusan: &Path, dir: &Path) -> Result<()> {
    if dir.exists() {
        if !dir.join(MARKER).is_file() {
            bail!("{} exists and is not a toolkit gpusan made: choose another --dir", dir.display());
        }
        // Symlinks are removed, not followed: the real toolkit is untouched.
        std::fs::remove_dir_all(dir).with_context(|| format!("removing the old {}", dir.display()))?;
    }
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).with_context(|| format!("creating {}", bin.display()))?;
    std::fs::write(dir.join(MARKER), format!("{}\n", cuda.display()))?;
    let link = |target: &Path, at: &Path| {
        std::os::unix::fs::symlink(target, at).with_context(|| format!("linking {}", at.display()))
    };
    for e in std::fs::read_dir(cuda).with_context(|| format!("reading {}", cuda.display()))? {
        let e = e?;
        if e.file_name() != "bin" {
            link(&e.path(), &dir.join(e.file_name()))?;
        }
    }
    for e in std::fs::read_dir(cuda.join("bin"))? {
        let e = e?;
        if e.file_name() != "ptxas" {
            link(&e.path(), &bin.join(e.file_name()))?;
        }
    }
    link(gpusan, &bin.join("ptxas"))
}
