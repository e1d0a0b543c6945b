//! `gpusan ptx regs`: what an instrumentation pass costs in machine resources. Each PTX
//! file is assembled by NVIDIA's ptxas (`-v`) before and after the pass; per kernel the
//! registers, spill stores and loads and stack frame of both builds, and a summary of the
//! increases (registers limit occupancy, spills and stack cost memory traffic).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use clap::Args;
use serde::Serialize;

#[derive(Args)]
pub struct RegsArgs {
    /// PTX files.
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// The pass whose cost is measured.
    #[arg(long, default_value = "check", value_parser = clap::builder::PossibleValuesParser::new(gpusan_passes::PASSES))]
    pass: String,
    /// NVIDIA's ptxas (default: found as the ptxas stand-in finds it).
    #[arg(long, value_name = "FILE")]
    ptxas: Option<PathBuf>,
    /// Write the JSON document here (default: standard output).
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
}

/// What ptxas reports for one kernel.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Resources {
    pub registers: u32,
    pub spill_stores: u32,
    pub spill_loads: u32,
    pub stack_bytes: u32,
}

#[derive(Debug, Serialize)]
struct Kernel {
    file: String,
    kernel: String,
    arch: String,
    /// Accesses the pass instrumented in this kernel.
    sites: u32,
    before: Resources,
    after: Resources,
    register_increase: i64,
}

#[derive(Debug, Serialize)]
struct Failure {
    file: String,
    error: String,
}

#[derive(Debug, Serialize)]
struct Summary {
    files: usize,
    kernels: usize,
    failed_files: usize,
    median_register_increase: f64,
    max_register_increase: i64,
    max_register_increase_kernel: Option<String>,
    median_register_ratio: f64,
    max_register_ratio: f64,
    kernels_with_register_increase: usize,
    kernels_with_new_spills: usize,
    max_spill_store_increase: i64,
    max_stack_increase: i64,
}

#[derive(Debug, Serialize)]
struct Document {
    pass: String,
    ptxas: String,
    ptxas_version: String,
    ptxas_flags: &'static str,
    summary: Summary,
    kernels: Vec<Kernel>,
    failures: Vec<Failure>,
}

pub fn run(a: RegsArgs) -> Result<()> {
    let ptxas = match a.ptxas {
        Some(p) => p,
        None => crate::ptxas::real_ptxas()?,
    };
    let version =
        Command::new(&ptxas).arg("--version").output().with_context(|| format!("running {}", ptxas.display()))?;
    let version = String::from_utf8_lossy(&version.stdout).lines().last().unwrap_or_default().to_string();
    let work = tempfile::Builder::new().prefix("gpusan-regs-").tempdir()?;

    // Files are independent: a few at a time, results in input order.
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(a.inputs.len().max(1));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut results: Vec<Option<Result<Vec<Kernel>, String>>> = (0..a.inputs.len()).map(|_| None).collect();
    let slots = std::sync::Mutex::new(&mut results);
    std::thread::scope(|s| {
        for t in 0..threads {
            let (next, slots, inputs, ptxas, work, pass) = (&next, &slots, &a.inputs, &ptxas, work.path(), &a.pass);
            s.spawn(move || loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(input) = inputs.get(i) else { break };
                let r = measure(input, pass, ptxas, &work.join(format!("{t}"))).map_err(|e| format!("{e:#}"));
                slots.lock().unwrap_or_else(|p| p.into_inner())[i] = Some(r);
            });
        }
    });

    let mut kernels = Vec::new();
    let mut failures = Vec::new();
    for (input, r) in a.inputs.iter().zip(results) {
        match r.expect("every file measured") {
            Ok(k) => kernels.extend(k),
            Err(error) => failures.push(Failure { file: input.display().to_string(), error }),
        }
    }
    let doc = Document {
        pass: a.pass,
        ptxas: ptxas.display().to_string(),
        ptxas_version: version,
        ptxas_flags: "-v --gpu-name <the .target's sm_90 or sm_90a> [-g for debug targets]",
        summary: summarize(a.inputs.len(), &kernels, failures.len()),
        kernels,
        failures,
    };
    let json = serde_json::to_string_pretty(&doc)? + "\n";
    match &a.output {
        Some(p) => std::fs::write(p, json).with_context(|| format!("writing {}", p.display()))?,
        None => print!("{json}"),
    }
    let s = &doc.summary;
    eprintln!(
        "gpusan: {} kernels in {} files ({} failed): registers +{} median, +{} max ({}); {} kernels with new spills",
        s.kernels,
        s.files,
        s.failed_files,
        s.median_register_increase,
        s.max_register_increase,
        s.max_register_increase_kernel.as_deref().unwrap_or("-"),
        s.kernels_with_new_spills
    );
    Ok(())
}

/// Both builds of one file, kernel by kernel.
fn measure(input: &Path, pass: &str, ptxas: &Path, work: &Path) -> Result<Vec<Kernel>> {
    std::fs::create_dir_all(work)?;
    let src = crate::input::read_text(input)?;
    let target = src.lines().find(|l| l.trim_start().starts_with(".target")).context("no .target directive")?;
    let arch = if target.contains("sm_90a") { "sm_90a" } else { "sm_90" };
    let debug = target.contains("debug");
    let p = gpusan_passes::pass_by_name(pass).expect("clap checked the name");
    let out = gpusan_passes::instrument(&src, &*p)
        .map_err(|e| anyhow::anyhow!("{}", e.with_path(input.display().to_string())))?;
    let original = work.join("before.ptx");
    let instrumented = work.join("after.ptx");
    std::fs::write(&original, &src)?;
    std::fs::write(&instrumented, &out.ptx)?;
    let before = assemble(ptxas, &original, arch, debug, work)?;
    let after = assemble(ptxas, &instrumented, arch, debug, work)?;
    let mut kernels = Vec::new();
    for (name, b) in before {
        let a = after
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, r)| *r)
            .with_context(|| format!("`{name}` missing after the pass"))?;
        kernels.push(Kernel {
            file: input.display().to_string(),
            sites: out.report.function(&name).map_or(0, |f| f.sites),
            register_increase: i64::from(a.registers) - i64::from(b.registers),
            kernel: name,
            arch: arch.to_string(),
            before: b,
            after: a,
        });
    }
    Ok(kernels)
}

