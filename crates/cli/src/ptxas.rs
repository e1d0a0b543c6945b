//! The `ptxas` stand-in: `gpusan ptxas ARGS…`, or the `gpusan` binary invoked under the
//! name `ptxas` (a symlink, busybox-style). It instruments every PTX input of a ptxas
//! command line with the check pass and runs the real ptxas on the result with the same
//! arguments, so tools that compile PTX themselves and load only machine code (nvcc,
//! Triton) produce instrumented cubins the runtime can wire to its allocation table.
//!
//! Why a stand-in rather than a flag: nvcc puts its own bin folder first on the PATH of
//! the tools it runs (`nvcc.profile`), and Triton runs `$TRITON_PTXAS_PATH`; both take a
//! program named ptxas and nothing else. The real ptxas is `$GPUSAN_REAL_PTXAS`, else the
//! first `ptxas` on PATH that is not this binary, else the one beside `nvcc` (symlinks
//! resolved), else `$CUDA_HOME/bin`, `$CUDA_PATH/bin`, `/usr/local/cuda/bin`.
//!
//! `--version` is the real one's with a line added: Triton keys its kernel cache on that
//! text, so kernels compiled before without gpusan are not reused as if instrumented.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use gpusan_abi::env::{PTXAS_KEEP, PTXAS_PASS, REAL_PTXAS};

/// Set in the real ptxas's environment: finding it set means the "real" ptxas led back to
/// this binary, which would recurse forever.
const ACTIVE_VAR: &str = gpusan_abi::env::PTXAS_ACTIVE;

/// ptxas options that take their value as the next argument (from `ptxas --help` of CUDA
/// 13.0: every option shown with `<value>`); a test keeps this list complete.
pub const VALUE_OPTIONS: &[&str] = &[
    "--Ofast-compile",
    "-Ofc",
    "--allow-expensive-optimizations",
    "-allow-expensive-optimizations",
    "--device-function-maxrregcount",
    "-func-maxrregcount",
    "--device-stack-protector",
    "-device-stack-protector",
    "--entry",
    "-e",
    "--fmad",
    "-fmad",
    "--gpu-name",
    "-arch",
    "--input-as-string",
    "-ias",
    "--machine",
    "-m",
    "--maxntid",
    "-maxntid",
    "--maxrregcount",
    "-maxrregcount",
    "--minnctapersm",
    "-minnctapersm",
    "--opt-level",
    "-O",
    "--options-file",
    "-optf",
    "--output-file",
    "-o",
    "--position-independent-code",
    "-pic",
    "--register-usage-level",
    "-regUsageLevel",
    "--sanitize",
    "-sanitize",
    "--split-compile",
    "-split-compile",
];

/// Options whose inputs the stand-in cannot see (PTX inside the argument or in another
/// file): it warns that what they bring is not instrumented.
const OPAQUE_OPTIONS: &[&str] = &["--input-as-string", "-ias", "--options-file", "-optf"];

/// Whether this process was started under the name `ptxas` (a symlink to gpusan).
pub fn invoked_as_ptxas(argv0: &OsStr) -> bool {
    Path::new(argv0).file_name().is_some_and(|n| n == "ptxas")
}

/// How the stand-in instruments, from the environment: `GPUSAN_PTXAS_PASS` (default
/// `check`), `GPUSAN_PTXAS_KEEP` (a folder to keep a copy of each instrumented PTX in),
/// `GPUSAN_LOCAL_BOUNDS` (`object` or `frame`, as `gpusan run --local-bounds` sets it: a
/// build-time instrumented kernel keeps the bounds it was built with).
struct Config {
    pass: String,
    keep: Option<PathBuf>,
    local_bounds: gpusan_abi::LocalBounds,
}

impl Config {
    fn from_env() -> Result<Config> {
        let pass = std::env::var(PTXAS_PASS).unwrap_or_else(|_| "check".into());
        if gpusan_passes::pass_by_name(&pass).is_none() {
            bail!("{PTXAS_PASS}={pass}: not a pass (one of {})", gpusan_passes::PASSES.join(", "));
        }
        let local_bounds = match std::env::var(gpusan_abi::env::LOCAL_BOUNDS) {
            Ok(name) => gpusan_abi::LocalBounds::from_name(&name)
                .with_context(|| format!("{}={name}: not `object` or `frame`", gpusan_abi::env::LOCAL_BOUNDS))?,
            Err(_) => gpusan_abi::LocalBounds::default(),
        };
        Ok(Config { pass, keep: std::env::var_os(PTXAS_KEEP).map(PathBuf::from), local_bounds })
    }
}

/// The stand-in's whole run; returns the exit code (the real ptxas's, or 1 when gpusan
/// refused an input or could not run it).
pub fn main(args: Vec<OsString>) -> u8 {
    match run(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("gpusan ptxas: {e:#}");
            1
        }
    }
}

