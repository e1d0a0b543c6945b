//! `gpusan run --mode canary` with the fake driver (`canary_prog SCENARIO`): the fake plays
//! gpusan's canary kernels on its host-backed memory (tests/fake_cuda/canary.c), so a store
//! past an allocation's end is found end to end by the guard's scans, named with the
//! allocation, the kernels since the last clean scan and when; clean runs say nothing.

mod fake_driver;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use fake_driver::Outcome;

fn dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| fake_driver::build("canary", &[("canary_prog", "canary_prog.c")]))
}

fn run_with(options: &[&str], scenario: &str, env: &[(&str, &Path)]) -> Outcome {
    let d = dir();
    let prog = d.join("canary_prog");
    let mut all = vec!["--mode", "canary"];
    all.extend_from_slice(options);
    let o = fake_driver::gpusan_run(d, &all, &[prog.to_str().unwrap(), scenario], env);
    assert_eq!(o.code, Some(0), "{scenario}: {}{}", o.stdout, o.stderr);
    assert!(o.stdout.contains(&format!("{scenario} done rc=0")), "{scenario}: {}{}", o.stdout, o.stderr);
    o
}

/// A line of the fake driver's canary log for a launch that scans: the scan kernel, or the
/// batch kernel (a small batch's update and scan in one launch).
fn is_scan(line: &str) -> bool {
    line.starts_with("gpusan_canary_scan ") || line.starts_with("gpusan_canary_batch ")
}

fn run(scenario: &str) -> Outcome {
    run_with(&[], scenario, &[])
}

fn details(o: &Outcome) -> &serde_json::Value {
    &o.report["errors"][0]["details"]
}

fn counter(o: &Outcome, name: &str) -> u64 {
    o.report["counters"][name].as_u64().unwrap_or_else(|| panic!("no counter {name}: {:#}", o.report["counters"]))
}

#[test]
fn an_overflow_past_a_device_allocation_is_found_by_the_periodic_scan() {
    let o = run("overflow");
    assert_eq!(o.kinds(), vec!["canary_overwrite"], "{:#}", o.report);
    let d = details(&o);
    assert_eq!(d["origin"], "canary", "{d:#}");
    assert_eq!(d["allocation"]["size"], 1000, "{d:#}");
    assert_eq!(d["allocation"]["kind"], "device", "{d:#}");
    assert_eq!(d["offset_past_end"], 3, "{d:#}");
    assert_eq!(d["bad_bytes"], 1, "{d:#}");
    assert_eq!(d["scan"], "periodic", "{d:#}");
    let kernels: Vec<&str> = d["kernels"].as_array().unwrap().iter().map(|k| k["kernel"].as_str().unwrap()).collect();
    assert_eq!(kernels, vec!["oob"], "the kernel launched since the last clean scan: {d:#}");
    assert!(
        o.stderr.contains("Canary overwritten: 1 byte of the 24 bytes past the end of an allocation of 1000 bytes"),
        "{}",
        o.stderr
    );
    assert!(o.stderr.contains("3 bytes past the end of an allocation of 1000 bytes"), "{}", o.stderr);
    assert!(o.stderr.contains("oob on stream 0x0"), "{}", o.stderr);
    assert!(counter(&o, "canary_scans") > 0);
    // Each periodic batch timed on the GPU (the fake says 12 µs): the detection latency's
    // scan part.
    let timed = counter(&o, "canary_scans_timed");
    assert!(timed > 0, "{:#}", o.report["counters"]);
    assert_eq!(counter(&o, "canary_scan_gpu_us_total"), 12 * timed);
    assert_eq!(counter(&o, "canary_scan_gpu_us_max"), 12);
}

