//! Per-tensor bounds inside a pool's segment, through `gpusan run` with the fake driver
//! (`pool_blocks_prog SCENARIO`, which plays a checked kernel against the table gpusan
//! uploaded): blocks described through gpusan's C functions (`gpusan_pool_block_alloc`/
//! `_free`, found with `dlsym`) and through NVTX's memory API (the vendored NVTX headers,
//! which load gpusan's library through `NVTX_INJECTION64_PATH`). A read past a block
//! inside its segment is out of bounds of the block, named with its segment; a read inside
//! is silent; a use of a freed block is a use after free, until the pool hands its memory
//! out again.

mod fake_driver;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use fake_driver::Outcome;

fn dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| fake_driver::build("pool-blocks", &[("pool_blocks_prog", "pool_blocks_prog.c")]))
}

fn run(scenario: &str) -> Outcome {
    run_with(&["--mode", "check"], scenario)
}

fn run_with(options: &[&str], scenario: &str) -> Outcome {
    let d = dir();
    let prog = d.join("pool_blocks_prog");
    let o = fake_driver::gpusan_run(d, options, &[prog.to_str().unwrap(), scenario], &[]);
    assert_eq!(o.code, Some(0), "{scenario}: {}{}", o.stdout, o.stderr);
    assert!(o.stdout.contains(&format!("{scenario} done rc=0")), "{scenario}: {}{}", o.stdout, o.stderr);
    // Blocks, segments and where an address fell are part of the published report.
    fake_driver::schema::assert_matches_schema(&o.report);
    o
}

fn nearest(o: &Outcome) -> &serde_json::Value {
    &o.report["errors"][0]["details"]["nearest"]
}

#[test]
fn a_read_past_a_block_inside_its_segment_names_the_block_and_the_slack() {
    let o = run("past");
    assert_eq!(o.kinds(), vec!["out_of_bounds_read"], "{:#}", o.report);
    let n = nearest(&o);
    assert_eq!(n["allocation"]["kind"]["pool_block"]["source"], "other", "{n:#}");
    assert_eq!(n["allocation"]["size"], 4000, "{n:#}");
    assert_eq!(n["allocation"]["segment"]["size"], 64 << 10, "{n:#}");
    assert_eq!(n["landed"]["in"], "pool_slack", "{n:#}");
    assert!(o.stderr.contains("tensor block of 4000 B (pool allocator)"), "{}", o.stderr);
    assert!(o.stderr.contains("inside a segment of 64 KiB"), "{}", o.stderr);
}

/// A block's allocation stack is unwound only with `--pool-sites`: unwinding at every
/// tensor allocation cost a PyTorch step about 30% on the H100.
#[test]
fn block_stacks_are_recorded_only_with_pool_sites() {
    let frames = |o: &Outcome| {
        o.report["errors"][0]["details"]["nearest"]["allocation"]["alloc_stack"].as_array().map_or(0, Vec::len)
    };
    let plain = run("past");
    assert_eq!(frames(&plain), 0, "{:#}", plain.report);
    let sited = run_with(&["--mode", "check", "--pool-sites"], "past");
    assert_eq!(sited.kinds(), vec!["out_of_bounds_read"], "{:#}", sited.report);
    assert!(frames(&sited) > 0, "{:#}", sited.report["errors"][0]["details"]["nearest"]);
}

#[test]
fn a_read_inside_a_block_is_silent() {
    let o = run("inside");
    assert_eq!(o.kinds(), Vec::<String>::new(), "{:#}", o.report);
    assert!(o.stdout.contains("found=0"), "{}", o.stdout);
}

#[test]
fn a_read_into_the_neighbouring_block_names_both() {
    let o = run("neighbour");
    assert_eq!(o.kinds(), vec!["out_of_bounds_read"], "{:#}", o.report);
    let n = nearest(&o);
    assert_eq!(n["allocation"]["size"], 4000, "{n:#}");
    assert_eq!(n["landed"]["in"], "neighbour_block", "{n:#}");
    assert_eq!(n["landed"]["size"], 512, "{n:#}");
}

#[test]
fn a_read_of_a_freed_block_is_a_use_after_free_until_it_is_handed_out_again() {
    let o = run("uaf");
    assert_eq!(o.kinds(), vec!["use_after_free"], "{:#}", o.report);
    assert_eq!(nearest(&o)["allocation"]["freed"], true, "{:#}", o.report);
    let o = run("realloc");
    assert_eq!(o.kinds(), Vec::<String>::new(), "{:#}", o.report);
}