fn run(args: Vec<OsString>) -> Result<u8> {
    if std::env::var_os(ACTIVE_VAR).is_some() {
        bail!("the real ptxas found is gpusan's stand-in again; set {REAL_PTXAS} to NVIDIA's ptxas");
    }
    let real = real_ptxas()?;
    if args.iter().any(|a| a == "--version" || a == "-V") {
        return version(&real, &args);
    }
    let config = Config::from_env()?;
    let work = tempfile::Builder::new().prefix("gpusan-ptxas-").tempdir().context("creating a temporary folder")?;
    let mut out = args.clone();
    let verbose = args.iter().any(|a| a == "-v" || a == "--verbose");
    let relocatable = args.iter().any(|a| a == "-c" || a == "--compile-only");
    let mut metas = Vec::new();
    for i in inputs(&args) {
        let path = PathBuf::from(&args[i]);
        // An unreadable input is the real ptxas's to report, in its own words; one past
        // the size limit is refused rather than passed on uninstrumented.
        let src = match crate::input::read_text(&path) {
            Ok(src) => src,
            Err(e @ crate::input::InputError::TooLarge { .. }) => return Err(e.into()),
            Err(_) => continue,
        };
        let Some((mut ptx, meta)) = instrument(&config, &path, &src, verbose)? else { continue };
        metas.push(meta);
        if relocatable {
            ptx = gpusan_passes::weak_abi(&ptx);
        }
        let stem = path.file_stem().unwrap_or(OsStr::new("input")).to_string_lossy();
        let file = work.path().join(format!("{i}-{stem}.gpusan.ptx"));
        std::fs::write(&file, &ptx).with_context(|| format!("writing {}", file.display()))?;
        if let Some(dir) = &config.keep {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            let kept = dir.join(format!("{stem}.gpusan.ptx"));
            std::fs::write(&kept, &ptx).with_context(|| format!("writing {}", kept.display()))?;
        }
        out[i] = file.into_os_string();
    }
    for a in &args {
        let name = a.to_string_lossy();
        let name = name.split('=').next().unwrap_or_default();
        if OPAQUE_OPTIONS.contains(&name) {
            eprintln!("gpusan ptxas: warning: PTX given through `{name}` is assembled as it is, not instrumented");
        }
    }
    let status = Command::new(&real)
        .args(&out)
        .env(ACTIVE_VAR, "1")
        .status()
        .with_context(|| format!("running {}", real.display()))?;
    drop(work);
    if let ([meta], false, true) = (&metas[..], relocatable, status.success()) {
        record_built(&args, meta);
    }
    Ok(exit_code(status))
}

/// Records the cubin just assembled from one instrumented module as built so
/// (`gpusan_runtime::built`): Triton loads only the cubin, and the runtime names its
/// kernels and lines from the record. Nothing when the cache folder cannot be used.
fn record_built(args: &[OsString], meta: &gpusan_passes::meta::ModuleMeta) {
    let output = args
        .iter()
        .position(|a| a == "-o" || a == "--output-file")
        .and_then(|i| args.get(i + 1))
        .map(PathBuf::from)
        .or_else(|| args.iter().find_map(|a| a.to_str()?.strip_prefix("--output-file=").map(PathBuf::from)))
        .unwrap_or_else(|| PathBuf::from("elf.o"));
    let (Some(dir), Ok(cubin)) = (gpusan_runtime::cache::dir(), std::fs::read(&output)) else { return };
    let record = gpusan_runtime::built::Built {
        origin: gpusan_runtime::built::Origin::Ptxas,
        ptx_key: None,
        meta: meta.to_text(),
    };
    gpusan_runtime::built::write(&dir, &gpusan_runtime::built::digest(&cubin), &record);
}

/// The instrumented text of one input, or `None` when it is already instrumented (it
/// declares the device ABI: instrumenting twice would be refused, and is not needed).
fn instrument(
    config: &Config,
    path: &Path,
    src: &str,
    verbose: bool,
) -> Result<Option<(String, gpusan_passes::meta::ModuleMeta)>> {
    if gpusan_passes::declares_abi(src) {
        return Ok(None);
    }
    let pass =
        gpusan_passes::pass_with_local_bounds(&config.pass, config.local_bounds).expect("checked in Config::from_env");
    match gpusan_passes::instrument_with_meta(src, &*pass) {
        Ok((out, meta)) => {
            if verbose {
                eprintln!(
                    "gpusan ptxas: {}: {} sites instrumented by `{}`",
                    path.display(),
                    out.report.total_sites(),
                    config.pass
                );
            }
            Ok(Some((out.ptx, meta)))
        }
        Err(e) => {
            eprint!("{}", crate::diag::render(&e, &path.display().to_string(), src));
            bail!("{} was not assembled: gpusan could not instrument it", path.display())
        }
    }
}

