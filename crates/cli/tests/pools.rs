//! Stream-ordered frees go through the quarantine (issue 13), with the fake driver
//! (`pools_prog SCENARIO`; its pools hand the block freed last out again): the pool must not
//! hand a freed block's address out again while gpusan holds it, the block is given back
//! after an event at the free's place in the program's stream (on gpusan's own stream, no
//! host synchronization), a second free of it is a double free, a use of it names its free;
//! events come from a small pool; an allocation that fails for lack of memory retries once
//! the held blocks' frees are done; a destroyed pool, a reset context and `_ptsz` calls.

mod fake_driver;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use fake_driver::Outcome;

fn dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| fake_driver::build("pools", &[("pools_prog", "pools_prog.c")]))
}

fn run(options: &[&str], scenario: &str) -> (Outcome, Vec<String>) {
    run_with(options, scenario, &[])
}

/// `gpusan run OPTIONS -- pools_prog SCENARIO` with `env`: its outcome and the driver calls
/// of stream-ordered memory it made, in order (`$FAKE_CUDA_ORDER`).
fn run_with(options: &[&str], scenario: &str, env: &[(&str, &Path)]) -> (Outcome, Vec<String>) {
    let d = dir();
    let prog = d.join("pools_prog");
    let order = d.join(format!("order-{scenario}-{}.txt", options.len()));
    let _ = std::fs::remove_file(&order);
    let mut env = env.to_vec();
    env.push(("FAKE_CUDA_ORDER", &order));
    let o = fake_driver::gpusan_run(d, options, &[prog.to_str().unwrap(), scenario], &env);
    assert!(o.stdout.contains(&format!("{scenario} done rc=0")), "{scenario}: {}{}", o.stdout, o.stderr);
    let calls = std::fs::read_to_string(&order).unwrap_or_default().lines().map(str::to_string).collect();
    (o, calls)
}

#[test]
fn a_block_freed_in_stream_order_is_not_handed_out_again_while_quarantined() {
    // Natively the fake hands the block straight back: the test can tell.
    let native = std::process::Command::new(dir().join("pools_prog"))
        .arg("reuse")
        .env("LD_LIBRARY_PATH", dir())
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&native.stdout).contains("reused=1"), "{native:?}");
    for mode in ["api", "check"] {
        let (o, calls) = run(&["--mode", mode], "reuse");
        assert!(o.stdout.contains("reused=0"), "{mode}: {}", o.stdout);
        assert!(calls.iter().any(|c| c.starts_with("record ")), "{mode}: no event at the free: {calls:?}");
        assert!(!calls.iter().any(|c| c.starts_with("sync ")), "{mode}: no host synchronization: {calls:?}");
        assert!(o.kinds().is_empty(), "{mode}: {:#}", o.report);
    }
}

#[test]
fn a_block_leaving_quarantine_is_freed_after_the_programs_free_on_gpusans_stream() {
    let (o, calls) = run(&["--mode", "check", "--quarantine-bytes", "4096"], "evict");
    let p = o.stdout.lines().find_map(|l| l.strip_prefix("p=")).unwrap().to_string();
    let record = calls.iter().position(|c| c.starts_with("record ")).expect("an event at the free");
    let event = calls[record].split(' ').nth(1).unwrap().to_string();
    let wait = calls.iter().position(|c| c.starts_with("wait ") && c.ends_with(&event)).expect("a wait on it");
    let own = calls[wait].split(' ').nth(1).unwrap().to_string();
    let free = calls.iter().position(|c| *c == format!("freeasync {p} {own}")).expect("freed on the waiting stream");
    assert!(record < wait && wait < free, "{calls:?}");
    assert_ne!(own, calls[record].split(' ').nth(2).unwrap(), "on gpusan's stream, not the program's");
}

#[test]
fn freeing_a_quarantined_stream_ordered_block_again_is_a_double_free() {
    let (o, _) = run(&["--mode", "api"], "double");
    assert!(o.stdout.contains("first=0 second=1"), "{}", o.stdout);
    assert_eq!(o.kinds(), vec!["double_free"], "{:#}", o.report);
}

/// The value of `NAME=` in a program's output.
fn printed<'a>(o: &'a Outcome, name: &str) -> &'a str {
    o.stdout
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix('='))
        .unwrap_or_else(|| panic!("{name}: {}", o.stdout))
}

/// No held-back memory the driver refused to take back (`release_failures`).
fn released_cleanly(o: &Outcome) {
    assert!(!format!("{}{}", o.stderr, o.report).contains("could not be given back"), "{}{:#}", o.stderr, o.report);
}

