//! The crate's layering, checked from its sources (`gpusan_testkit::modules` reads which
//! modules each file names): every module a module uses is of its own layer or one below
//! (the picture in `lib.rs`). No circle, in this crate as in every other, is
//! `crates/testkit/tests/layout.rs`'s rule.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use gpusan_testkit::modules::{self, name, Module};

/// Layers from the bottom; a module belongs to the layer of its first path segment.
const LAYERS: &[&[&str]] = &[
    &["driver"],
    &["state", "probe", "image", "pyframes"],
    &["capture", "variables", "host_symbols"],
    &["routes"],
    &["families"],
    &["doors"],
    &["exit"],
];

fn layer(m: &Module) -> usize {
    let Some(first) = m.first() else { return LAYERS.len() }; // the crate root
    LAYERS.iter().position(|l| l.contains(&first.as_str())).unwrap_or_else(|| panic!("`{first}` is in no layer"))
}

fn graph() -> BTreeMap<Module, BTreeSet<Module>> {
    modules::graph(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"))
}

#[test]
fn no_module_imports_from_a_layer_above_its_own() {
    let mut wrong = Vec::new();
    for (m, targets) in graph() {
        for t in targets.iter().filter(|t| layer(t) > layer(&m)) {
            wrong.push(format!("{} (layer {}) uses {} (layer {})", name(&m), layer(&m), name(t), layer(t)));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