/// `ptxas --version` as the real one prints it, and a line saying gpusan is in front.
fn version(real: &Path, args: &[OsString]) -> Result<u8> {
    let out = Command::new(real)
        .args(args)
        .env(ACTIVE_VAR, "1")
        .output()
        .with_context(|| format!("running {}", real.display()))?;
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(&out.stdout)?;
    if out.status.success() {
        let pass = std::env::var(PTXAS_PASS).unwrap_or_else(|_| "check".into());
        writeln!(
            stdout,
            "gpusan {} ptxas stand-in: PTX instrumented by `{pass}`, cubins recorded",
            env!("CARGO_PKG_VERSION")
        )?;
    }
    std::io::stderr().write_all(&out.stderr)?;
    Ok(exit_code(out.status))
}

fn exit_code(status: std::process::ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => c.clamp(0, 255) as u8,
        (None, Some(sig)) => (128 + sig).clamp(0, 255) as u8,
        (None, None) => 1,
    }
}

/// Indices of the input files among ptxas's arguments: everything that is neither an
/// option nor the value of one.
pub fn inputs(args: &[OsString]) -> Vec<usize> {
    let mut found = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = args[i].to_string_lossy();
        if a.starts_with('-') && a.len() > 1 {
            if VALUE_OPTIONS.contains(&a.as_ref()) {
                i += 1;
            }
        } else {
            found.push(i);
        }
        i += 1;
    }
    found
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// NVIDIA's ptxas, never this binary (see the module documentation for the order).
pub fn real_ptxas() -> Result<PathBuf> {
    let me = std::env::current_exe().context("locating the gpusan binary")?;
    if let Some(p) = std::env::var_os(REAL_PTXAS).filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        if !is_executable(&p) {
            bail!("{REAL_PTXAS}={}: not an executable file", p.display());
        }
        if same_file(&p, &me) {
            bail!("{REAL_PTXAS}={} is gpusan itself; point it at NVIDIA's ptxas", p.display());
        }
        return Ok(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs: Vec<PathBuf> = std::env::split_paths(&path).collect();
    let candidate = |p: PathBuf| (is_executable(&p) && !same_file(&p, &me)).then_some(p);
    if let Some(p) = dirs.iter().find_map(|d| candidate(d.join("ptxas"))) {
        return Ok(p);
    }
    let beside_nvcc = dirs
        .iter()
        .map(|d| d.join("nvcc"))
        .filter(|n| n.is_file())
        .find_map(|n| candidate(n.canonicalize().ok()?.with_file_name("ptxas")));
    if let Some(p) = beside_nvcc {
        return Ok(p);
    }
    let homes = ["CUDA_HOME", "CUDA_PATH"].iter().filter_map(std::env::var_os).map(PathBuf::from);
    if let Some(p) = homes.chain([PathBuf::from("/usr/local/cuda")]).find_map(|h| candidate(h.join("bin/ptxas"))) {
        return Ok(p);
    }
    bail!("cannot find NVIDIA's ptxas (not on PATH, not beside nvcc, not in $CUDA_HOME): set {REAL_PTXAS}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<OsString> {
        s.split_whitespace().map(OsString::from).collect()
    }

    #[test]
    fn finds_the_inputs_of_nvcc_and_triton_command_lines() {
        let nvcc = args("-arch=sm_90 -m64 /tmp/a.ptx -o /tmp/a.cubin");
        assert_eq!(inputs(&nvcc), [2]);
        let triton = args("-lineinfo --fmad=false -v --opt-level 0 --gpu-name=sm_90a /tmp/t.ptx -o /tmp/t.ptx.o");
        assert_eq!(inputs(&triton), [6]);
        let spaced = args("-arch sm_90 -O3 --maxrregcount 64 -e k x.ptx --output-file y.cubin");
        assert_eq!(inputs(&spaced), [7]);
        assert_eq!(inputs(&args("--version")), Vec::<usize>::new());
    }

    #[test]
    fn relocatable_output_declares_the_abi_weak() {
        let src = ".version 9.0\n.target sm_90\n.address_size 64\n.visible .entry k(.param .u64 p)\n{\n\
                   \t.reg .b64 %rd<2>;\n\tld.param.u64 %rd1, [p];\n\tst.global.u32 [%rd1], 0;\n\tret;\n}\n";
        let ptx = gpusan_passes::instrument(src, &gpusan_passes::check::Check).unwrap().ptx;
        let weak = gpusan_passes::weak_abi(&ptx);
        for gpusan_abi::RuntimeVar { name, space, .. } in gpusan_abi::RUNTIME_VARS {
            let decl = weak.lines().find(|l| l.ends_with(&format!("{name};"))).unwrap();
            assert!(decl.starts_with(&format!(".weak .{space} ")), "{decl}");
        }
        assert_eq!(
            weak.replace(".weak .global ", ".visible .global ").replace(".weak .const ", ".visible .const "),
            ptx
        );
        assert!(!weak.contains(".visible .global") && !weak.contains(".visible .const"), "{weak}");
    }

    #[test]
    fn knows_its_own_name() {
        assert!(invoked_as_ptxas(OsStr::new("/opt/tk/bin/ptxas")));
        assert!(invoked_as_ptxas(OsStr::new("ptxas")));
        assert!(!invoked_as_ptxas(OsStr::new("/usr/bin/gpusan")));
    }
}
