//! Speed and peak memory of gpusan-ptx's parser and printer on one large PTX file.
//!
//! ```text
//! ptx-frontend-bench time FILE [RUNS]   # timings of every mode, one JSON object on stdout
//! ptx-frontend-bench mem MODE FILE      # one run of MODE, peak RSS as JSON on stdout
//! ptx-frontend-bench stats FILE         # AST node sizes and statement counts (for profiling)
//! ```
//!
//! Modes: `parse` (source → `Module`), `print` (`Module` → `String`, the module parsed
//! before the clock starts), `parse_print` (parse, print and drop the module: what
//! `gpusan ptx fmt` does whole-module), `stream` (`Items` one item at a time, each printed
//! with `write_item` into one reused `String` that is cleared after every item, as a
//! streaming formatter writing to a file would). The file is read into memory before any
//! clock starts; MB are 10^6 bytes; everything runs on the calling thread.
//!
//! Peak memory is the process's high-water resident set (`VmHWM` of /proc/self/status)
//! after one run in a fresh process, so that earlier runs leave no allocator state
//! behind. It includes the input text itself (1x) and, for `parse_print`, the output.

use std::hint::black_box;
use std::time::{Duration, Instant};

use gpusan_ptx::printer::write_item;
use gpusan_ptx::{parse, print, Items};

const MODES: [&str; 4] = ["parse", "print", "parse_print", "stream"];

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| die(&format!("{path}: {e}")))
}

fn die(msg: &str) -> ! {
    eprintln!("ptx-frontend-bench: {msg}");
    std::process::exit(2)
}

fn parse_or_die(src: &str) -> gpusan_ptx::Module {
    parse(src).unwrap_or_else(|e| die(&format!("the input does not parse:\n{e}")))
}

/// Streams `src` item by item; returns the number of bytes printed.
fn stream(src: &str, buf: &mut String) -> usize {
    let mut total = 0;
    for item in Items::new(src) {
        let item = item.unwrap_or_else(|e| die(&format!("the input does not parse:\n{e}")));
        write_item(buf, &item).expect("writing to a String cannot fail");
        total += buf.len();
        black_box(buf.as_str());
        buf.clear();
    }
    total
}

/// Runs one mode once and returns the time it took.
fn run_once(mode: &str, src: &str, parsed: Option<&gpusan_ptx::Module>) -> Duration {
    match mode {
        "parse" => {
            let t = Instant::now();
            let m = parse_or_die(black_box(src));
            let d = t.elapsed();
            drop(black_box(m));
            d
        }
        "print" => {
            let m = parsed.expect("print needs a parsed module");
            let t = Instant::now();
            let s = print(black_box(m));
            let d = t.elapsed();
            drop(black_box(s));
            d
        }
        "parse_print" => {
            let t = Instant::now();
            let m = parse_or_die(black_box(src));
            let s = print(&m);
            drop(m);
            let d = t.elapsed();
            drop(black_box(s));
            d
        }
        "stream" => {
            let mut buf = String::with_capacity(1 << 16);
            let t = Instant::now();
            black_box(stream(black_box(src), &mut buf));
            t.elapsed()
        }
        _ => die(&format!("unknown mode `{mode}`; modes: {}", MODES.join(", "))),
    }
}

fn proc_status_kib(field: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines().find_map(|l| l.strip_prefix(field)?.trim().strip_suffix("kB")?.trim().parse().ok()).unwrap_or(0)
}

fn time_all(path: &str, runs: usize) {
    let src = read(path);
    let n = src.len() as f64;
    // Sanity: the module round-trips and streaming prints the same bytes.
    let module = parse_or_die(&src);
    let printed = print(&module);
    let mut buf = String::new();
    let streamed = stream(&src, &mut buf);
    if streamed != printed.len() {
        die(&format!("streaming printed {streamed} bytes, whole-module {}", printed.len()));
    }
    let reprinted = print(&parse_or_die(&printed));
    let stable = reprinted == printed;
    let items = module.items.len();
    let (mut functions, mut statements) = (0usize, 0usize);
    for it in &module.items {
        if let gpusan_ptx::ast::Item::Function(f) = it {
            functions += 1;
            statements += f.body.as_ref().map_or(0, |b| b.len());
        }
    }
    drop(reprinted);

    let mut out = Vec::new();
    for mode in MODES {
        let mut times: Vec<f64> = Vec::with_capacity(runs);
        let _warmup = run_once(mode, &src, Some(&module));
        for _ in 0..runs {
            times.push(run_once(mode, &src, Some(&module)).as_secs_f64());
        }
        times.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let best = times[0];
        let median = if runs % 2 == 1 { times[runs / 2] } else { (times[runs / 2 - 1] + times[runs / 2]) / 2.0 };
        eprintln!(
            "{mode:>12}: best {:8.1} MB/s ({:.3} s)   median {:8.1} MB/s ({:.3} s)",
            n / best / 1e6,
            best,
            n / median / 1e6,
            median
        );
        out.push(format!(
            "\"{mode}\": {{\"best_s\": {best:.6}, \"median_s\": {median:.6}, \"best_mb_per_s\": {:.1}, \"median_mb_per_s\": {:.1}, \"runs\": {runs}}}",
            n / best / 1e6,
            n / median / 1e6
        ));
    }
    println!(
        "{{\"input_bytes\": {}, \"output_bytes\": {}, \"items\": {items}, \"functions\": {functions}, \"body_statements\": {statements}, \"print_parse_idempotent\": {stable}, \"modes\": {{{}}}}}",
        src.len(),
        printed.len(),
        out.join(", ")
    );
}

