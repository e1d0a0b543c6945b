//! The shape rules of the workspace's sources (ARCHITECTURE.md, "Shape of the code"), held
//! by a test so they stay true: no import circle between the modules of a crate, no source
//! file over 1,200 lines, no function over 150 lines.
//!
//! The module graph is read from the text (`gpusan_testkit::modules`, which says what
//! counts as a use); function lengths too, from rustfmt's layout: a body closes on a line
//! of its own at the indentation of its `fn`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use gpusan_testkit::modules;

const MAX_FILE_LINES: usize = 1200;
const MAX_FN_LINES: usize = 150;

struct Source {
    path: PathBuf,
    text: String,
}

fn crates() -> Vec<PathBuf> {
    let dir = gpusan_testkit::repo_root().join("crates");
    let mut out: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("src").is_dir())
        .collect();
    out.sort();
    assert!(out.len() >= 6, "crates/ holds {} crates", out.len());
    out
}

fn sources(krate: &Path) -> Vec<Source> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|e| e == "rs") {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    walk(&krate.join("src"), &mut files);
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).unwrap();
            Source { path, text }
        })
        .collect()
}

/// `(first line, lines)` of each function whose body rustfmt closes on a line of its own at
/// the indentation of its `fn`.
fn long_functions(text: &str) -> Vec<(usize, usize, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        let indent = &line[..line.len() - trimmed.len()];
        let Some(at) = trimmed.find("fn ") else { continue };
        let head = &trimmed[..at];
        let is_fn = head
            .split_whitespace()
            .all(|w| matches!(w, "pub" | "const" | "async" | "unsafe" | "extern" | "\"C\"") || w.starts_with("pub("));
        if !is_fn {
            continue;
        }
        // A body opens where the signature ends: a declaration (`;`) or a macro's entry
        // (`fn name(…) => handler,`) has none.
        let header_end = lines[i..].iter().position(|l| {
            let t = l.trim_end();
            t.ends_with('{')
                || t.ends_with(';')
                || t.ends_with(',') && !t.ends_with("(,")
                || t.contains("=>")
                || t.ends_with('}')
        });
        let opens = header_end.is_some_and(|e| {
            let t = lines[i + e].trim_end();
            t.ends_with('{') && !t.contains("=>") && (e == 0 || !lines[i..i + e].iter().any(|l| l.contains("=>")))
        });
        if !opens {
            continue;
        }
        let close = format!("{indent}}}");
        if let Some(end) = lines[i + 1..].iter().position(|l| *l == close) {
            let n = end + 2;
            if n > MAX_FN_LINES {
                let name: String = trimmed[at + 3..].chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                out.push((i + 1, n, name));
            }
        }
    }
    out
}

#[test]
fn no_import_circle_inside_any_crate() {
    let mut found = Vec::new();
    for krate in crates() {
        let graph = modules::graph(&krate.join("src"));
        assert!(graph.len() > 1, "{}: no modules read", krate.display());
        if let Some(c) = modules::circle(&graph) {
            let names: Vec<String> = c.iter().map(modules::name).collect();
            found.push(format!("{}: {}", krate.file_name().unwrap().to_string_lossy(), names.join(" -> ")));
        }
    }
    assert!(found.is_empty(), "import circles:\n{}", found.join("\n"));
}

#[test]
fn no_source_file_over_the_limit() {
    let mut found = Vec::new();
    for krate in crates() {
        for f in sources(&krate) {
            let n = f.text.lines().count();
            if n > MAX_FILE_LINES {
                found.push(format!("{}: {n} lines", f.path.display()));
            }
        }
    }
    assert!(found.is_empty(), "files over {MAX_FILE_LINES} lines:\n{}", found.join("\n"));
}

#[test]
fn no_function_over_the_limit() {
    let mut found = Vec::new();
    for krate in crates() {
        for f in sources(&krate) {
            for (line, n, name) in long_functions(&f.text) {
                found.push(format!("{}:{line}: fn {name}: {n} lines", f.path.display()));
            }
        }
    }
    assert!(found.is_empty(), "functions over {MAX_FN_LINES} lines:\n{}", found.join("\n"));
}

#[test]
fn the_rules_see_what_they_forbid() {
    let mut all = BTreeMap::new();
    for m in [vec![], vec!["a"], vec!["a", "b"], vec!["c"], vec!["d"], vec!["d", "e"]] {
        all.insert(m.into_iter().map(String::from).collect::<modules::Module>(), String::new());
    }
    let here: modules::Module = vec!["d".into()];
    let src = "use crate::{a::{b, X}, c};\n// crate::nothing\npub(in crate::c) fn f() { super::a::y(); e::z(); }\n\
               #[cfg(test)]\nmod tests { use crate::c; }";
    let found: Vec<String> = modules::uses(&here, src, &all).iter().map(modules::name).collect();
    assert_eq!(found, ["a", "a::b", "c", "d::e"]);
    let module = |s: &str| s.split("::").map(String::from).collect::<modules::Module>();
    let graph: BTreeMap<_, BTreeSet<_>> = [
        (module("a"), [module("a::b")].into()),
        (module("a::b"), [module("c")].into()),
        (module("c"), [module("a")].into()),
        (module("d"), [module("a")].into()),
    ]
    .into();
    assert_eq!(modules::circle(&graph).map(|c| c.len()), Some(3));
    let body = "    x();\n".repeat(MAX_FN_LINES);
    let text = format!(
        "pub(crate) fn long() {{\n{body}}}\nfn short() {{\n}}\nhooks! {{\n    fn a(x: u32)\n        => |r| f(r, x);\n{body}    }}\n}}\n"
    );
    assert_eq!(long_functions(&text), vec![(1, MAX_FN_LINES + 2, "long".to_string())]);
}
