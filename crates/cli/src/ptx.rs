//! `gpusan ptx …`: the PTX front-end on the command line.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use gpusan_ptx::printer;

#[derive(Subcommand)]
pub enum PtxCommand {
    /// Parse and print PTX in canonical form (streams item by item).
    Fmt(FmtArgs),
    /// Per function: instructions and memory accesses by state space (loads, stores, atomics).
    Stats(StatsArgs),
    /// Dump basic blocks, edges, dominators and loops of each function.
    Cfg(CfgArgs),
    /// Apply an instrumentation pass and print the instrumented PTX.
    Instrument(InstrumentArgs),
    /// Assemble each file before and after a pass (`ptxas -v`): registers, spills, stack.
    Regs(regs::RegsArgs),
    /// Time a pass stage by stage (parse, verify, pass, verify, print): MB of PTX per second.
    Speed(speed::SpeedArgs),
}

#[derive(Args)]
pub struct InstrumentArgs {
    /// PTX file; `-` for standard input.
    input: PathBuf,
    /// The pass to apply.
    #[arg(long, default_value = "count", value_parser = clap::builder::PossibleValuesParser::new(gpusan_passes::PASSES))]
    pass: String,
    /// Output file (default: standard output).
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// How the check pass bounds accesses to local arrays (as `gpusan run --local-bounds`).
    #[arg(long, value_enum, default_value = "object")]
    local_bounds: crate::run::LocalBounds,
}

#[derive(Args)]
pub struct FmtArgs {
    /// PTX file; `-` for standard input.
    input: PathBuf,
    /// Output file (default: standard output).
    #[arg(short, long)]
    output: Option<PathBuf>,
}

#[derive(Args)]
pub struct StatsArgs {
    /// PTX files.
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct CfgArgs {
    /// PTX file.
    input: PathBuf,
    /// Only this function (default: all functions with a body).
    #[arg(long)]
    function: Option<String>,
}

pub fn run(cmd: PtxCommand) -> Result<()> {
    match cmd {
        PtxCommand::Fmt(a) => fmt(a),
        PtxCommand::Stats(a) => crate::ptx::stats::run(&a.inputs, a.json),
        PtxCommand::Cfg(a) => cfg(a),
        PtxCommand::Instrument(a) => instrument(a),
        PtxCommand::Regs(a) => regs::run(a),
        PtxCommand::Speed(a) => speed::run(a),
    }
}

fn fmt(a: FmtArgs) -> Result<()> {
    let src = crate::input::read_input(&a.input)?;
    let mut out: Box<dyn Write> = match &a.output {
        Some(p) => Box::new(std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?),
        None => Box::new(std::io::stdout().lock()),
    };
    let mut out = std::io::BufWriter::with_capacity(1 << 20, &mut out);
    // One item at a time: memory stays near the input size however large the module.
    let mut buf = String::new();
    for item in gpusan_ptx::Items::new(&src) {
        let item = item.map_err(|e| anyhow::anyhow!("{}", e.with_path(a.input.display().to_string())))?;
        buf.clear();
        printer::write_item(&mut buf, &item).expect("String writes cannot fail");
        out.write_all(buf.as_bytes())?;
    }
    out.flush()?;
    Ok(())
}

fn cfg(a: CfgArgs) -> Result<()> {
    let module = crate::input::parse_file(&a.input)?;
    let mut found = false;
    for item in &module.items {
        let gpusan_ptx::ast::Item::Function(f) = item else { continue };
        if f.body.is_none() || a.function.as_deref().is_some_and(|n| n != f.name.as_str()) {
            continue;
        }
        found = true;
        let cfg = gpusan_ptx::cfg::Cfg::build(f).with_context(|| format!("function {}", f.name))?;
        println!("function {}", f.name);
        print!("{}", gpusan_ptx::cfg::dump(&cfg, f));
    }
    if !found {
        anyhow::bail!("no function with a body{}", a.function.map(|n| format!(" named `{n}`")).unwrap_or_default());
    }
    Ok(())
}

fn instrument(a: InstrumentArgs) -> Result<()> {
    crate::instrument::instrument_file(&a.input, (&a.pass, a.local_bounds.abi()), a.output.as_deref())
}

mod regs;
mod speed;
mod stats;
