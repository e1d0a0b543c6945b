//! The shared test support (the corpus, the pinned toolchain: see `gpusan-testkit`), and
//! how a check fixture names its configuration.
#![allow(unused_imports)]
pub use gpusan_testkit::*;

use gpusan_passes::check::{CheckConfig, Counting, Reaction};

/// The configuration a check fixture asks for in its header lines (`// check-reaction:
/// abort`, `// check-count: dynamic`); the default otherwise.
#[allow(dead_code)]
pub fn check_config_of(input: &str) -> CheckConfig {
    let reaction = input
        .lines()
        .find_map(|l| l.strip_prefix("// check-reaction: "))
        .map(|r| Reaction::from_name(r.trim()).expect("a reaction name"))
        .unwrap_or_default();
    let counting = input
        .lines()
        .find_map(|l| l.strip_prefix("// check-count: "))
        .map(|c| match c.trim() {
            "dynamic" => Counting::Dynamic,
            other => panic!("`// check-count: {other}`: only `dynamic`"),
        })
        .unwrap_or_default();
    CheckConfig { reaction, counting }
}
