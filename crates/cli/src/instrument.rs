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
    // Printed straight into the output: the text of a large instrumented kernel is a few
    // hundred MB that need not be held whole next to its tree.
    let sink: Box<dyn Write> = match output {
        Some(o) => Box::new(std::fs::File::create(o).with_context(|| format!("writing {}", o.display()))?),
        None => Box::new(std::io::stdout().lock()),
    };
    let mut out = IoText { inner: std::io::BufWriter::with_capacity(1 << 20, sink), error: None };
    let printed = gpusan_ptx::printer::write_module(&mut out, &module);
    let where_to = output.map_or("standard output".to_string(), |o| o.display().to_string());
    if let Some(e) = out.error.take() {
        return Err(e).with_context(|| format!("writing {where_to}"));
    }
    printed.expect("printing fails only when writing does");
    out.inner.flush().with_context(|| format!("writing {where_to}"))?;
    // The process ends after this file (every caller of `instrument_file` exits or runs
    // ptxas next): freeing the tree node by node would only delay that.
    std::mem::forget(module);
    eprintln!("gpusan: {} sites instrumented by `{pass}`", report.total_sites());
    Ok(())
}

/// `fmt::Write` onto an `io::Write`, keeping the first I/O error (`fmt::Error` has no room
/// for it).
struct IoText<W: Write> {
    inner: W,
    error: Option<std::io::Error>,
}

impl<W: Write> std::fmt::Write for IoText<W> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.inner.write_all(s.as_bytes()).map_err(|e| {
            self.error.get_or_insert(e);
            std::fmt::Error
        })
    }
}
