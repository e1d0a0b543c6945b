//! Reading a command's input: a file, or standard input for `-`, and PTX parsed from it
//! with the file's name in the error. Every subcommand that takes PTX reads it here.

use std::io::Read;
use std::path::PathBuf;

use anyhow::{Context, Result};

pub(crate) fn read_input(path: &PathBuf) -> Result<String> {
    if path.as_os_str() == "-" {
        let mut s = String::new();
        std::io::stdin().read_to_string(&mut s).context("reading standard input")?;
        Ok(s)
    } else {
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
    }
}

pub(crate) fn parse_file(path: &PathBuf) -> Result<gpusan_ptx::Module> {
    let src = read_input(path)?;
    gpusan_ptx::parse(&src).map_err(|e| anyhow::anyhow!("{}", e.with_path(path.display().to_string())))
}
