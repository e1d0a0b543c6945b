//! `gpusan sim`: the trace-driven simulators of `gpusan_sim` (issue 19) on a trace
//! (`docs/trace-format.md`): `mlb` sweeps GPUArmor's Metadata Lookaside Buffer and metadata
//! tables; `characterize` gives GPUArmor §3's workload tables; `synth` writes a synthetic
//! trace (for the simulator's own tests and speed, never a workload's result).

use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use clap::{Args, Subcommand, ValueEnum};
use gpusan_sim::mlb::{Policy, Shape};
use gpusan_sim::run::{Config, Mode, Timing};
use gpusan_sim::table::Organisation;
use gpusan_trace::Reader;

#[derive(Subcommand)]
pub enum SimCommand {
    /// Sweep GPUArmor's Metadata Lookaside Buffer (entries per SM) and metadata table
    /// organisations over a trace: hit rates, metadata traffic, estimated slowdown.
    Mlb(MlbArgs),
    /// GPUArmor §3's characterization of a trace: allocations, sizes, live allocations,
    /// per kernel the accesses by space and the allocation working set.
    Characterize(CharacterizeArgs),
    /// Write a synthetic trace shaped like GPUArmor's workloads.
    Synth(SynthArgs),
    /// The BCache paper's CMP (issue 20): the average miss latency of bounds information
    /// under HardBound, BCache and BCache-3D on meshes of 16 to 128 cores, with the paper's
    /// synthetic workload (Fig. 9's last four columns).
    Bcache(BcacheArgs),
    /// The mesh's average latency under uniform random traffic against the injection rate.
    Noc(NocArgs),
    /// Write the BCache paper's synthetic workload as a trace (`gpusan sim bcache --trace`).
    BcacheSynth(BcacheSynthArgs),
    /// The BCache paper's Figs. 9-12 and Table III for programs: CPU traces
    /// (`bench/bcache/trace-programs.sh`) replayed on HardBound, BCache and BCache-3D, with
    /// bounds sharing and smart tagging (crates/sim/src/bcache/program.rs says the model).
    BcachePrograms(BcacheProgramsArgs),
}

#[derive(Args)]
pub struct BcacheProgramsArgs {
    /// CPU traces (`gpusan cputrace`); each is named by its file's stem.
    #[arg(required = true)]
    traces: Vec<PathBuf>,
    /// The mesh, as WIDTHxHEIGHT (threads map to cores by their number).
    #[arg(long, default_value = "4x4")]
    mesh: String,
    /// HardBound's directory access, beyond the L2's (see `gpusan sim bcache`).
    #[arg(long, default_value_t = 0)]
    directory_cycles: u64,
    /// BCache: a bounds store to a block no bounds node holds fetches it from memory, as
    /// HardBound's write miss does (the paper does not say).
    #[arg(long)]
    write_fetch: bool,
    /// A data L1 miss's cycles (data other than bounds and read-only data is not simulated
    /// beyond each core's L1; the same for every design).
    #[arg(long, default_value_t = gpusan_sim::bcache::program::Options::default().data_miss_cycles)]
    data_miss_cycles: u64,
    /// Cycles between a thread's memory operations (its other instructions).
    #[arg(long, default_value_t = gpusan_sim::bcache::program::Options::default().think)]
    think: u64,
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write fig9.svg, fig10.svg, fig11.svg and fig12.svg into this folder (those made).
    #[arg(long)]
    svg_dir: Option<PathBuf>,
    /// Only these figures (9, 10, 11, 12, table3), and only the replays they need (Table
    /// III and Fig. 12 come from one of Fig. 11's). Default: all.
    #[arg(long = "figure", value_delimiter = ',', value_enum)]
    figures: Vec<Figure>,
}

