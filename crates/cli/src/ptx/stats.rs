//! `gpusan ptx stats`: per function, how many instructions touch memory and where
//! (Guardian's Table 3, per state space), so a user sees what instrumentation will cost.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::Result;
use gpusan_ptx::ast::{Function, Item, Statement};
use gpusan_ptx::semantics::{memory_accesses, AccessKind};
use serde::Serialize;

#[derive(Serialize, Default, Clone)]
struct Counts {
    loads: u64,
    stores: u64,
    atomics: u64,
    prefetches: u64,
}

impl Counts {
    fn add(&mut self, o: &Counts) {
        self.loads += o.loads;
        self.stores += o.stores;
        self.atomics += o.atomics;
        self.prefetches += o.prefetches;
    }
}

#[derive(Serialize)]
struct FunctionStats {
    file: String,
    name: String,
    kernel: bool,
    instructions: u64,
    /// State space name → counts; every access of a multi-access instruction counts.
    spaces: BTreeMap<&'static str, Counts>,
}

fn collect(stmts: &[Statement], s: &mut FunctionStats) {
    for st in stmts {
        match st {
            Statement::Inst(i) => {
                s.instructions += 1;
                for a in memory_accesses(i) {
                    let c = s.spaces.entry(a.space.name()).or_default();
                    match a.kind {
                        AccessKind::Read => c.loads += 1,
                        AccessKind::Write => c.stores += 1,
                        AccessKind::Atomic => c.atomics += 1,
                        AccessKind::Prefetch => c.prefetches += 1,
                    }
                }
            }
            Statement::Block(b) => collect(b, s),
            _ => {}
        }
    }
}

fn function_stats(file: &str, f: &Function) -> FunctionStats {
    let mut s = FunctionStats {
        file: file.to_string(),
        name: f.name.to_string(),
        kernel: f.is_kernel(),
        instructions: 0,
        spaces: BTreeMap::new(),
    };
    if let Some(body) = &f.body {
        collect(body, &mut s);
    }
    s
}

pub fn run(inputs: &[PathBuf], json: bool) -> Result<()> {
    let mut all = Vec::new();
    for path in inputs {
        let module = crate::input::parse_file(path)?;
        let file = path.display().to_string();
        for item in &module.items {
            if let Item::Function(f) = item {
                if f.body.is_some() {
                    all.push(function_stats(&file, f));
                }
            }
        }
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&all)?);
        return Ok(());
    }
    let mut total_by_space: BTreeMap<&'static str, Counts> = BTreeMap::new();
    println!(
        "{:<48} {:>6} {:>7}  {:<16} {:>6} {:>6} {:>6} {:>6}",
        "function", "kind", "insts", "space", "ld", "st", "atom", "pref"
    );
    for f in &all {
        let kind = if f.kernel { "entry" } else { "func" };
        let name = shorten(&f.name, 48);
        if f.spaces.is_empty() {
            println!("{name:<48} {kind:>6} {:>7}  {:<16}", f.instructions, "-");
        }
        for (i, (space, c)) in f.spaces.iter().enumerate() {
            let (n, k, insts) =
                if i == 0 { (name.as_str(), kind, f.instructions.to_string()) } else { ("", "", String::new()) };
            println!(
                "{n:<48} {k:>6} {insts:>7}  {space:<16} {:>6} {:>6} {:>6} {:>6}",
                c.loads, c.stores, c.atomics, c.prefetches
            );
            total_by_space.entry(space).or_default().add(c);
        }
    }
    let kernels = all.iter().filter(|f| f.kernel).count();
    let insts: u64 = all.iter().map(|f| f.instructions).sum();
    println!("\n{kernels} kernels, {} functions, {insts} instructions", all.len() - kernels);
    for (space, c) in &total_by_space {
        println!(
            "  {space:<16} ld {:>8}  st {:>8}  atom {:>8}  prefetch {:>6}",
            c.loads, c.stores, c.atomics, c.prefetches
        );
    }
    Ok(())
}

fn shorten(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let head: String = s.chars().take(n - 1).collect();
        format!("{head}…")
    }
}