#[test]
fn a_copy_from_a_block_freed_in_stream_order_is_a_use_after_free_naming_the_free() {
    let (o, _) = run(&["--mode", "api"], "stale");
    assert_eq!(printed(&o, "reused"), "0", "{}", o.stdout);
    assert_eq!(o.kinds(), vec!["use_after_free_host"], "{:#}", o.report);
    let alloc = &o.report["errors"][0]["details"]["nearest"]["allocation"];
    assert_eq!((&alloc["base"], &alloc["freed"]), (&printed(&o, "p").into(), &true.into()), "{:#}", o.report);
    let (made, freed) = (&alloc["alloc_stack"][0], &alloc["free_stack"][0]);
    assert_eq!(freed["function"], "main", "the free's site: {:#}", o.report);
    assert_ne!(freed["address"], made["address"], "the free's own site, not the allocation's: {:#}", o.report);
}

#[test]
fn frees_on_one_stream_share_a_few_events() {
    let (o, calls) = run(&["--mode", "api"], "many");
    let count = |what: &str| calls.iter().filter(|c| c.starts_with(what)).count();
    // 101 frees, each recording an event: 32 to an event.
    assert_eq!(count("record "), 101, "{calls:?}");
    assert!(count("create ") <= 4, "{} events made: {calls:?}", count("create "));
    assert!(o.kinds().is_empty(), "{:#}", o.report);
}

#[test]
fn an_allocation_failing_for_lack_of_memory_retries_once_the_held_frees_are_done() {
    let limit = Path::new("4096");
    let (o, calls) = run_with(&["--mode", "api"], "oom", &[("FAKE_CUDA_ASYNC_LIMIT", limit)]);
    let p = printed(&o, "p");
    let at = |line: &str| calls.iter().position(|c| c == line).unwrap_or_else(|| panic!("no `{line}`: {calls:?}"));
    let failed = at("allocasync 0 0x2");
    let free = calls.iter().position(|c| c.starts_with(&format!("freeasync {p} "))).expect("p given back");
    let own = calls[free].split(' ').nth(2).unwrap();
    let synced = at(&format!("streamsync {own}"));
    let retried = calls.iter().rposition(|c| *c == format!("allocasync {p} 0")).unwrap();
    assert!(failed < free && free < synced && synced < retried, "{calls:?}");
    released_cleanly(&o);
}

#[test]
fn a_destroyed_pool_gets_its_held_blocks_back_first() {
    let (o, calls) = run(&["--mode", "api"], "destroy");
    let p = printed(&o, "p");
    let free = calls.iter().position(|c| c.starts_with(&format!("freeasync {p} "))).expect("p given back");
    let destroy = calls.iter().position(|c| c.starts_with("pooldestroy ")).unwrap();
    assert!(free < destroy, "{calls:?}");
    assert!(calls[destroy].ends_with(" 0"), "the pool still had blocks out: {calls:?}");
    assert!(o.kinds().is_empty(), "{:#}", o.report);
    released_cleanly(&o);
}

#[test]
fn a_stream_ordered_block_freed_by_cumemfree_is_given_back_when_it_leaves_quarantine() {
    let (o, _) = run(&["--mode", "api", "--quarantine-bytes", "4096"], "sync_free");
    assert!(o.stdout.contains("driver has 0 bytes out"), "{}", o.stdout);
    released_cleanly(&o);
}

#[test]
fn the_null_stream_of_a_ptsz_free_is_the_threads_own() {
    let (_, calls) = run(&["--mode", "api"], "ptsz");
    let record = calls.iter().find(|c| c.starts_with("record ")).expect("an event at the free");
    assert!(record.ends_with(" 0x2"), "CU_STREAM_PER_THREAD: {calls:?}");
}

#[test]
fn a_reset_context_takes_gpusans_events_with_it() {
    let (o, _) = run(&["--mode", "api"], "reset");
    assert_eq!(printed(&o, "reused"), "0", "a free after the reset is held too: {}", o.stdout);
    assert!(o.kinds().is_empty(), "{:#}", o.report);
    released_cleanly(&o);
}

/// The events the frees recorded (`record EVENT STREAM`), in order.
fn recorded(calls: &[String]) -> Vec<(&str, &str)> {
    calls.iter().filter_map(|c| c.strip_prefix("record ")?.split_once(' ')).collect()
}

#[test]
fn a_new_stream_with_a_destroyed_ones_handle_records_an_event_of_its_own() {
    let (o, calls) = run(&["--mode", "api"], "handle_reuse");
    assert_eq!(printed(&o, "same handle"), "1", "the fake reuses the handle: {}", o.stdout);
    let events = recorded(&calls);
    assert_eq!(events.len(), 2, "{calls:?}");
    assert_eq!(events[0].1, events[1].1, "{calls:?}");
    assert_ne!(events[0].0, events[1].0, "p's free must not wait for the new stream: {calls:?}");
}

#[test]
fn each_threads_per_thread_stream_records_an_event_of_its_own() {
    let (_, calls) = run(&["--mode", "api"], "threads_ptsz");
    let events = recorded(&calls);
    assert_eq!(events.len(), 2, "{calls:?}");
    assert!(events.iter().all(|(_, stream)| *stream == "0x2"), "{calls:?}");
    assert_ne!(events[0].0, events[1].0, "one thread's free must not wait for another's stream: {calls:?}");
}