/// Two GPUs (two contexts): each allocation is guarded and scanned in its own context, each
/// finding names its allocation's device, and a kernel of the other device (peer access)
/// is among those launched since the last clean scan.
#[test]
fn each_device_guards_its_own_allocations() {
    let env = [("FAKE_CUDA_DEVICES", Path::new("2"))];
    let o = run_with(&[], "two_devices", &env);
    assert_eq!(o.kinds(), vec!["canary_overwrite"], "{:#}", o.report);
    let errors = o.report["errors"].as_array().unwrap();
    let mut found: Vec<(u64, u64, u64)> = errors
        .iter()
        .map(|e| &e["details"])
        .map(|d| {
            let a = &d["allocation"];
            (a["device"].as_u64().unwrap(), a["size"].as_u64().unwrap(), d["offset_past_end"].as_u64().unwrap())
        })
        .collect();
    found.sort();
    assert_eq!(found, vec![(0, 1000, 3), (1, 2000, 1)], "{:#}", o.report);
    for e in errors {
        let kernels: Vec<&str> =
            e["details"]["kernels"].as_array().unwrap().iter().map(|k| k["kernel"].as_str().unwrap()).collect();
        assert_eq!(kernels, vec!["oob"], "{:#}", e);
    }
}

#[test]
fn a_clean_run_reports_nothing_and_says_what_it_guarded() {
    let o = run("clean");
    assert_eq!(o.kinds(), Vec::<String>::new(), "{:#}", o.report);
    assert!(counter(&o, "canary_scans") > 0, "{:#}", o.report["counters"]);
    assert_eq!(o.report["canary"]["guarded"]["device"], 1, "{:#}", o.report["canary"]);
    assert!(o.stderr.contains("CANARIES: guarded 1 allocation (1 device) with tail canaries"), "{}", o.stderr);
    // Canary mode checks allocations, never kernels: no kernel coverage line.
    assert!(!o.stderr.contains("COVERAGE"), "{}", o.stderr);
    assert!(!o.stderr.contains("kernel launch was checked"), "{}", o.stderr);
    assert!(o.report["coverage"].is_null(), "{:#}", o.report["coverage"]);
}

/// An allocation with no slack gets a granule more, filled by its canary up to where the
/// next allocation may start; the scan checks the canary's first and last 32 bytes: a byte
/// in the middle goes unseen, one of the last (an underflow of the next allocation) is found.
#[test]
fn a_canary_filling_a_granule_is_checked_at_both_edges() {
    let o = run("edges");
    assert_eq!(o.kinds(), vec!["canary_overwrite"], "{:#}", o.report);
    let d = details(&o);
    assert_eq!((d["allocation"]["size"].as_u64(), d["offset_past_end"].as_u64()), (Some(16384), Some(510)), "{d:#}");
    assert_eq!(d["bad_bytes"], 1, "the middle byte is not checked: {d:#}");
    assert!(o.stderr.contains("of the 512 bytes past the end of an allocation of 16384 bytes"), "{}", o.stderr);
}

/// A program that launches nothing for 300 ms (a server between requests) is scanned at
/// doubling gaps, not every millisecond: about ten scans rather than 300.
#[test]
fn an_idle_program_is_scanned_less_and_less_often() {
    let o = run("idle");
    assert_eq!(o.kinds(), Vec::<String>::new(), "{:#}", o.report);
    let scans = counter(&o, "canary_scans");
    assert!((3..=20).contains(&scans), "{scans} scans in 300 ms idle: {:#}", o.report["counters"]);
}