#[derive(Args)]
pub struct BcacheSynthArgs {
    out: PathBuf,
    #[arg(long, default_value_t = 16)]
    cores: u32,
    #[arg(long, default_value_t = gpusan_sim::bcache::synthetic::Workload::default().accesses)]
    accesses: u64,
    #[arg(long)]
    read_only: bool,
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

#[derive(Args)]
pub struct BcacheArgs {
    /// Meshes, as WIDTHxHEIGHT.
    #[arg(long, value_delimiter = ',', default_values = ["4x4", "8x4", "8x8", "16x8"])]
    meshes: Vec<String>,
    /// Accesses in all (the same for every mesh, as in the paper).
    #[arg(long, default_value_t = gpusan_sim::bcache::synthetic::Workload::default().accesses)]
    accesses: u64,
    #[arg(long, default_value_t = gpusan_sim::bcache::synthetic::Workload::default().pointers)]
    pointers: u32,
    #[arg(long, default_value_t = gpusan_sim::bcache::synthetic::Workload::default().write_ratio)]
    write_ratio: f64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Read-only data instead of bounds information (Fig. 10).
    #[arg(long)]
    read_only: bool,
    /// Replay this trace (`gpusan sim bcache-synth`, `docs/trace-format.md`: a core's
    /// references as `Access` events) instead of generating the workload.
    #[arg(long)]
    trace: Option<PathBuf>,
    /// HardBound's directory access, beyond the L2's (Table II gives 80 for the
    /// full-system simulator, none for the cache simulator).
    #[arg(long, default_value_t = 0)]
    directory_cycles: u64,
    /// BCache: a bounds store to a block no bounds node holds fetches it from memory, as
    /// HardBound's write miss does (the paper does not say).
    #[arg(long)]
    write_fetch: bool,
    #[arg(long)]
    json: Option<PathBuf>,
    #[arg(long)]
    svg: Option<PathBuf>,
}

#[derive(Args)]
pub struct NocArgs {
    #[arg(long, default_value = "4x4")]
    mesh: String,
    /// Messages per node per cycle.
    #[arg(long, value_delimiter = ',', default_values_t = [0.001, 0.01, 0.02, 0.05, 0.1, 0.15, 0.2])]
    rates: Vec<f64>,
    #[arg(long, default_value_t = 5)]
    flits: u64,
    #[arg(long, default_value_t = 20_000)]
    cycles: u64,
    #[arg(long)]
    json: Option<PathBuf>,
}

#[derive(Clone, Copy, ValueEnum)]
enum OrgArg {
    List,
    Bst,
    Oracle,
}

#[derive(Clone, Copy, ValueEnum)]
enum PolicyArg {
    Lru,
    Fifo,
    Random,
}

#[derive(Clone, Copy, ValueEnum)]
enum ModeArg {
    /// The trace's LOADMETA and MEMCHECK events (a hardened binary).
    Compiled,
    /// Every global access looks its metadata up (GPUArmor-HWOnly, no recompilation).
    HwOnly,
    /// A hardened binary's points derived from accesses alone (a warp's first access to an
    /// allocation in a kernel: LOADMETA; every access: MEMCHECK), for traces without them.
    Derived,
}

#[derive(Args)]
pub struct MlbArgs {
    trace: PathBuf,
    /// Buffer sizes (entries per SM; 0: none).
    #[arg(long, value_delimiter = ',', default_values_t = [0u32, 1, 2, 4, 8, 16, 32, 64])]
    entries: Vec<u32>,
    /// Entries per set (0: fully associative).
    #[arg(long, default_value_t = 0)]
    ways: u32,
    #[arg(long, value_enum, default_value = "lru")]
    policy: PolicyArg,
    #[arg(long, value_enum, value_delimiter = ',', default_values = ["list", "bst", "oracle"])]
    orgs: Vec<OrgArg>,
    #[arg(long, value_enum, default_value = "compiled")]
    mode: ModeArg,
    /// Cycles of one metadata load.
    #[arg(long, default_value_t = Timing::default().load_cycles)]
    load_cycles: f64,
    /// Cycles of a MEMCHECK's check.
    #[arg(long, default_value_t = Timing::default().check_cycles)]
    check_cycles: f64,
    /// Warp instructions an SM issues a cycle (its own time).
    #[arg(long, default_value_t = Timing::default().ipc)]
    ipc: f64,
    /// How much of the extra cycles the SM hides (1: none).
    #[arg(long, default_value_t = Timing::default().hiding)]
    hiding: f64,
    /// Threads (the results do not depend on it).
    #[arg(long, default_value_t = std::thread::available_parallelism().map_or(1, |n| n.get()))]
    threads: usize,
    /// Write the results as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Draw the sweep as an SVG chart here.
    #[arg(long)]
    svg: Option<PathBuf>,
}

#[derive(Args)]
pub struct CharacterizeArgs {
    trace: PathBuf,
    /// Global accesses per working-set window.
    #[arg(long, default_value_t = 64)]
    window: usize,
    /// Write the characterization as JSON here (else to standard output).
    #[arg(long)]
    json: Option<PathBuf>,
}

#[derive(Args)]
pub struct SynthArgs {
    out: PathBuf,
    #[arg(long, default_value_t = gpusan_sim::synth::Shape::default().allocations)]
    allocations: u32,
    #[arg(long, default_value_t = gpusan_sim::synth::Shape::default().kernels)]
    kernels: u32,
    #[arg(long, default_value_t = gpusan_sim::synth::Shape::default().sms)]
    sms: u32,
    #[arg(long, default_value_t = gpusan_sim::synth::Shape::default().warps_per_kernel)]
    warps: u32,
    #[arg(long, default_value_t = gpusan_sim::synth::Shape::default().accesses_per_warp)]
    accesses: u32,
    #[arg(long, default_value_t = gpusan_sim::synth::Shape::default().working_set)]
    working_set: u32,
    #[arg(long, default_value_t = gpusan_sim::synth::Shape::default().churn)]
    churn: u32,
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

pub fn run(command: SimCommand) -> anyhow::Result<i32> {
    // Tables piped into `head` end quietly, as other tools' do, not with a panic on the
    // broken pipe (Rust ignores SIGPIPE by default). These commands start no program.
    // SAFETY: restoring a signal's default disposition in this process.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    match command {
        SimCommand::Mlb(a) => mlb(a),
        SimCommand::Characterize(a) => characterize(a),
        SimCommand::Synth(a) => synth(a),
        SimCommand::Bcache(a) => bcache(a),
        SimCommand::Noc(a) => noc(a),
        SimCommand::BcachePrograms(a) => bcache_programs(a),
        SimCommand::BcacheSynth(a) => {
            let w = gpusan_sim::bcache::synthetic::Workload {
                accesses: a.accesses,
                read_only: a.read_only,
                seed: a.seed,
                ..Default::default()
            };
            let f = File::create(&a.out).with_context(|| format!("{}", a.out.display()))?;
            let n = gpusan_sim::bcache::synthetic::trace::write(&w, a.cores, BufWriter::with_capacity(1 << 20, f))?;
            println!("{n} references written to {}", a.out.display());
            Ok(0)
        }
    }
}

fn open(path: &Path) -> anyhow::Result<Reader<BufReader<File>>> {
    let f = File::open(path).with_context(|| format!("{}", path.display()))?;
    Reader::new(BufReader::with_capacity(1 << 20, f)).with_context(|| format!("{}", path.display()))
}

fn org(o: OrgArg) -> Organisation {
    match o {
        OrgArg::List => Organisation::List,
        OrgArg::Bst => Organisation::Bst,
        OrgArg::Oracle => Organisation::Oracle,
    }
}

fn mlb(a: MlbArgs) -> anyhow::Result<i32> {
    let policy = match a.policy {
        PolicyArg::Lru => Policy::Lru,
        PolicyArg::Fifo => Policy::Fifo,
        PolicyArg::Random => Policy::Random,
    };
    let mode = match a.mode {
        ModeArg::Compiled => Mode::Compiled,
        ModeArg::HwOnly => Mode::HwOnly,
        ModeArg::Derived => Mode::Derived,
    };
    // Each SM holds a buffer of this many entries: a damaged command line must not ask for
    // billions.
    anyhow::ensure!(
        a.entries.iter().all(|&e| e <= 1 << 16) && a.ways <= 1 << 16,
        "--entries and --ways: at most 65,536 (an MLB of GPUArmor's is 8 to 16 entries)"
    );
    anyhow::ensure!(!a.entries.is_empty() && !a.orgs.is_empty(), "--entries and --orgs: at least one each");
    let timing = Timing {
        load_cycles: a.load_cycles,
        check_cycles: a.check_cycles,
        ipc: a.ipc,
        hiding: a.hiding,
        ..Timing::default()
    };
    let mut configs = Vec::new();
    for &o in &a.orgs {
        for &entries in &a.entries {
            configs.push(Config { mlb: Shape { entries, ways: a.ways, policy }, org: org(o), mode, timing });
        }
    }
    let mut reader = open(&a.trace)?;
    let meta = reader.meta().clone();
    let started = Instant::now();
    let (stats, events) =
        gpusan_sim::sweep(&mut reader, &configs, a.threads).with_context(|| format!("{}", a.trace.display()))?;
    let seconds = started.elapsed().as_secs_f64();
    if mode == Mode::Compiled && stats.iter().all(|s| s.loadmeta + s.memcheck == 0) {
        eprintln!(
            "gpusan sim mlb: the trace has no LOADMETA or MEMCHECK events (a `gpusan trace` of machine code records \
             accesses only): try --mode derived or --mode hw-only"
        );
    }
    let rate = events as f64 / seconds.max(1e-9) / 1e6;
    println!(
        "{events} events, {} configurations, {seconds:.2} s: {rate:.1} M trace events/s, {:.1} M configuration-events/s",
        configs.len(),
        rate * configs.len() as f64
    );
    println!(
        "{:7} {:>7} {:>10} {:>9} {:>12} {:>10}",
        "table", "entries", "lookups", "hit rate", "md loads", "slowdown"
    );
    let mut rows = Vec::new();
    for (c, s) in configs.iter().zip(&stats) {
        let slow = s.est_slowdown.map_or("-".to_string(), |x| format!("{x:.4}"));
        println!(
            "{:7} {:>7} {:>10} {:>8.2}% {:>12} {:>10}",
            c.org.name(),
            c.mlb.entries,
            s.loadmeta + s.memcheck,
            s.hit_rate * 100.0,
            s.metadata_loads,
            slow
        );
        rows.push(serde_json::json!({ "config": c, "stats": s }));
    }
    if let Some(path) = &a.json {
        let doc = serde_json::json!({
            "what": "gpusan sim mlb: GPUArmor's metadata path over a trace (crates/sim/src/run.rs says the model)",
            "trace": a.trace.display().to_string(),
            "meta": { "program": meta.program, "device": meta.device, "sms": meta.sms, "sample_warps": meta.sample_warps, "source": meta.source },
            "events": events,
            "seconds": seconds,
            "threads": a.threads,
            "results": rows,
        });
        std::fs::write(path, serde_json::to_string_pretty(&doc)?).with_context(|| format!("{}", path.display()))?;
    }
    if let Some(path) = &a.svg {
        let with_time = stats.iter().all(|s| s.est_slowdown.is_some());
        let points: Vec<gpusan_sim::chart::Point> = configs
            .iter()
            .zip(&stats)
            .map(|(c, s)| gpusan_sim::chart::Point {
                series: c.org.name(),
                entries: c.mlb.entries,
                value: if with_time {
                    s.est_slowdown.unwrap_or(1.0)
                } else {
                    s.metadata_loads as f64 / (s.loadmeta + s.memcheck).max(1) as f64
                },
            })
            .collect();
        let what = if with_time { "estimated slowdown" } else { "metadata loads per lookup" };
        let title =
            format!("MLB sweep: {}", a.trace.file_name().map_or(String::new(), |n| n.to_string_lossy().into_owned()));
        let svg = gpusan_sim::chart::svg(&title, what, &points).map_err(anyhow::Error::msg)?;
        std::fs::write(path, svg).with_context(|| format!("{}", path.display()))?;
    }
    Ok(0)
}

fn characterize(a: CharacterizeArgs) -> anyhow::Result<i32> {
    let mut reader = open(&a.trace)?;
    let c = gpusan_sim::characterize(&mut reader, a.window).with_context(|| format!("{}", a.trace.display()))?;
    let text = serde_json::to_string_pretty(&c)?;
    match &a.json {
        Some(path) => std::fs::write(path, text).with_context(|| format!("{}", path.display()))?,
        None => println!("{text}"),
    }
    Ok(0)
}

fn synth(a: SynthArgs) -> anyhow::Result<i32> {
    let shape = gpusan_sim::synth::Shape {
        allocations: a.allocations,
        kernels: a.kernels,
        sms: a.sms,
        warps_per_kernel: a.warps,
        accesses_per_warp: a.accesses,
        working_set: a.working_set,
        churn: a.churn,
        seed: a.seed,
    };
    let f = File::create(&a.out).with_context(|| format!("{}", a.out.display()))?;
    let events = gpusan_sim::synth::write(&shape, BufWriter::with_capacity(1 << 20, f))?;
    println!("{events} events written to {}", a.out.display());
    Ok(0)
}

#[derive(Args)]
pub struct TraceArgs {
    /// The trace's path.
    #[arg(short, long, default_value = "gpusan.gstrace")]
    out: PathBuf,
    /// Record the accesses of each kernel's first FIRST launches, then of one in EVERY (0:
    /// none more): a long run traced in part, the launches not taken run unserialized.
    #[arg(long, value_name = "FIRST:EVERY")]
    sample_launches: Option<String>,
    /// The program and its arguments (after `--`).
    #[arg(trailing_var_arg = true, required = true, value_name = "PROGRAM")]
    command: Vec<std::ffi::OsString>,
}

/// `gpusan trace -o FILE -- ./app`: `gpusan run --mode check --route binary --trace FILE --
/// ./app` (the binary route's patches record every warp's accesses, and still check them).
pub fn trace(a: TraceArgs) -> anyhow::Result<i32> {
    #[derive(clap::Parser)]
    struct Run {
        #[command(flatten)]
        args: crate::run::RunArgs,
    }
    let mut argv: Vec<std::ffi::OsString> =
        ["run", "--mode", "check", "--route", "binary", "--trace"].iter().map(Into::into).collect();
    argv.push(a.out.clone().into_os_string());
    if let Some(s) = &a.sample_launches {
        argv.extend(["--trace-sample".into(), s.into()]);
    }
    argv.push("--".into());
    argv.extend(a.command);
    let run = <Run as clap::Parser>::try_parse_from(argv)?;
    crate::run::run(run.args)
}

fn parse_mesh(s: &str) -> anyhow::Result<(u32, u32)> {
    let (w, h) = s.split_once('x').with_context(|| format!("mesh {s:?}: WIDTHxHEIGHT"))?;
    let (w, h): (u32, u32) = (w.parse()?, h.parse()?);
    anyhow::ensure!((1..=64).contains(&w) && (1..=64).contains(&h), "mesh {s:?}: 1 to 64 a side");
    Ok((w, h))
}

fn bcache(a: BcacheArgs) -> anyhow::Result<i32> {
    use gpusan_sim::bcache::model::{Config as BConfig, Design};
    use gpusan_sim::bcache::synthetic::{run, Workload};
    let workload = Workload {
        read_only: a.read_only,
        accesses: a.accesses,
        pointers: a.pointers,
        write_ratio: a.write_ratio,
        seed: a.seed,
        ..Workload::default()
    };
    let designs = [Design::HardBound, Design::BCache, Design::BCache3d];
    let mut rows = Vec::new();
    let mut points = Vec::new();
    println!(
        "{:>6} {:>10} {:>10} {:>9} {:>8} {:>8} {:>8} {:>9}",
        "cores", "design", "miss lat", "vs HB", "request", "lookup", "memory", "transfer"
    );
    for m in &a.meshes {
        let (w, h) = parse_mesh(m)?;
        let mut base = None;
        let placed = gpusan_sim::bcache::model::Machine::new(Design::BCache, BConfig::mesh(w, h)).placement();
        let placement: Vec<serde_json::Value> = placed
            .iter()
            .map(|(n, best, corner)| serde_json::json!({"x": n.x, "y": n.y, "avg_dist": best, "corner_avg_dist": corner}))
            .collect();
        println!(
            "{:>6} bounds nodes at {}",
            w * h,
            placed
                .iter()
                .map(|(n, d, c)| format!("({},{}) {d:.2} (corner {c:.2})", n.x, n.y))
                .collect::<Vec<_>>()
                .join(", ")
        );
        for d in designs {
            let config =
                BConfig { directory_cycles: a.directory_cycles, write_fetch: a.write_fetch, ..BConfig::mesh(w, h) };
            let (stats, cycles) = match &a.trace {
                None => run(d, config, &workload),
                Some(path) => {
                    let mut reader = open(path)?;
                    let started = Instant::now();
                    let (stats, end, events) =
                        gpusan_sim::bcache::synthetic::trace::replay(d, config, &mut reader, workload.think)
                            .with_context(|| format!("{}", path.display()))?;
                    let secs = started.elapsed().as_secs_f64();
                    eprintln!(
                        "{}: {events} references in {secs:.2} s ({:.1} M/s)",
                        d.name(),
                        events as f64 / secs.max(1e-9) / 1e6
                    );
                    (stats, end)
                }
            };
            let (avg, parts) = stats.average();
            let vs = base.map(|b: f64| (avg / b - 1.0) * 100.0);
            if d == Design::HardBound {
                base = Some(avg);
            }
            println!(
                "{:>6} {:>10} {:>10.1} {:>8} {:>8.1} {:>8.1} {:>8.1} {:>9.1}",
                w * h,
                d.name(),
                avg,
                vs.map_or("-".into(), |v| format!("{v:+.1}%")),
                parts[0],
                parts[1],
                parts[2],
                parts[3]
            );
            points.push((d.name(), w * h, avg));
            rows.push(serde_json::json!({
                "mesh": m, "cores": w * h, "design": d.name(), "avg_miss_latency": avg,
                "breakdown": {"request": parts[0], "lookup": parts[1], "memory": parts[2], "transfer": parts[3]},
                "vs_hardbound_percent": vs, "cycles": cycles, "stats": stats, "bounds_nodes": placement,
            }));
        }
    }
    if let Some(path) = &a.json {
        let doc = serde_json::json!({
            "what": "gpusan sim bcache: average miss latency of bounds information (cycles), the BCache paper's synthetic workload (crates/sim/src/bcache says the model)",
            "workload": workload,
            "config_4x4": BConfig { directory_cycles: a.directory_cycles, write_fetch: a.write_fetch, ..BConfig::mesh(4, 4) },
            "results": rows,
        });
        std::fs::write(path, serde_json::to_string_pretty(&doc)?).with_context(|| format!("{}", path.display()))?;
    }
    if let Some(path) = &a.svg {
        let pts: Vec<gpusan_sim::chart::Point> =
            points.iter().map(|&(s, c, v)| gpusan_sim::chart::Point { series: s, entries: c, value: v }).collect();
        let svg =
            gpusan_sim::chart::svg_with("Bounds information: average miss latency", "cores", "cycles per miss", &pts)
                .map_err(anyhow::Error::msg)?;
        std::fs::write(path, svg).with_context(|| format!("{}", path.display()))?;
    }
    Ok(0)
}

/// A replay behind a figure: (figure, series, design, what is simulated).
type ProgramRun = (&'static str, &'static str, gpusan_sim::bcache::model::Design, gpusan_sim::bcache::program::Options);

/// The replays behind each figure.
fn program_runs(
    base: gpusan_sim::bcache::program::Options,
) -> Vec<(&'static str, &'static str, gpusan_sim::bcache::model::Design, gpusan_sim::bcache::program::Options)> {
    use gpusan_sim::bcache::model::Design::*;
    use gpusan_sim::bcache::program::Options;
    let bounds = Options { bounds: true, read_only: false, smart: false, ..base };
    let read_only = Options { bounds: false, read_only: true, smart: false, ..base };
    let both = Options { bounds: true, read_only: true, smart: false, ..base };
    vec![
        ("fig9", "hardbound", HardBound, bounds),
        ("fig9", "bcache", BCache, bounds),
        ("fig9", "bcache3d", BCache3d, bounds),
        ("fig10", "hardbound", HardBound, read_only),
        ("fig10", "bcache", BCache, read_only),
        ("fig11", "hardbound", HardBound, both),
        ("fig11", "bcache", BCache, both),
        ("fig11", "bcache+skip", BCache, Options { smart: true, ..both }),
    ]
}

fn bcache_programs(a: BcacheProgramsArgs) -> anyhow::Result<i32> {
    use gpusan_sim::bcache::model::Config as BConfig;
    use gpusan_sim::bcache::program::Options;
    let (w, h) = parse_mesh(&a.mesh)?;
    let config = BConfig { directory_cycles: a.directory_cycles, write_fetch: a.write_fetch, ..BConfig::mesh(w, h) };
    let base = Options { data_miss_cycles: a.data_miss_cycles, think: a.think, ..Options::default() };
    let figures = if a.figures.is_empty() {
        vec![Figure::Fig9, Figure::Fig10, Figure::Fig11, Figure::Table3, Figure::Fig12]
    } else {
        a.figures.clone()
    };
    let wanted = |r: &ProgramRun| match r.0 {
        "fig9" => figures.contains(&Figure::Fig9),
        "fig10" => figures.contains(&Figure::Fig10),
        _ => {
            figures.contains(&Figure::Fig11)
                || r.1 == "bcache+skip" && (figures.contains(&Figure::Fig12) || figures.contains(&Figure::Table3))
        }
    };
    let runs: Vec<ProgramRun> = program_runs(base).into_iter().filter(wanted).collect();
    let names: Vec<String> = a
        .traces
        .iter()
        .map(|p| p.file_stem().map_or_else(|| p.display().to_string(), |s| s.to_string_lossy().into_owned()))
        .collect();
    for p in &a.traces {
        let r = open(p)?;
        anyhow::ensure!(
            r.meta().source == "gpusan cputrace",
            "{}: a trace of `{}`, not a CPU trace (`gpusan cputrace`, bench/bcache/trace-programs.sh)",
            p.display(),
            r.meta().source
        );
    }
    let got = replay_programs(&a.traces, &names, config, &runs)?;
    let means = Tables { names: &names, runs: &runs, got: &got }.print(&figures);
    if let Some(path) = &a.json {
        let rows: Vec<serde_json::Value> = names
            .iter()
            .enumerate()
            .flat_map(|(t, n)| {
                runs.iter().zip(&got[t]).map(move |(r, st)| {
                    serde_json::json!({"workload": n, "figure": r.0, "series": r.1, "options": r.3, "avg_miss_latency": st.machine.average().0, "stats": st})
                })
            })
            .collect();
        let doc = serde_json::json!({
            "what": "gpusan sim bcache-programs: the BCache paper's Figs 9-12 and Table III on CPU traces (crates/sim/src/bcache/program.rs says the model)",
            "traces": a.traces, "config": config, "means": means,
            "results": rows,
        });
        std::fs::write(path, serde_json::to_string_pretty(&doc)?).with_context(|| format!("{}", path.display()))?;
    }
    if let Some(dir) = &a.svg_dir {
        program_charts(dir, &names, &runs, &got, &figures)?;
    }
    Ok(0)
}

/// Every trace replayed on its runs, several at once from one reading (`replay_all`): a job
/// per trace, or, where there are more cores than traces, the runs of each trace split into
/// as many groups as spread them over the cores (the results do not depend on the
/// grouping); per trace, the runs' counts in `runs`' order.
fn replay_programs(
    traces: &[PathBuf],
    names: &[String],
    config: gpusan_sim::bcache::model::Config,
    runs: &[ProgramRun],
) -> anyhow::Result<Vec<Vec<gpusan_sim::bcache::program::ProgramStats>>> {
    use gpusan_sim::bcache::program::{replay_all, ProgramStats};
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let groups = cores.div_ceil(traces.len().max(1)).clamp(1, runs.len().max(1));
    let per_group = runs.len().div_ceil(groups).max(1);
    // (trace, first run, runs)
    let jobs: Vec<(usize, usize, usize)> = (0..traces.len())
        .flat_map(|t| (0..runs.len()).step_by(per_group).map(move |r| (t, r, per_group.min(runs.len() - r))))
        .collect();
    type Slot = std::sync::Mutex<Option<anyhow::Result<(Vec<ProgramStats>, f64)>>>;
    let results: Vec<Slot> = jobs.iter().map(|_| std::sync::Mutex::new(None)).collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let workers = cores.min(jobs.len()).max(1);
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(&(t, first, n)) = jobs.get(i) else { break };
                let machines: Vec<_> = runs[first..first + n].iter().map(|r| (r.2, r.3)).collect();
                let started = Instant::now();
                let out = open(&traces[t]).and_then(|mut reader| {
                    replay_all(&machines, config, &mut reader).with_context(|| format!("{}", traces[t].display()))
                });
                *results[i].lock().unwrap() = Some(out.map(|st| (st, started.elapsed().as_secs_f64())));
            });
        }
    });
    let mut got: Vec<Vec<ProgramStats>> = vec![Vec::new(); traces.len()];
    for (i, cell) in results.into_iter().enumerate() {
        let (t, _, _) = jobs[i];
        let (st, secs) = cell.into_inner().unwrap().expect("every job ran")?;
        let events = st.first().map_or(0, |s| s.events);
        // Every run replays every event: the rate is of events replayed, all runs together.
        let replayed = events * st.len() as u64;
        eprintln!(
            "{}: {} runs x {events} events in {secs:.2} s ({:.1} M events replayed/s)",
            names[t],
            st.len(),
            replayed as f64 / secs.max(1e-9) / 1e6
        );
        got[t].extend(st);
    }
    Ok(got)
}

