//! Stream-ordered frees go through the quarantine (issue 13), with the fake driver
//! (`pools_prog SCENARIO`): the pool must not hand a freed block's address out again while
//! gpusan holds it, the block is given back after an event at the free's place in the
//! program's stream (on gpusan's own stream, no host synchronization), and a second free of
//! it is a double free.

mod fake_driver;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use fake_driver::Outcome;

fn dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| fake_driver::build("pools", &[("pools_prog", "pools_prog.c")]))
}

fn run(options: &[&str], scenario: &str) -> (Outcome, Vec<String>) {
    let d = dir();
    let prog = d.join("pools_prog");
    let order = d.join(format!("order-{scenario}-{}.txt", options.len()));
    let _ = std::fs::remove_file(&order);
    let o = fake_driver::gpusan_run(d, options, &[prog.to_str().unwrap(), scenario], &[("FAKE_CUDA_ORDER", &order)]);
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