/// A small batch (most programs' rounds) is one launch, its update and scan in one block;
/// with `GPUSAN_CANARY_DIAG=two_kernels` they are launched apart. Either way the overflow
/// is found, as the same finding.
#[test]
fn a_small_batch_is_one_launch_and_finds_the_overflow_two_launches_find() {
    let mut findings = Vec::new();
    for (diag, one) in [("", true), ("two_kernels", false)] {
        let log = dir().join(format!("canary-batch-{one}.log"));
        let _ = std::fs::remove_file(&log);
        let o = run_with(&[], "overflow", &[("FAKE_CUDA_CANARY_LOG", &log), ("GPUSAN_CANARY_DIAG", Path::new(diag))]);
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let (batches, scans) = (
            text.lines().filter(|l| l.starts_with("gpusan_canary_batch ")).count(),
            text.lines().filter(|l| l.starts_with("gpusan_canary_scan ")).count(),
        );
        if one {
            assert!(batches > 0, "no batch kernel: {text}");
            assert_eq!(scans, 0, "a small batch launched apart: {text}");
        } else {
            assert_eq!(batches, 0, "{text}");
            assert!(scans > 0, "{text}");
        }
        assert_eq!(o.kinds(), vec!["canary_overwrite"], "{diag}: {:#}", o.report);
        let d = details(&o);
        findings.push((d["allocation"]["size"].clone(), d["offset_past_end"].clone()));
    }
    assert_eq!(findings[0], findings[1]);
}

#[test]
fn the_guard_scans_on_a_non_blocking_stream_of_the_lowest_priority() {
    let log = dir().join("canary-launches.log");
    let _ = std::fs::remove_file(&log);
    run_with(&[], "clean", &[("FAKE_CUDA_CANARY_LOG", &log)]);
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(text.contains("gpusan_canary_write"), "{text}");
    assert!(text.lines().any(is_scan), "{text}");
    for line in text.lines() {
        assert!(line.contains("stream_flags=1 priority=0 "), "{line}");
    }
}

#[test]
fn an_overflow_left_at_exit_is_found_by_the_final_scan() {
    let started = std::time::Instant::now();
    let o = run_with(&["--canary-interval-ms", "60000"], "overflow_exit", &[]);
    // The guard thread waits out no interval at exit (it is woken), nor the 2 s exit bound.
    assert!(started.elapsed() < std::time::Duration::from_millis(1900), "{:?}", started.elapsed());
    assert_eq!(o.kinds(), vec!["canary_overwrite"], "{:#}", o.report);
    assert_eq!(details(&o)["scan"], "at_exit", "{:#}", details(&o));
}

#[test]
fn a_freed_allocation_is_checked_before_the_driver_gets_it_back() {
    let o = run_with(&["--canary-interval-ms", "60000", "--quarantine-bytes", "0"], "overflow_free", &[]);
    assert_eq!(o.kinds(), vec!["canary_overwrite"], "{:#}", o.report);
    let d = details(&o);
    assert_eq!(d["scan"], "before_free", "{d:#}");
    assert_eq!(d["allocation"]["freed"], true, "{d:#}");
}

#[test]
fn a_quarantined_allocation_is_checked_at_exit() {
    let o = run_with(&["--canary-interval-ms", "60000"], "overflow_free", &[]);
    assert_eq!(o.kinds(), vec!["canary_overwrite"], "{:#}", o.report);
    assert_eq!(details(&o)["scan"], "at_exit", "{:#}", details(&o));
}

#[test]
fn a_context_reset_runs_the_last_scan_first() {
    let o = run_with(&["--canary-interval-ms", "60000"], "reset", &[]);
    assert_eq!(o.kinds(), vec!["canary_overwrite"], "{:#}", o.report);
    assert_eq!(details(&o)["scan"], "context_teardown", "{:#}", details(&o));
}

#[test]
fn an_overflow_past_a_pool_block_names_the_block_and_its_neighbour() {
    let o = run("pool");
    assert_eq!(o.kinds(), vec!["canary_overwrite"], "{:#}", o.report);
    let d = details(&o);
    assert_eq!(d["allocation"]["kind"]["pool_block"]["source"], "torch", "{d:#}");
    assert_eq!(d["allocation"]["size"], 1000, "{d:#}");
    assert_eq!(d["canary_bytes"], 24, "the block's rounding slack: {d:#}");
    assert_eq!(d["offset_past_end"], 2, "{d:#}");
    assert_eq!(d["next"]["size"], 512, "the block that begins where the canary ends: {d:#}");
    assert!(o.stderr.contains("or an underflow before the start of a pool block of 512 bytes"), "{}", o.stderr);
    assert_eq!(o.report["canary"]["guarded"]["pool block"], 1, "{:#}", o.report["canary"]);
    assert_eq!(o.report["canary"]["unguarded"]["size is a multiple of the pool's rounding"], 1, "B: {:#}", o.report);
}