fn mem_one(mode: &str, path: &str) {
    let src = read(path);
    let parsed = if mode == "print" { Some(parse_or_die(&src)) } else { None };
    let baseline = proc_status_kib("VmRSS:");
    let d = run_once(mode, &src, parsed.as_ref());
    let peak = proc_status_kib("VmHWM:") * 1024;
    let n = src.len() as f64;
    println!(
        "{{\"mode\": \"{mode}\", \"input_bytes\": {}, \"baseline_rss_bytes\": {}, \"peak_rss_bytes\": {peak}, \"peak_rss_ratio\": {:.3}, \"peak_over_baseline_ratio\": {:.3}, \"seconds\": {:.3}}}",
        src.len(),
        baseline * 1024,
        peak as f64 / n,
        (peak as f64 - (baseline * 1024) as f64) / n,
        d.as_secs_f64()
    );
}

/// Sizes of the syntax tree's nodes and how many statements of each kind the file has:
/// where the tree's memory goes.
fn stats(path: &str) {
    use gpusan_ptx::ast::*;
    use std::mem::size_of;
    let src = read(path);
    let module = parse_or_die(&src);
    let mut counts: std::collections::BTreeMap<&str, (u64, u64)> = Default::default();
    let mut operands = [0u64; 9];
    let mut spilled = 0u64;
    let mut body_capacity_slack = 0u64;
    let mut names = std::collections::HashSet::new();
    fn walk<'a>(
        stmts: &'a [Statement],
        src: &str,
        counts: &mut std::collections::BTreeMap<&'static str, (u64, u64)>,
        operands: &mut [u64; 9],
        spilled: &mut u64,
        names: &mut std::collections::HashSet<Name>,
    ) {
        for s in stmts {
            let kind = match s {
                Statement::Decl(_) => "decl",
                Statement::Label(..) => "label",
                Statement::Inst(i) => {
                    operands[i.operands.len().min(8)] += 1;
                    if i.operands.spilled() {
                        *spilled += 1;
                    }
                    for o in &i.operands {
                        o.for_each_name(&mut |n| {
                            names.insert(n);
                        });
                    }
                    "inst"
                }
                Statement::Block(b) => {
                    walk(b, src, counts, operands, spilled, names);
                    "block"
                }
                Statement::Loc(_) => "loc",
                Statement::Pragma(_) => "pragma",
                _ => "other",
            };
            let e = counts.entry(kind).or_default();
            e.0 += 1;
        }
    }
    for it in &module.items {
        if let Item::Function(f) = it {
            if let Some(b) = &f.body {
                body_capacity_slack += ((b.capacity() - b.len()) * size_of::<Statement>()) as u64;
                walk(b, &src, &mut counts, &mut operands, &mut spilled, &mut names);
            }
        }
    }
    let total: u64 = counts.values().map(|c| c.0).sum();
    eprintln!(
        "size_of: Statement {} Instruction {} Operand {} VarDecl {} Loc {} Name {}",
        size_of::<Statement>(),
        size_of::<Instruction>(),
        size_of::<Operand>(),
        size_of::<VarDecl>(),
        size_of::<Loc>(),
        size_of::<Name>()
    );
    eprintln!(
        "input {} bytes, {} statements ({:.1} input bytes per statement)",
        src.len(),
        total,
        src.len() as f64 / total as f64
    );
    for (k, (n, _)) in &counts {
        eprintln!("  {k:>8}: {n:>10} ({:.1}%)", 100.0 * *n as f64 / total as f64);
    }
    eprintln!("instructions by operand count (0..7, 8+): {operands:?}; spilled SmallVecs: {spilled}");
    eprintln!(
        "Vec<Statement> capacity slack in function bodies: {body_capacity_slack} bytes ({:.2}x input)",
        body_capacity_slack as f64 / src.len() as f64
    );
    eprintln!(
        "statement arrays (len x size_of): {} bytes ({:.2}x input)",
        total * size_of::<Statement>() as u64,
        (total * size_of::<Statement>() as u64) as f64 / src.len() as f64
    );
    eprintln!("distinct operand names: {}", names.len());
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["time", path] => time_all(path, 5),
        ["time", path, runs] => time_all(path, runs.parse().unwrap_or_else(|_| die("RUNS must be a number"))),
        ["mem", mode, path] => mem_one(mode, path),
        ["stats", path] => stats(path),
        _ => die("usage: ptx-frontend-bench time FILE [RUNS] | mem MODE FILE | stats FILE"),
    }
}
