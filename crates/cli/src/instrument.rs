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
}

pub fn run(a: InstrumentArgs) -> Result<()> {
    instrument_file(&a.input, &a.pass, a.output.as_deref())
}

/// Instruments `input` with the pass named `pass`; writes the result to `output` (or
/// standard output) and a one-line summary to standard error.
pub fn instrument_file(input: &PathBuf, pass: &str, output: Option<&Path>) -> Result<()> {
    let src = crate::input::read_input(input)?;
    let p = gpusan_passes::pass_by_name(pass).expect("clap checked the name");
    let (module, report) = match gpusan_passes::instrument_tree(&src, &*p) {
        Ok(out) => out,
        Err(e) => {
            eprint!("{}", crate::diag::render(&e, &input.display().to_string(), &src));
            bail!("{} not instrumented", input.display());
        }
    };
    let ptx = gpusan_ptx::print(&module);
    // The process ends after this file (every caller of `instrument_file` exits or runs
    // ptxas next): freeing the tree node by node would only delay that.
    std::mem::forget(module);
    match output {
        Some(o) => std::fs::write(o, &ptx).with_context(|| format!("writing {}", o.display()))?,
        None => std::io::stdout().lock().write_all(ptx.as_bytes())?,
    }
    eprintln!("gpusan: {} sites instrumented by `{pass}`", report.total_sites());
    Ok(())
}