#[test]
fn clean_pool_blocks_and_a_reused_blocks_old_slack_report_nothing() {
    for scenario in ["pool_clean", "pool_reuse"] {
        let o = run(scenario);
        assert_eq!(o.kinds(), Vec::<String>::new(), "{scenario}: {:#}", o.report);
        // A's canary was disarmed at its free: no scan even looked at C's bytes there.
        assert_eq!(counter(&o, "canary_records_dropped"), 0, "{scenario}: {:#}", o.report["counters"]);
    }
}

/// A block the pool was asked padding for (gpusan's PyTorch shim in canary mode) has slack
/// even when its size is a multiple of the pool's rounding: the overflow past it is found.
#[test]
fn a_padded_pool_blocks_overflow_is_found_where_an_unpadded_one_has_no_canary() {
    let o = run("pool_padded");
    assert_eq!(o.kinds(), vec!["canary_overwrite"], "{:#}", o.report);
    let d = details(&o);
    assert_eq!(d["allocation"]["size"], 1024, "{d:#}");
    assert_eq!(d["offset_past_end"], 2, "{d:#}");
    assert!(o.stderr.contains("of the 512 bytes past the end of a pool block of 1024 bytes"), "{}", o.stderr);
    assert_eq!(o.report["canary"]["guarded"]["pool block"], 1, "{:#}", o.report["canary"]);
    assert_eq!(
        o.report["canary"]["unguarded"]["size is a multiple of the pool's rounding"], 1,
        "{:#}",
        o.report["canary"]
    );
}

/// A block handed out again at the place and size it had (a training loop's tensors, step
/// after step) finds its canary in memory: it is armed at once, so an overflow made right
/// after the hand-out, before any synchronization, is found.
#[test]
fn a_block_handed_out_again_where_it_was_is_guarded_at_once() {
    let o = run("pool_again");
    assert_eq!(o.kinds(), vec!["canary_overwrite"], "{:#}", o.report);
    let d = details(&o);
    assert_eq!((d["allocation"]["size"].as_u64(), d["offset_past_end"].as_u64()), (Some(1000), Some(2)), "{d:#}");
}

#[test]
fn a_block_without_slack_is_listed_unguarded_with_why() {
    let o = run("pool_reuse");
    // B (512 bytes) and C (1024).
    assert_eq!(
        o.report["canary"]["unguarded"]["size is a multiple of the pool's rounding"], 2,
        "{:#}",
        o.report["canary"]
    );
}

#[test]
fn the_arrays_grow_and_compact_and_still_find_an_overflow() {
    let o = run("many");
    assert_eq!(o.kinds(), vec!["canary_overwrite"], "{:#}", o.report);
    let d = details(&o);
    assert_eq!(d["allocation"]["size"], 100, "{d:#}");
    assert_eq!(d["offset_past_end"], 0, "{d:#}");
    assert_eq!(counter(&o, "canary_guarded"), 3000);
    assert_eq!(counter(&o, "canary_array_bytes"), 4096 * 16, "grown from 1024 slots by doubling: {:#}", o.report);
}

fn order_log(scenario: &str) -> Vec<String> {
    let log = dir().join(format!("canary-order-{scenario}.log"));
    let _ = std::fs::remove_file(&log);
    // Rounds 1 ms apart: the fake programs' waits hold the 32 rounds a held-back arm waits.
    run_with(&["--canary-interval-ms", "1"], scenario, &[("FAKE_CUDA_CANARY_LOG", &log), ("FAKE_CUDA_ORDER", &log)]);
    std::fs::read_to_string(&log).unwrap_or_default().lines().map(str::to_string).collect()
}

