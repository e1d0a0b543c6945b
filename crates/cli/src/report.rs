//! `gpusan report show FILE`: a report `gpusan run --report-json FILE` saved, shown again as
//! the text report `gpusan run` prints, by the same renderer and with the same options
//! (`--print-limit`, `--show-backtrace`, `--demangle`, `--verbose`). A run's findings can be
//! read later, elsewhere: on a machine without a GPU, the demo (`scripts/demo.sh`) shows a
//! run recorded on one.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use gpusan_runtime::report::{Document, TextConfig, SCHEMA_VERSION};

use crate::cs_compat::{Backtrace, Demangle, Presentation};

#[derive(Subcommand)]
pub enum ReportCommand {
    /// Print a saved `--report-json` file as the text report `gpusan run` prints.
    Show(ShowArgs),
}

#[derive(Args)]
pub struct ShowArgs {
    /// The JSON report (`gpusan run --report-json FILE`); `-` for standard input.
    file: PathBuf,
    /// Print at most N findings (0: all), as `gpusan run --print-limit`.
    #[arg(long, value_name = "N", default_value_t = 100)]
    print_limit: u64,
    /// Which call stacks findings show, as `gpusan run --show-backtrace`.
    #[arg(long, value_enum, default_value = "yes")]
    show_backtrace: Backtrace,
    /// How functions are named, as `gpusan run --demangle`.
    #[arg(long, value_enum, default_value = "full")]
    demangle: Demangle,
    /// gpusan's own view too, as `gpusan run --verbose`.
    #[arg(long)]
    verbose: bool,
}

pub fn run(cmd: ReportCommand) -> Result<()> {
    match cmd {
        ReportCommand::Show(a) => {
            print!("{}", show(&a)?);
            Ok(())
        }
    }
}

/// The text of the report in `a.file`.
fn show(a: &ShowArgs) -> Result<String> {
    let text = crate::input::read_input(&a.file)?;
    let doc = Document::from_json(&text).with_context(|| format!("{} is no gpusan JSON report", a.file.display()))?;
    if doc.schema_version > SCHEMA_VERSION {
        bail!(
            "{} has schema version {}; this gpusan reads up to {SCHEMA_VERSION}: show it with a newer gpusan",
            a.file.display(),
            doc.schema_version
        );
    }
    let presentation = Presentation {
        print_limit: a.print_limit,
        backtrace: a.show_backtrace,
        demangle: a.demangle,
        text: TextConfig { verbose: a.verbose, ..TextConfig::default() },
    };
    let mut shown = presentation.for_text(&doc);
    // The run's own note stands where it was recorded with the same limit.
    shown.notes.extend(presentation.note(&doc).filter(|n| !doc.notes.contains(n)));
    Ok(shown.to_text_with(presentation.text))
}