/// What `gpusan sim bcache-programs` makes (`--figure`).
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Figure {
    #[value(name = "9")]
    Fig9,
    #[value(name = "10")]
    Fig10,
    #[value(name = "11")]
    Fig11,
    #[value(name = "12")]
    Fig12,
    #[value(name = "table3")]
    Table3,
}

fn pct(new: f64, old: f64) -> f64 {
    (new / old.max(1e-12) - 1.0) * 100.0
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

fn lat(st: &gpusan_sim::bcache::program::ProgramStats) -> f64 {
    st.machine.average().0
}

/// The replays' counts, as the figures' tables print them.
struct Tables<'a> {
    names: &'a [String],
    runs: &'a [ProgramRun],
    got: &'a [Vec<gpusan_sim::bcache::program::ProgramStats>],
}

impl Tables<'_> {
    fn idx(&self, fig: &str, series: &str) -> usize {
        self.runs.iter().position(|r| r.0 == fig && r.1 == series).expect("the figure's runs were made")
    }

    /// The tables of `figures` on stdout, one after another; their means.
    fn print(&self, figures: &[Figure]) -> serde_json::Value {
        let mut means = serde_json::Map::new();
        let mut first = true;
        for (f, table) in [
            (Figure::Fig9, Tables::fig9 as fn(&Self) -> serde_json::Value),
            (Figure::Fig10, Tables::fig10),
            (Figure::Fig11, Tables::fig11),
            (Figure::Table3, Tables::table3),
            (Figure::Fig12, Tables::fig12),
        ] {
            if figures.contains(&f) {
                if !first {
                    println!();
                }
                first = false;
                if let serde_json::Value::Object(m) = table(self) {
                    means.extend(m);
                }
            }
        }
        serde_json::Value::Object(means)
    }

    /// Fig. 9: bounds information's miss latency.
    fn fig9(&self) -> serde_json::Value {
        let (names, got) = (self.names, self.got);
        let idx = |f: &str, s: &str| self.idx(f, s);
        println!(
            "Fig. 9: bounds information, average miss latency (cycles), and all misses' cycles against HardBound's"
        );
        println!(
            "(a write-through store counts as a miss of BCache's: the average alone flatters it where stores are many)"
        );
        println!(
            "{:<14} {:>9} {:>9} {:>8} {:>9} {:>8} {:>9} {:>9} {:>10}",
            "workload", "hardbound", "bcache", "vs HB", "bcache3d", "vs HB", "misses HB", "misses BC", "total BC"
        );
        let (mut v9, mut v9d, mut v9t) = (Vec::new(), Vec::new(), Vec::new());
        for (t, n) in names.iter().enumerate() {
            let (hb, bc, b3) =
                (&got[t][idx("fig9", "hardbound")], &got[t][idx("fig9", "bcache")], &got[t][idx("fig9", "bcache3d")]);
            let (x, y) = (pct(lat(bc), lat(hb)), pct(lat(b3), lat(hb)));
            let total = pct(bc.machine.latency.total() as f64, hb.machine.latency.total() as f64);
            if hb.machine.misses > 0 {
                v9.push(x);
                v9d.push(y);
                v9t.push(total);
            }
            println!(
                "{n:<14} {:>9.1} {:>9.1} {:>+7.1}% {:>9.1} {:>+7.1}% {:>9} {:>9} {:>+9.1}%",
                lat(hb),
                lat(bc),
                x,
                lat(b3),
                y,
                hb.machine.misses,
                bc.machine.misses,
                total
            );
        }
        println!(
            "{:<14} {:>9} {:>9} {:>+7.1}% {:>9} {:>+7.1}% {:>9} {:>9} {:>+9.1}%",
            "mean",
            "",
            "",
            mean(&v9),
            "",
            mean(&v9d),
            "",
            "",
            mean(&v9t)
        );
        serde_json::json!({"fig9_bcache_vs_hb_percent": mean(&v9), "fig9_bcache3d_vs_hb_percent": mean(&v9d), "fig9_bcache_total_miss_cycles_vs_hb_percent": mean(&v9t)})
    }

    /// Fig. 10: read-only data's miss latency.
    fn fig10(&self) -> serde_json::Value {
        let (names, got) = (self.names, self.got);
        let idx = |f: &str, s: &str| self.idx(f, s);
        println!("Fig. 10: read-only data, average miss latency (cycles)");
        println!("{:<14} {:>9} {:>9} {:>8} {:>9}", "workload", "hardbound", "bcache", "vs HB", "ro ops");
        let mut v10 = Vec::new();
        for (t, n) in names.iter().enumerate() {
            let (hb, bc) = (&got[t][idx("fig10", "hardbound")], &got[t][idx("fig10", "bcache")]);
            let x = pct(lat(bc), lat(hb));
            if hb.machine.misses > 0 {
                v10.push(x);
            }
            println!("{n:<14} {:>9.1} {:>9.1} {:>+7.1}% {:>9}", lat(hb), lat(bc), x, hb.read_only_ops);
        }
        println!("{:<14} {:>9} {:>9} {:>+7.1}%", "mean", "", "", mean(&v10));
        serde_json::json!({"fig10_bcache_vs_hb_percent": mean(&v10)})
    }

    /// Fig. 11: memory μops per cycle.
    fn fig11(&self) -> serde_json::Value {
        let (names, got) = (self.names, self.got);
        let idx = |f: &str, s: &str| self.idx(f, s);
        println!("Fig. 11: memory micro-ops per cycle (bounds information and read-only data together)");
        println!("{:<14} {:>9} {:>9} {:>11} {:>8}", "workload", "hardbound", "bcache", "bcache+skip", "vs HB");
        let mut v11 = Vec::new();
        for (t, n) in names.iter().enumerate() {
            let (hb, bc, sk) = (
                &got[t][idx("fig11", "hardbound")],
                &got[t][idx("fig11", "bcache")],
                &got[t][idx("fig11", "bcache+skip")],
            );
            let x = pct(sk.upc, hb.upc);
            v11.push(x);
            println!("{n:<14} {:>9.4} {:>9.4} {:>11.4} {:>+7.1}%", hb.upc, bc.upc, sk.upc, x);
        }
        println!("{:<14} {:>9} {:>9} {:>11} {:>+7.1}%", "mean", "", "", "", mean(&v11));
        serde_json::json!({"fig11_skip_vs_hb_upc_percent": mean(&v11)})
    }

    /// Table III: checks skipped.
    fn table3(&self) -> serde_json::Value {
        let (names, got) = (self.names, self.got);
        let idx = |f: &str, s: &str| self.idx(f, s);
        println!("Table III: bounds checks skipped by smart tagging (the two rules of program.rs)");
        println!("{:<14} {:>11} {:>11} {:>8} {:>11} {:>8}", "workload", "total", "stored", "%", "address", "%");
        for (t, n) in names.iter().enumerate() {
            let c = &got[t][idx("fig11", "bcache+skip")].checks;
            let p = |k: u64| 100.0 * k as f64 / c.total.max(1) as f64;
            println!(
                "{n:<14} {:>11} {:>11} {:>7.3}% {:>11} {:>7.3}%",
                c.total,
                c.skipped_stored,
                p(c.skipped_stored),
                c.skipped_address,
                p(c.skipped_address)
            );
        }
        serde_json::json!({})
    }

    /// Fig. 12: storage with sharing.
    fn fig12(&self) -> serde_json::Value {
        let (names, got) = (self.names, self.got);
        let idx = |f: &str, s: &str| self.idx(f, s);
        println!("Fig. 12: bounds information's storage, shared against unshared");
        println!(
            "{:<14} {:>10} {:>8} {:>12} {:>12} {:>8}",
            "workload", "locations", "linked", "unshared B", "shared B", "shared"
        );
        let mut v12 = Vec::new();
        for (t, n) in names.iter().enumerate() {
            let st = &got[t][idx("fig11", "bcache+skip")].storage;
            let r = st.shared_bytes as f64 / st.unshared_bytes.max(1) as f64;
            if st.unshared_bytes > 0 {
                v12.push(r);
            }
            println!(
                "{n:<14} {:>10} {:>8} {:>12} {:>12} {:>7.1}%",
                st.locations,
                st.linked,
                st.unshared_bytes,
                st.shared_bytes,
                100.0 * r
            );
        }
        println!("{:<14} {:>10} {:>8} {:>12} {:>12} {:>7.1}%", "mean", "", "", "", "", 100.0 * mean(&v12));
        serde_json::json!({"fig12_shared_over_unshared": mean(&v12)})
    }
}