/// A pool block's memory may still be in use by the pool's last user's kernels queued on
/// the block's stream: its canary is written only after them. A program that synchronizes
/// the stream (PyTorch at every `.item()`) has done that wait: the canary is written after
/// the synchronization, and gpusan puts nothing in the program's stream.
#[test]
fn a_pool_blocks_canary_is_written_after_the_program_synchronized_its_stream() {
    let lines = order_log("pool_clean");
    let text = lines.join("\n");
    let update = lines.iter().position(|l| l.starts_with("gpusan_canary_update_bytes")).expect(&text);
    let sync = lines.iter().position(|l| l.starts_with("streamsync 0")).expect(&text);
    assert!(sync < update, "the canary was written before the program's synchronization: {text}");
    assert!(
        !lines.iter().any(|l| l.starts_with("record ") && l.ends_with(" 0")),
        "an event in the program's stream: {text}"
    );
}

/// A module whose kernels call the device heap is loaded rewritten (`canary_heap`): its
/// calls go to gpusan's `malloc` and `free`, its secret and the records' buffer are set,
/// and a record gpusan's `free` writes (a canary byte found overwritten when a kernel freed
/// the block) becomes a finding naming the device-heap block, with the byte the key says
/// was expected.
#[test]
fn a_device_heap_blocks_overwritten_canary_found_at_its_free_is_reported() {
    // A module, and a library as cudart 13 loads a program's kernels.
    for scenario in ["heap", "heap_library"] {
        device_heap_finding(scenario);
    }
}

fn device_heap_finding(scenario: &str) {
    let loaded = dir().join(format!("canary-{scenario}-loaded.ptx"));
    let o = run_with(&[], scenario, &[("FAKE_CUDA_LOADED", &loaded)]);
    let text = std::fs::read_to_string(&loaded).unwrap_or_default();
    assert!(text.contains("call.uni \t(retval0), __gpusan_canary_malloc, (param0);"), "{text}");
    assert!(text.contains("__gpusan_canary_free"), "{text}");
    let value = |key: &str| -> u64 {
        let line = o.stdout.lines().find_map(|l| l.split(' ').find_map(|w| w.strip_prefix(key))).expect(&o.stdout);
        line.parse().unwrap()
    };
    assert!(o.stdout.contains("errors_set=1"), "{scenario}: {}{}", o.stdout, o.stderr);
    let (secret, base) = (value("secret="), value("base="));
    assert_ne!(secret, 0, "the run's secret was written into the module");
    assert_eq!(o.kinds(), vec!["canary_overwrite"], "{:#}", o.report);
    let d = details(&o);
    assert_eq!(d["allocation"]["kind"], "device_heap", "{d:#}");
    assert_eq!(d["allocation"]["size"], 100, "{d:#}");
    assert_eq!(d["offset_past_end"], 3, "{d:#}");
    assert_eq!(d["bad_bytes"], 1, "{d:#}");
    assert_eq!(d["scan"], "device_free", "{d:#}");
    assert_eq!(d["found"], 0x5a, "{d:#}");
    let key = gpusan_abi::canary::heap::heap_key(secret, base, 100);
    assert_eq!(d["expected"], (key >> 24) & 0xff, "{d:#}");
    assert!(
        o.stderr.contains("Canary overwritten: 1 byte of the 32 bytes past the end of a device-heap block (malloc in a kernel) of 100 bytes"),
        "{}",
        o.stderr
    );
    // Compared at the free, not by a scan: no scan's times nor kernels since one.
    assert!(o.stderr.contains("Detected when a kernel freed the block at"), "{}", o.stderr);
    assert!(!o.stderr.contains("after the last clean scan"), "{}", o.stderr);
    assert!(!o.stderr.contains("(id 0)"), "{}", o.stderr);
}