/// A free on a stream the legacy stream does not wait for reaches kernels only once the
/// work that stream had at the free is done (gpusan's event on it, polled at launches):
/// the launch right after the free (which may run beside kernels launched before it) sees
/// the block live, a later one freed.
#[test]
fn a_free_on_another_stream_reaches_kernels_after_that_streams_earlier_work() {
    let o = run("stream_free");
    assert!(o.stdout.contains("found=0,1"), "{}", o.stdout);
    assert_eq!(o.kinds(), vec!["use_after_free"], "{:#}", o.report);
    assert_eq!(nearest(&o)["allocation"]["kind"]["pool_block"]["source"], "torch", "{:#}", o.report);
}

#[test]
fn nvtx_regions_are_blocks() {
    let o = run("nvtx_past");
    assert_eq!(o.kinds(), vec!["out_of_bounds_read"], "{:#}", o.report);
    assert_eq!(nearest(&o)["allocation"]["kind"]["pool_block"]["source"], "nvtx", "{:#}", o.report);
    assert!(o.stderr.contains("(NVTX memory region)"), "{}", o.stderr);
    let o = run("nvtx_inside");
    assert_eq!(o.kinds(), Vec::<String>::new(), "{:#}", o.report);
    // A reset heap's regions are freed (shown to kernels once the context synchronized).
    let o = run("nvtx_reset");
    assert_eq!(o.kinds(), vec!["use_after_free"], "{:#}", o.report);
}

/// A program that names an NVTX tool of its own keeps it: gpusan's library loads it and
/// forwards every call to it (its heap handle is the program's), and still sees the regions.
#[test]
fn the_programs_own_nvtx_tool_is_chained() {
    let d = dir();
    let tool = d.join("libnvtx_tool.so");
    fake_driver::run(
        std::process::Command::new("cc")
            .args(["-shared", "-fPIC", "-o"])
            .arg(&tool)
            .arg(fake_driver::sources().join("nvtx_tool.c")),
    );
    let log = d.join("nvtx_tool.log");
    let _ = std::fs::remove_file(&log);
    let prog = d.join("pool_blocks_prog");
    let env = [("NVTX_INJECTION64_PATH", tool.as_path()), ("NVTX_TOOL_LOG", log.as_path())];
    let o = fake_driver::gpusan_run(d, &["--mode", "check"], &[prog.to_str().unwrap(), "nvtx_past"], &env);
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
    assert_eq!(o.kinds(), vec!["out_of_bounds_read"], "{:#}", o.report);
    let seen = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(seen, "core\next\nheap\nregions 2 heap 7700\n", "the tool's calls");
}

/// Without gpusan the functions are absent and NVTX finds no tool: the program runs, and
/// its played kernel has no table to read (it says so with rc != 0 only when it expected
/// one), so only the lookup's absence is checked here.
#[test]
fn the_functions_are_absent_without_gpusan() {
    let d = dir();
    let out = std::process::Command::new(d.join("pool_blocks_prog"))
        .arg("inside")
        .env("LD_LIBRARY_PATH", d)
        .env_remove("NVTX_INJECTION64_PATH")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("inside done"), "{text}{}", String::from_utf8_lossy(&out.stderr));
}

/// What the blocks cost on the device, in the report (issue 15: at most 32 bytes a tensor):
/// the largest table's entries, the allocations they stand for and its blocks. Two blocks
/// in one segment take two entries where the segment took one.
#[test]
fn the_report_counts_the_device_bytes_of_each_pool_block() {
    let o = run("inside");
    let counter = |name: &str| o.report["counters"][name].as_u64();
    assert_eq!(counter("device_table_peak_pool_blocks"), Some(2), "{:#}", o.report["counters"]);
    let (entries, allocations) = (counter("device_table_peak_entries"), counter("device_table_peak_allocations"));
    assert_eq!(entries.zip(allocations).map(|(e, a)| e - a), Some(1), "{:#}", o.report["counters"]);
    assert_eq!(counter("device_table_bytes_per_pool_block"), Some(16), "{:#}", o.report["counters"]);
}