fn assemble(ptxas: &Path, ptx: &Path, arch: &str, debug: bool, work: &Path) -> Result<Vec<(String, Resources)>> {
    let mut cmd = Command::new(ptxas);
    cmd.arg("-v").arg("--gpu-name").arg(arch).arg(ptx).arg("-o").arg(work.join("out.cubin"));
    if debug {
        cmd.arg("-g");
    }
    let out = cmd.output().with_context(|| format!("running {}", ptxas.display()))?;
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    if !out.status.success() {
        bail!("ptxas failed on {}:\n{text}", ptx.display());
    }
    Ok(parse_verbose(&text))
}

/// Per entry function, from `ptxas -v`:
///
/// ```text
/// ptxas info    : Compiling entry function '_Z1kPi' for 'sm_90'
/// ptxas info    : Function properties for _Z1kPi
///     8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
/// ptxas info    : Used 22 registers, used 0 barriers
/// ```
pub fn parse_verbose(text: &str) -> Vec<(String, Resources)> {
    let mut kernels: Vec<(String, Resources)> = Vec::new();
    let mut entry: Option<usize> = None;
    let mut properties_of: Option<String> = None;
    let number =
        |s: &str, before: &str| -> Option<u32> { s.split(before).next()?.split_whitespace().last()?.parse().ok() };
    for line in text.lines() {
        if let Some(rest) = line.split("Compiling entry function '").nth(1) {
            let name = rest.split('\'').next().unwrap_or_default().to_string();
            kernels.push((name, Resources::default()));
            entry = Some(kernels.len() - 1);
        } else if let Some(rest) = line.split("Function properties for ").nth(1) {
            properties_of = Some(rest.trim().to_string());
        } else if line.contains("bytes stack frame") {
            let Some(name) = properties_of.take() else { continue };
            if let Some((_, r)) = kernels.iter_mut().find(|(n, _)| *n == name) {
                r.stack_bytes = number(line, " bytes stack frame").unwrap_or(0);
                r.spill_stores = number(line, " bytes spill stores").unwrap_or(0);
                r.spill_loads = number(line, " bytes spill loads").unwrap_or(0);
            }
        } else if let Some(rest) = line.split("Used ").nth(1) {
            if let (Some(i), Some(n)) = (entry.take(), rest.split(' ').next().and_then(|n| n.parse().ok())) {
                kernels[i].1.registers = n;
            }
        }
    }
    kernels
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

fn summarize(files: usize, kernels: &[Kernel], failed: usize) -> Summary {
    let ratio = |k: &Kernel| f64::from(k.after.registers) / f64::from(k.before.registers.max(1));
    let max = kernels.iter().max_by_key(|k| k.register_increase);
    let round = |x: f64| (x * 1000.0).round() / 1000.0;
    Summary {
        files,
        kernels: kernels.len(),
        failed_files: failed,
        median_register_increase: median(kernels.iter().map(|k| k.register_increase as f64).collect()),
        max_register_increase: max.map_or(0, |k| k.register_increase),
        max_register_increase_kernel: max.map(|k| format!("{} ({})", k.kernel, k.file)),
        median_register_ratio: round(median(kernels.iter().map(ratio).collect())),
        max_register_ratio: round(kernels.iter().map(ratio).fold(0.0, f64::max)),
        kernels_with_register_increase: kernels.iter().filter(|k| k.register_increase > 0).count(),
        kernels_with_new_spills: kernels
            .iter()
            .filter(|k| k.after.spill_stores + k.after.spill_loads > k.before.spill_stores + k.before.spill_loads)
            .count(),
        max_spill_store_increase: kernels
            .iter()
            .map(|k| i64::from(k.after.spill_stores) - i64::from(k.before.spill_stores))
            .max()
            .unwrap_or(0),
        max_stack_increase: kernels
            .iter()
            .map(|k| i64::from(k.after.stack_bytes) - i64::from(k.before.stack_bytes))
            .max()
            .unwrap_or(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_each_entry_of_ptxas_verbose_output() {
        let text = "ptxas info    : 20 bytes gmem\n\
            ptxas info    : Function properties for helper\n    16 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n\
            ptxas info    : Compiling entry function 'a' for 'sm_90'\n\
            ptxas info    : Function properties for a\n    8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads\n\
            ptxas info    : Used 40 registers, used 1 barriers, 8 bytes cumulative stack size\n\
            ptxas info    : Compiling entry function 'b' for 'sm_90'\n\
            ptxas info    : Function properties for b\n    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n\
            ptxas info    : Used 8 registers, used 0 barriers\n";
        let k = parse_verbose(text);
        assert_eq!(
            k,
            [
                ("a".to_string(), Resources { registers: 40, spill_stores: 4, spill_loads: 12, stack_bytes: 8 }),
                ("b".to_string(), Resources { registers: 8, ..Resources::default() }),
            ]
        );
    }

    #[test]
    fn medians_of_odd_and_even_counts() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(Vec::new()), 0.0);
    }
}