/// CUDA 13's cudart synchronizes the device through `cuCtxSynchronize_v2` (what the driver
/// answers for `cuCtxSynchronize` at version 13000): PyTorch's `torch.cuda.synchronize()`.
/// It arms the block's canary as the old form does, with nothing put in the program's
/// stream; unseen, the canary would wait 32 rounds for an event of gpusan's.
#[test]
fn a_device_synchronization_through_cudas_13_entry_point_arms_a_pool_blocks_canary() {
    let lines = order_log("pool_ctxsync");
    let text = lines.join("\n");
    let update = lines.iter().position(|l| l.starts_with("gpusan_canary_update_bytes")).expect(&text);
    let sync = lines.iter().position(|l| l.starts_with("ctxsync 0")).expect(&text);
    assert!(sync < update, "the canary was written before the program's synchronization: {text}");
    assert!(
        !lines.iter().any(|l| l.starts_with("record ") && l.ends_with(" 0")),
        "an event in the program's stream: {text}"
    );
}

/// Without a synchronization of the program's, the canary waits 32 rounds, then is written
/// after an event of gpusan's recorded on the stream, which the guard stream waits for.
#[test]
fn a_pool_blocks_canary_in_a_stream_never_synchronized_waits_for_an_event_of_gpusans() {
    let lines = order_log("pool_nosync");
    let text = lines.join("\n");
    let record = lines.iter().position(|l| l.starts_with("record ") && l.ends_with(" 0")).expect(&text);
    let update = lines.iter().position(|l| l.starts_with("gpusan_canary_update_bytes")).expect(&text);
    assert!(record < update && lines[record..update].iter().any(|l| l.starts_with("wait ")), "{text}");
    // Before it, 32 rounds held the arm back: slots written empty, no bytes.
    let scans_before = lines[..record].iter().filter(|l| is_scan(l)).count();
    assert!(scans_before >= 30, "{scans_before} scans before the event: {text}");
}

/// A child forked after CUDA started only forwards its calls; its exit handlers (the
/// guard's among them, inherited) neither hang nor report the parent's canary again.
#[test]
fn a_forked_child_leaves_the_parents_guard_alone() {
    let o = run("fork");
    assert_eq!(o.kinds(), vec!["canary_overwrite"], "{:#}", o.report);
    assert_eq!(o.report["summary"]["total"], 1, "the parent's finding once: {:#}", o.report);
}

/// Threads allocating, writing every byte they asked for and freeing while the guard
/// scans: no finding, no deadlock.
#[test]
fn threads_that_stay_in_bounds_report_nothing() {
    let o = run("threads");
    assert_eq!(o.kinds(), Vec::<String>::new(), "{:#}", o.report);
    assert_eq!(counter(&o, "canary_guarded"), 1200);
}

/// A stream capturing in global mode is never disturbed by the guard (its thread is in
/// relaxed mode, and nothing goes to the program's streams while a capture runs); a block
/// handed out during the capture gets its canary once the capture ended.
#[test]
fn a_capture_is_not_disturbed_and_its_block_is_guarded_after_it() {
    let log = dir().join("canary-capture.log");
    let _ = std::fs::remove_file(&log);
    let o = run_with(&["--canary-interval-ms", "1"], "capture", &[("FAKE_CUDA_ORDER", &log)]);
    assert!(o.stdout.contains("invalidations=0"), "{}", o.stdout);
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let end = text.lines().position(|l| l.starts_with("endcapture ")).expect(&text);
    let stream = text.lines().nth(end).unwrap().trim_start_matches("endcapture ");
    let on_stream = |l: &&str| l.starts_with("record ") && l.ends_with(&format!(" {stream}"));
    assert!(!text.lines().take(end).any(|l| on_stream(&l)), "an event recorded into the capture: {text}");
    assert!(text.lines().skip(end).any(|l| on_stream(&l)), "the block's canary waits for its stream after: {text}");
    assert_eq!(o.kinds(), vec!["canary_overwrite"], "{:#}", o.report);
    assert_eq!(details(&o)["allocation"]["kind"]["pool_block"]["source"], "torch", "{:#}", details(&o));
}

