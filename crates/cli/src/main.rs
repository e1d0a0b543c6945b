//! The `gpusan` command: one binary for every mode (`gpusan ptx …` now; `gpusan run`,
//! `gpusan sim` as those crates get code).

mod ptx;
mod run;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "gpusan", version, about = "Memory safety for CUDA programs on real NVIDIA GPUs")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a CUDA program with gpusan's runtime injected and report what it finds.
    Run(run::RunArgs),
    /// Work with PTX files: format, count memory instructions, dump control flow.
    #[command(subcommand)]
    Ptx(ptx::PtxCommand),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(args) => run::run(args),
        Command::Ptx(cmd) => ptx::run(cmd).map(|()| 0),
    };
    match result {
        Ok(code) => ExitCode::from(code.clamp(0, 255) as u8),
        Err(e) => {
            eprintln!("gpusan: {e:#}");
            ExitCode::FAILURE
        }
    }
}
