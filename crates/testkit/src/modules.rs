//! The modules of a crate and the modules each one names, read from the sources, for the
//! tests that hold the workspace's shape (`tests/layout.rs`: no import circle in any crate;
//! `crates/inject/tests/layers.rs`: no module uses a layer above its own).
//!
//! Every module path a file names counts (`crate::…`, `super::…`, `self::…`, grouped `use`
//! trees, a child module named relatively); comments and a file's closing `#[cfg(test)]`
//! module do not (tests may use what they test), nor does naming the crate root, which is
//! the crate's facade: it declares the modules and re-exports their items.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// A module's path inside its crate, without `crate`: `["routes", "mirror"]`; the root is empty.
pub type Module = Vec<String>;

/// Every module under `dir` (a crate's `src/`) with its source text.
pub fn modules(dir: &Path, prefix: &Module, out: &mut BTreeMap<Module, String>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        let name = p.file_stem().unwrap().to_string_lossy().into_owned();
        if p.is_dir() {
            let mut m = prefix.clone();
            m.push(name);
            modules(&p, &m, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            let mut m = prefix.clone();
            let is_root = prefix.is_empty() && (name == "lib" || name == "main");
            if name != "mod" && !is_root {
                m.push(name);
            }
            out.insert(m, std::fs::read_to_string(&p).unwrap());
        }
    }
}

/// The source without comments, and without its tests (a `#[cfg(test)]` module closes a file:
/// its `super` is the file's module, not the file's parent).
fn without_comments(src: &str) -> String {
    let src = src.split("#[cfg(test)]").next().unwrap_or("");
    src.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n")
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The paths of a `use` tree or expression path starting at `s` (after its first segment),
/// each a list of segments; a `{…}` group expands into one path per member.
fn expand(s: &str, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    let mut path = prefix;
    let mut rest = s;
    while let Some(after) = rest.strip_prefix("::") {
        let after = after.trim_start();
        if let Some(group) = after.strip_prefix('{') {
            let (mut depth, mut start) = (0, 0);
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        expand_member(&group[start..i], &path, out);
                        return;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        expand_member(&group[start..i], &path, out);
                        start = i + 1;
                    }
                    _ => {}
                }
            }
            return;
        }
        let len = after.find(|c: char| !is_ident(c)).unwrap_or(after.len());
        if len == 0 {
            break;
        }
        path.push(after[..len].to_string());
        rest = &after[len..];
    }
    out.push(path);
}

fn expand_member(member: &str, prefix: &[String], out: &mut Vec<Vec<String>>) {
    let member = member.trim();
    let len = member.find(|c: char| !is_ident(c)).unwrap_or(member.len());
    if len == 0 {
        return;
    }
    let mut path = prefix.to_vec();
    path.push(member[..len].to_string());
    expand(&member[len..], path, out);
}

/// Every module a file's source names.
pub fn uses(here: &Module, src: &str, all: &BTreeMap<Module, String>) -> BTreeSet<Module> {
    let code = without_comments(src);
    let mut found = BTreeSet::new();
    let mut resolve = |base: Module, segments: &[String]| {
        let mut m = base;
        for s in segments {
            let mut next = m.clone();
            next.push(s.clone());
            if !all.contains_key(&next) {
                break;
            }
            m = next;
        }
        found.insert(m);
    };
    for (i, _) in code.match_indices("::") {
        // The first segment of the path this `::` follows, if it starts one.
        let before = &code[..i];
        let start = before.rfind(|c: char| !is_ident(c)).map_or(0, |p| p + 1);
        let first = &before[start..];
        // `pub(in crate::x)` is a visibility, not a use.
        if before[..start].ends_with("::") || before[..start].ends_with("in ") || first.is_empty() {
            continue;
        }
        let mut paths = Vec::new();
        expand(&code[i..], Vec::new(), &mut paths);
        for p in paths {
            match first {
                "crate" => resolve(Vec::new(), &p),
                "self" => resolve(here.clone(), &p),
                "super" => {
                    let mut base = here.clone();
                    base.pop();
                    let mut p = &p[..];
                    while p.first().is_some_and(|s| s == "super") {
                        base.pop();
                        p = &p[1..];
                    }
                    resolve(base, p)
                }
                // A child module named relatively (`real::cuMemAlloc_v2()`, `pub use hook::Hook`).
                child => {
                    let mut m = here.clone();
                    m.push(child.to_string());
                    if all.contains_key(&m) {
                        resolve(m, &p)
                    }
                }
            }
        }
    }
    found.remove(here);
    // Naming the crate root is naming nothing in particular.
    found.remove(&Vec::new());
    found
}

/// The module's path as written in Rust, `crate` for the root.
pub fn name(m: &Module) -> String {
    if m.is_empty() {
        "crate".into()
    } else {
        m.join("::")
    }
}

/// Each module of the crate whose sources are in `src` with the modules it names.
pub fn graph(src: &Path) -> BTreeMap<Module, BTreeSet<Module>> {
    let mut all = BTreeMap::new();
    modules(src, &Vec::new(), &mut all);
    all.iter().map(|(m, src)| (m.clone(), uses(m, src, &all))).collect()
}

/// A circle of modules that import each other, if there is one.
pub fn circle(g: &BTreeMap<Module, BTreeSet<Module>>) -> Option<Vec<Module>> {
    // Depth-first search; a module met again while still on the path closes a circle.
    fn visit(
        m: &Module,
        g: &BTreeMap<Module, BTreeSet<Module>>,
        path: &mut Vec<Module>,
        done: &mut BTreeSet<Module>,
    ) -> Option<Vec<Module>> {
        if let Some(at) = path.iter().position(|p| p == m) {
            return Some(path[at..].to_vec());
        }
        if done.contains(m) {
            return None;
        }
        path.push(m.clone());
        for t in &g[m] {
            if let Some(circle) = visit(t, g, path, done) {
                return Some(circle);
            }
        }
        path.pop();
        done.insert(m.clone());
        None
    }
    let mut done = BTreeSet::new();
    g.keys().find_map(|m| visit(m, g, &mut Vec::new(), &mut done))
}