/// Memory given back to the driver is never scanned again: a segment freed with its blocks
/// still handed out takes their canaries with it, before the driver gets it.
#[test]
fn a_segment_given_back_disarms_the_canaries_of_its_blocks() {
    let o = run_with(&["--quarantine-bytes", "0"], "pool_segment", &[]);
    assert_eq!(o.kinds(), Vec::<String>::new(), "{:#}", o.report);
    assert_eq!(counter(&o, "canary_live"), 0, "{:#}", o.report["counters"]);
}

/// A stream-ordered allocation's memory is the program's from its place in the stream on:
/// its canary is written after an event of gpusan's recorded there (the pool's last user
/// of the memory may still be queued), and an overflow past it is found.
#[test]
fn a_stream_ordered_allocations_canary_is_written_after_its_place_in_the_stream() {
    let log = dir().join("canary-async.log");
    let _ = std::fs::remove_file(&log);
    let o = run_with(&[], "async", &[("FAKE_CUDA_CANARY_LOG", &log), ("FAKE_CUDA_ORDER", &log)]);
    assert_eq!(o.kinds(), vec!["canary_overwrite"], "{:#}", o.report);
    assert!(details(&o)["allocation"]["kind"]["async"].is_object(), "{:#}", details(&o));
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let write = lines.iter().position(|l| l.starts_with("gpusan_canary_write")).expect(&text);
    let record = lines[..write].iter().rposition(|l| l.starts_with("record ")).expect(&text);
    assert!(lines[record..write].iter().any(|l| l.starts_with("wait ")), "{text}");
}

/// A stream-ordered free that reaches the driver while a scan may still read the memory
/// waits for that scan on the GPU (gpusan's stream waits for the guard's event), never on
/// the program's thread.
#[test]
fn a_stream_ordered_release_waits_for_the_guards_scan_on_the_gpu() {
    let log = dir().join("canary-async-free.log");
    let _ = std::fs::remove_file(&log);
    let env = [("FAKE_CUDA_CANARY_LOG", log.as_path()), ("FAKE_CUDA_ORDER", log.as_path())];
    run_with(&["--quarantine-bytes", "1500"], "async_evict", &env);
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let guard = lines
        .iter()
        .find_map(|l| l.strip_prefix("gpusan_canary_scan ").or_else(|| l.strip_prefix("gpusan_canary_batch ")))
        .expect(&text);
    let guard = guard.split("stream=").nth(1).unwrap();
    let free = lines.iter().position(|l| l.starts_with("freeasync ")).expect(&text);
    // The guard's event: the last recorded on its stream before the free.
    let event = lines[..free]
        .iter()
        .rev()
        .find_map(|l| l.strip_prefix("record ").and_then(|r| r.strip_suffix(&format!(" {guard}"))))
        .expect(&text);
    assert!(lines[..free].iter().any(|l| l.starts_with("wait ") && l.ends_with(&format!(" {event}"))), "{text}");
}

/// A kernel fault breaks the context: the guard stops there (its queries fail) and the
/// program's exit, the final scan's included, goes on.
#[test]
fn a_faulted_context_stops_the_guard_and_exit_goes_on() {
    let o = run("fault");
    assert_eq!(o.kinds(), vec!["kernel_fault"], "{:#}", o.report);
}

/// Canary mode checks no kernel: asking it to fail on unchecked launches is refused rather
/// than passing silently.
#[test]
fn require_checked_is_refused_in_canary_mode() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gpusan"))
        .args(["run", "--mode", "canary", "--require-checked", "--", "true"])
        .env("GPUSAN_INJECT_LIB", fake_driver::inject_lib())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("`--mode canary` checks no kernel"));
}

/// A child forked before CUDA started makes its own guard (the parent's thread is not in
/// it) and finds its own overflow.
#[test]
fn a_child_forked_before_cuda_guards_its_own_allocations() {
    let o = run("fork_first");
    assert_eq!(o.kinds(), vec!["canary_overwrite"], "{:#}", o.report);
    assert_eq!(details(&o)["allocation"]["size"], 1000, "{:#}", details(&o));
}

