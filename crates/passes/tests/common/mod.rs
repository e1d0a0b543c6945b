//! The shared test support (the corpus, the pinned toolchain: see `gpusan-testkit`), and
//! how a check fixture names its configuration.
#![allow(unused_imports)]
pub use gpusan_testkit::*;

use gpusan_passes::check::{CheckConfig, Counting, LocalBounds, Reaction};

/// The configuration a check fixture asks for in its header lines (`// check-reaction:
/// abort`, `// check-count: dynamic`, `// local-bounds: frame`); the default otherwise.
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
    let local_bounds = input
        .lines()
        .find_map(|l| l.strip_prefix("// local-bounds: "))
        .map(|b| LocalBounds::from_name(b.trim()).expect("`object` or `frame`"))
        .unwrap_or_default();
    CheckConfig { reaction, counting, local_bounds }
}
