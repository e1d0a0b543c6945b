//! `gpusan ptx speed`: how fast a pass instruments, stage by stage (parse, verify the
//! input, the pass, verify its output, print), in MB of input PTX per second on one core,
//! so a slow stage is named rather than guessed (`bench/instrument-speed.sh`).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Args;
use serde::Serialize;

#[derive(Args)]
pub struct SpeedArgs {
    /// PTX files, each timed on its own; the totals add their best runs.
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// The pass to time.
    #[arg(long, default_value = "check", value_parser = clap::builder::PossibleValuesParser::new(gpusan_passes::PASSES))]
    pass: String,
    /// Timed runs per file (the best is kept).
    #[arg(long, default_value_t = 3)]
    runs: u32,
}

/// Seconds per stage of one run.
#[derive(Debug, Default, Clone, Copy, Serialize)]
struct Stages {
    parse: f64,
    verify_input: f64,
    pass: f64,
    verify_output: f64,
    print: f64,
}

impl Stages {
    fn total(&self) -> f64 {
        self.parse + self.verify_input + self.pass + self.verify_output + self.print
    }

    fn add(&mut self, o: &Stages) {
        self.parse += o.parse;
        self.verify_input += o.verify_input;
        self.pass += o.pass;
        self.verify_output += o.verify_output;
        self.print += o.print;
    }
}

#[derive(Debug, Serialize)]
struct FileSpeed {
    file: String,
    bytes: usize,
    output_bytes: usize,
    sites: u64,
    best_seconds: f64,
    mb_per_s: f64,
    best_stages: Stages,
}

#[derive(Debug, Serialize)]
struct Report {
    pass: String,
    runs: u32,
    mb: &'static str,
    files: Vec<FileSpeed>,
    total_bytes: usize,
    total_best_seconds: f64,
    total_mb_per_s: f64,
    total_stages: Stages,
}

fn once(src: &str, pass: &dyn gpusan_passes::Pass) -> Result<(Stages, usize, u64)> {
    let secs = |d: Duration| d.as_secs_f64();
    let t = Instant::now();
    let mut module = gpusan_ptx::parse(src).map_err(|e| anyhow::anyhow!("{e}"))?;
    let parse = secs(t.elapsed());
    let t = Instant::now();
    gpusan_passes::verify(&module).map_err(|e| anyhow::anyhow!("input does not verify: {e:?}"))?;
    let verify_input = secs(t.elapsed());
    let t = Instant::now();
    let report = pass.run_with_source(&mut module, src).map_err(|e| anyhow::anyhow!("{e}"))?;
    let pass_s = secs(t.elapsed());
    let t = Instant::now();
    gpusan_passes::verify(&module).map_err(|e| anyhow::anyhow!("output does not verify: {e:?}"))?;
    let verify_output = secs(t.elapsed());
    let t = Instant::now();
    let out = gpusan_ptx::print(&module);
    let print = secs(t.elapsed());
    let stages = Stages { parse, verify_input, pass: pass_s, verify_output, print };
    Ok((stages, out.len(), report.total_sites()))
}

pub fn run(a: SpeedArgs) -> Result<()> {
    let pass = gpusan_passes::pass_by_name(&a.pass).expect("clap checked the name");
    let mut files = Vec::new();
    let mut total = Stages::default();
    for input in &a.inputs {
        let src = crate::input::read_text(input)?;
        let mut best: Option<(Stages, usize, u64)> = None;
        for _ in 0..a.runs.max(1) {
            let r = once(&src, &*pass).with_context(|| input.display().to_string())?;
            if best.as_ref().is_none_or(|b| r.0.total() < b.0.total()) {
                best = Some(r);
            }
        }
        let (stages, output_bytes, sites) = best.expect("at least one run");
        total.add(&stages);
        files.push(FileSpeed {
            file: input.display().to_string(),
            bytes: src.len(),
            output_bytes,
            sites,
            best_seconds: stages.total(),
            mb_per_s: src.len() as f64 / 1e6 / stages.total(),
            best_stages: stages,
        });
    }
    let total_bytes = files.iter().map(|f| f.bytes).sum();
    let report = Report {
        pass: a.pass,
        runs: a.runs,
        mb: "10^6 bytes of input PTX",
        total_best_seconds: total.total(),
        total_mb_per_s: total_bytes as f64 / 1e6 / total.total(),
        total_bytes,
        total_stages: total,
        files,
    };
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}