/// The canary lives in padding the driver is asked for; the program never sees it: the
/// pointer is the driver's own and the range the driver reports is the size asked.
#[test]
fn the_padding_is_the_drivers_and_hidden_from_the_program() {
    let o = run("range");
    // 1000 bytes: the canary fills the 24 bytes up to the driver's 512-byte rounding.
    assert!(o.stdout.contains("asked=1024 range=1000 base_ok=1"), "{}", o.stdout);
}

/// Where the driver refuses gpusan's resources, the program runs on unharmed and the report
/// says its canaries were never scanned, rather than passing for clean.
#[test]
fn a_context_the_guard_cannot_set_up_is_said_not_scanned() {
    let o = run_with(&[], "overflow", &[("FAKE_CUDA_NO_PRIORITY_STREAMS", Path::new("1"))]);
    assert_eq!(o.kinds(), Vec::<String>::new(), "{:#}", o.report);
    let notes = o.report["notes"].to_string();
    assert!(notes.contains("1 canaries there were never scanned"), "{notes}");
}

/// A finding says when it was seen on clocks a program can compare with its own: the host's
/// realtime when the scan was launched and when its records were read (µs since the epoch),
/// and the GPU's `%globaltimer` when the scan kernel saw the bad bytes (the fake's is
/// realtime in ns). The program read realtime just before its store: no scan saw it earlier.
#[test]
fn a_finding_carries_absolute_detection_times_to_the_microsecond() {
    let o = run("overflow");
    assert_eq!(o.kinds(), vec!["canary_overwrite"], "{:#}", o.report);
    let d = details(&o);
    let store = o
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("overwrite_unix_us="))
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("{}", o.stdout));
    let (launched, detected) = (d["scan_launched_unix_us"].as_u64(), d["detected_unix_us"].as_u64());
    let (Some(launched), Some(detected), Some(gpu_ns)) = (launched, detected, d["scan_gpu_ns"].as_u64()) else {
        panic!("no absolute times: {d:#}")
    };
    assert!(store <= gpu_ns / 1000, "seen before the store: {store} {d:#}");
    assert!(launched <= gpu_ns / 1000 && gpu_ns / 1000 <= detected, "launch, scan, read in order: {d:#}");
    // The periodic scan (1 ms) found it within the 30 ms the program waited.
    assert!(detected - store < 30_000, "{store} {d:#}");
}

/// `--canary-interval-ms` takes fractions of a millisecond (GMOD's latency needs scans
/// well under one apart): 0.1 is 100 µs, which the guard uses (the report says its
/// interval); the default is 4 ms.
#[test]
fn a_fractional_scan_interval_is_taken_and_used() {
    let o = run_with(&["--canary-interval-ms", "0.1"], "overflow", &[]);
    assert_eq!(o.kinds(), vec!["canary_overwrite"], "{:#}", o.report);
    assert_eq!(o.report["canary"]["interval_us"], 100, "{:#}", o.report["canary"]);
    let o = run("clean");
    assert_eq!(o.report["canary"]["interval_us"], 4000, "the default: {:#}", o.report["canary"]);
}

/// An interval of zero, below 0.05 ms or negative is refused before the program runs, with
/// the reason.
#[test]
fn a_zero_or_negative_scan_interval_is_refused_with_why() {
    for (value, why) in [("0", "is zero"), ("-1", "is negative"), ("0.01", "out of range"), ("abc", "not a number")] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_gpusan"))
            .args(["run", "--mode", "canary", "--canary-interval-ms", value, "--", "true"])
            .env("GPUSAN_INJECT_LIB", fake_driver::inject_lib())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{value}: {err}");
        assert!(err.contains("--canary-interval-ms") && err.contains(why), "{value}: {err}");
        assert!(err.contains("from 0.05 to 60000 milliseconds") || why == "not a number", "{value}: {err}");
    }
}