/// Figs. 9-12 as grouped bars in `dir`.
fn program_charts(
    dir: &Path,
    names: &[String],
    runs: &[ProgramRun],
    got: &[Vec<gpusan_sim::bcache::program::ProgramStats>],
    figures: &[Figure],
) -> anyhow::Result<()> {
    use gpusan_sim::bcache::program::ProgramStats;
    std::fs::create_dir_all(dir).with_context(|| format!("{}", dir.display()))?;
    let groups: Vec<&str> = names.iter().map(String::as_str).collect();
    let series = |fig: &str, f: &dyn Fn(&ProgramStats) -> f64| -> Vec<(&'static str, Vec<f64>)> {
        runs.iter()
            .enumerate()
            .filter(|(_, r)| r.0 == fig)
            .map(|(i, r)| (r.1, got.iter().map(|g| f(&g[i])).collect()))
            .collect()
    };
    let shared = |st: &ProgramStats| st.storage.shared_bytes as f64 / st.storage.unshared_bytes.max(1) as f64;
    let twelve = || -> Vec<(&'static str, Vec<f64>)> {
        let skip = runs.iter().position(|r| r.0 == "fig11" && r.1 == "bcache+skip").expect("its run was made");
        vec![("unshared", vec![1.0; groups.len()]), ("shared", got.iter().map(|g| shared(&g[skip])).collect())]
    };
    type Bars = Vec<(&'static str, Vec<f64>)>;
    /// A chart: its figure, file, title, axis, and its bars made when wanted.
    type Chart<'a> = (Figure, &'a str, &'a str, &'a str, &'a dyn Fn() -> Bars);
    let charts: [Chart; 4] = [
        (Figure::Fig9, "fig9.svg", "Bounds information: average miss latency", "cycles per miss", &|| {
            series("fig9", &lat)
        }),
        (Figure::Fig10, "fig10.svg", "Read-only data: average miss latency", "cycles per miss", &|| {
            series("fig10", &lat)
        }),
        (Figure::Fig11, "fig11.svg", "Memory micro-ops per cycle", "uPC", &|| series("fig11", &|st| st.upc)),
        (
            Figure::Fig12,
            "fig12.svg",
            "Bounds information's storage, normalized to unshared",
            "share of unshared",
            &twelve,
        ),
    ];
    for (f, file, title, what, values) in charts {
        if figures.contains(&f) {
            let svg = gpusan_sim::chart::bars(title, what, &groups, &values()).map_err(anyhow::Error::msg)?;
            std::fs::write(dir.join(file), svg)?;
        }
    }
    Ok(())
}

fn noc(a: NocArgs) -> anyhow::Result<i32> {
    let (w, h) = parse_mesh(&a.mesh)?;
    let timing = gpusan_sim::bcache::mesh::Timing::default();
    let mut rows = Vec::new();
    println!("{:>8} {:>12} {:>9}", "rate", "latency", "messages");
    for &r in &a.rates {
        let (lat, n) = gpusan_sim::bcache::synthetic::latency_at(w, h, timing, r, a.flits, a.cycles, 1);
        println!("{r:>8} {lat:>12.2} {n:>9}");
        rows.push(serde_json::json!({"rate": r, "avg_latency": lat, "messages": n}));
    }
    if let Some(path) = &a.json {
        let doc = serde_json::json!({"what": "uniform random traffic on the mesh: average latency (cycles) against messages per node per cycle", "mesh": a.mesh, "flits": a.flits, "cycles": a.cycles, "timing": timing, "results": rows});
        std::fs::write(path, serde_json::to_string_pretty(&doc)?).with_context(|| format!("{}", path.display()))?;
    }
    Ok(0)
}
