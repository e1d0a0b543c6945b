//! The `gpusan` command: one binary for every mode (`gpusan ptx …` now; `gpusan run`,
//! `gpusan sim` as those crates get code).

mod ptx;

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
    /// Work with PTX files: format, count memory instructions, dump control flow.
    #[command(subcommand)]
    Ptx(ptx::PtxCommand),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Ptx(cmd) => ptx::run(cmd),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gpusan: {e:#}");
            ExitCode::FAILURE
        }
    }
}
