//! `gpusan instrument IN.ptx -o OUT.ptx [--pass check]`: one PTX file through a pass, for
//! build systems that run ptxas themselves; bad input is refused with a located message.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;

#[derive(Args)]
pub struct InstrumentArgs {
    /// PTX file; `-` for standard input.
    input: PathBuf,
    /// The pass to apply.
    #[arg(long, default_value = "check", value_parser = clap::builder::PossibleValuesParser::new(gpusan_passes::PASSES))]
    pass: String,
    /// Output file (default: standard output).
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// How the check pass bounds accesses to local arrays: each array by itself, or the
    /// function's whole stack frame (as `gpusan run --local-bounds`).
    #[arg(long, value_enum, default_value = "object")]
    local_bounds: crate::run::LocalBounds,
}

pub fn run(a: InstrumentArgs) -> Result<()> {
    instrument_file(&a.input, (&a.pass, a.local_bounds.abi()), a.output.as_deref())
}

/// Instruments `input` with the pass named `pass` (the check pass bounding local memory as
/// the second part says); writes the result to `output` (or standard output) and a
/// one-line summary to standard error.
pub fn instrument_file(
    input: &Path,
    (pass, local_bounds): (&str, gpusan_abi::LocalBounds),
    output: Option<&Path>,
) -> Result<()> {
    let src = crate::input::read_input(input)?;
    let p = gpusan_passes::pass_with_local_bounds(pass, local_bounds).expect("clap checked the name");
    let (module, report) = match gpusan_passes::instrument_tree(&src, &*p) {
        Ok(out) => out,
        Err(e) => {
            eprint!("{}", crate::diag::render(&e, &input.display().to_string(), &src));
            bail!("{} not instrumented", input.display());
        }
    };
    // Printed straight out, never held as text beside the tree (a 50,000-block kernel's
    // text is some 200 MB); a file is written beside its final name and renamed into place,
    // so a failure leaves no half file.
    match output {
        Some(o) => {
            let dir = o.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
            let tmp = tempfile::Builder::new()
                .prefix(".gpusan-instrument-")
                .tempfile_in(dir)
                .with_context(|| format!("writing {}", o.display()))?;
            let mut out = std::io::BufWriter::new(tmp);
            stream(&mut out, &module).with_context(|| format!("writing {}", o.display()))?;
            let tmp =
                out.into_inner().map_err(|e| e.into_error()).with_context(|| format!("writing {}", o.display()))?;
            tmp.persist(o).with_context(|| format!("writing {}", o.display()))?;
        }
        None => stream(&mut std::io::BufWriter::new(std::io::stdout().lock()), &module)?,
    }
    // The process ends after this file (every caller of `instrument_file` exits or runs
    // ptxas next): freeing the tree node by node would only delay that.
    std::mem::forget(module);
    eprintln!("gpusan: {} sites instrumented by `{pass}`", report.total_sites());
    Ok(())
}

/// Prints `module` onto `out` and flushes it; the first I/O error is the result.
fn stream(out: &mut impl Write, module: &gpusan_ptx::Module) -> std::io::Result<()> {
    struct Fmt<'a, W: Write> {
        out: &'a mut W,
        error: Option<std::io::Error>,
    }
    impl<W: Write> std::fmt::Write for Fmt<'_, W> {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            self.out.write_all(s.as_bytes()).map_err(|e| {
                self.error = Some(e);
                std::fmt::Error
            })
        }
    }
    let mut w = Fmt { out, error: None };
    if gpusan_ptx::printer::write_module(&mut w, module).is_err() {
        return Err(w.error.unwrap_or_else(|| std::io::Error::other("the printer failed")));
    }
    out.flush()
}
