//! The `gpusan` command: one binary for every mode (`gpusan run`, `gpusan instrument`,
//! `gpusan report show`, `gpusan ptx …`, `gpusan sim …`), and NVIDIA's `ptxas` in front of the real one
//! when it is invoked by that name (see `ptxas.rs`).

mod cs_compat;
mod diag;
mod findings;
mod input;
mod instrument;
mod junit;
mod progress;
mod ptx;
mod ptxas;
mod python;
mod report;
mod run;
mod sarif;
mod schema;
mod serve;
mod sim;
mod stream;
mod supervise;
mod toolkit;

use std::ffi::OsString;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Instrumenting a module builds and drops millions of small tree nodes (a 7.5 MB module
/// becomes 53 MB of PTX): glibc's malloc and free were about an eighth of a profile of
/// `gpusan ptx speed` on it, and mimalloc does the same work in about 6% fewer
/// instructions overall (bench/instrument-speed.sh). Only this binary: the injected
/// library leaves the program's allocator alone.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(name = "gpusan", version, about = "Memory safety for CUDA programs on real NVIDIA GPUs")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a CUDA program with gpusan's runtime injected and report what it finds.
    Run(Box<run::RunArgs>),
    /// Instrument a PTX file (default: the check pass), for build-time instrumentation.
    Instrument(instrument::InstrumentArgs),
    /// Behave as ptxas: instrument the PTX input with the check pass, then run NVIDIA's
    /// ptxas with the same arguments (also what a symlink named `ptxas` to gpusan does).
    #[command(disable_help_flag = true)]
    Ptxas {
        /// ptxas's own arguments, passed through.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<OsString>,
    },
    /// Create a CUDA toolkit (symlinks) whose ptxas is gpusan's stand-in, and print the
    /// shell lines that put its nvcc first: `eval "$(gpusan nvcc-env)"`.
    NvccEnv(toolkit::NvccEnvArgs),
    /// Print the JSON Schema of the report `gpusan run --report-json` writes.
    Schema,
    /// Work with saved reports: `gpusan report show FILE` prints a `--report-json` file as
    /// the text report `gpusan run` prints.
    #[command(subcommand)]
    Report(report::ReportCommand),
    /// Work with PTX files: format, count memory instructions, dump control flow.
    #[command(subcommand)]
    Ptx(ptx::PtxCommand),
    /// Manage several fenced tenants on one GPU, each in its own memory partition (issue 18:
    /// the manager only; tenants speak its protocol), or show them (`--status`).
    Serve(serve::ServeArgs),
    /// Trace-driven simulators of proposed memory-safety hardware (issue 19): `gpusan sim
    /// mlb TRACE` (GPUArmor's Metadata Lookaside Buffer), `characterize`, `synth`.
    #[command(subcommand)]
    Sim(sim::SimCommand),
    /// Run a program and write its trace for `gpusan sim` (issue 19): `gpusan run --mode check
    /// --route binary --trace FILE`, every warp's accesses recorded by the binary route's
    /// patches (and checked), one kernel at a time.
    Trace(sim::TraceArgs),
}

fn main() -> ExitCode {
    let mut argv = std::env::args_os();
    if argv.next().is_some_and(|a0| ptxas::invoked_as_ptxas(&a0)) {
        return ExitCode::from(ptxas::main(argv.collect()));
    }
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(args) => run::run(*args),
        Command::Instrument(args) => instrument::run(args).map(|()| 0),
        Command::Ptxas { args } => return ExitCode::from(ptxas::main(args)),
        Command::NvccEnv(args) => toolkit::run(args).map(|()| 0),
        Command::Schema => schema::run().map(|()| 0),
        Command::Report(cmd) => report::run(cmd).map(|()| 0),
        Command::Ptx(cmd) => ptx::run(cmd).map(|()| 0),
        Command::Serve(args) => serve::run(args),
        Command::Sim(command) => sim::run(command),
        Command::Trace(args) => sim::trace(args),
    };
    match result {
        Ok(code) => ExitCode::from(code.clamp(0, 255) as u8),
        Err(e) => {
            eprintln!("gpusan: {e:#}");
            ExitCode::FAILURE
        }
    }
}
