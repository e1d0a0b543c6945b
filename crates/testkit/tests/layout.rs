//! The shape rules of the workspace's sources (ARCHITECTURE.md, "Shape of the code"), held
//! by a test so they stay true: no import circle between the modules of a crate, no source
//! file over 1,200 lines, no function over 150 lines.
//!
//! The module graph is read from the text, which rustfmt keeps regular: an edge from a
//! module to each module its `use` and qualified paths name (`crate::a::b`, `super::x`,
//! `self::x`). The crate root (`lib.rs`, `main.rs`) is the crate's facade and is left out
//! of the graph: it declares the modules and re-exports their items, and modules that name
//! an item through it (`crate::Pass`) would otherwise seem to depend on every module the
//! root re-exports from. Unit-test modules (`#[cfg(test)] mod tests`) may use their parent.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const MAX_FILE_LINES: usize = 1200;
const MAX_FN_LINES: usize = 150;

struct Source {
    /// `a::b` for `src/a/b.rs` or `src/a/b/mod.rs`; empty for the crate root.
    module: String,
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
    let src = krate.join("src");
    let mut files = Vec::new();
    walk(&src, &mut files);
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let rel = path.strip_prefix(&src).unwrap().with_extension("");
            let mut parts: Vec<String> = rel.iter().map(|c| c.to_string_lossy().into_owned()).collect();
            if parts.last().is_some_and(|l| l == "mod") {
                parts.pop();
            }
            if parts.len() == 1 && (parts[0] == "lib" || parts[0] == "main") {
                parts.clear();
            }
            // Binaries of a crate (`src/bin/x.rs`) are roots of their own.
            if parts.first().is_some_and(|p| p == "bin") {
                parts.clear();
            }
            let text = std::fs::read_to_string(&path).unwrap();
            Source { module: parts.join("::"), path, text }
        })
        .collect()
}

/// The text before the file's unit-test module: tests may use whatever they test.
fn without_tests(text: &str) -> &str {
    match text.find("#[cfg(test)]\nmod ") {
        Some(i) => &text[..i],
        None => text,
    }
}

/// Every path the text names that starts with `crate::`, `super::` or `self::`, resolved
/// against `module` to a list of segments (items included: the caller keeps the longest
/// prefix that is a module).
fn paths(module: &str, text: &str) -> Vec<Vec<String>> {
    let here: Vec<&str> = if module.is_empty() { vec![] } else { module.split("::").collect() };
    let mut out = Vec::new();
    // `use a::{b, c::d}` groups: expand only their first level, which names the modules.
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or("");
        for start in ["crate::", "super::", "self::"] {
            let mut rest = code;
            while let Some(i) = rest.find(start) {
                // Not part of a longer identifier (`my_crate::`).
                let before = rest[..i].chars().last();
                let tail = &rest[i..];
                rest = &rest[i + start.len()..];
                if before.is_some_and(|c| c.is_alphanumeric() || c == '_')
                    || code[..code.len() - rest.len()].ends_with(&format!("(in {start}"))
                {
                    continue;
                }
                let path = tail.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':')).next().unwrap_or("");
                let segs: Vec<String> = path.split("::").filter(|s| !s.is_empty()).map(str::to_string).collect();
                // `use super::{a, b::C}`: each member's first segment, under the same prefix.
                let mut members: Vec<Vec<String>> = Vec::new();
                if path.ends_with("::") && tail[path.len()..].starts_with('{') {
                    let group = tail[path.len() + 1..].split('}').next().unwrap_or("");
                    for m in group.split(',') {
                        let first = m.trim().split("::").next().unwrap_or("").trim();
                        if !first.is_empty()
                            && first != "self"
                            && first.chars().all(|c| c.is_alphanumeric() || c == '_')
                        {
                            let mut full = segs.clone();
                            full.push(first.to_string());
                            members.push(full);
                        }
                    }
                }
                for segs in if members.is_empty() { vec![segs] } else { members } {
                    let mut base: Vec<String> = here.iter().map(|s| s.to_string()).collect();
                    let mut it = segs.into_iter().peekable();
                    match it.next().as_deref() {
                        Some("crate") => base.clear(),
                        Some("self") => {}
                        Some("super") => {
                            base.pop();
                            while it.peek().is_some_and(|s| s == "super") {
                                it.next();
                                base.pop();
                            }
                        }
                        _ => continue,
                    }
                    base.extend(it);
                    out.push(base);
                }
            }
        }
    }
    out
}

fn module_graph(files: &[Source]) -> BTreeMap<String, BTreeSet<String>> {
    let modules: BTreeSet<&str> = files.iter().map(|f| f.module.as_str()).collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in files.iter().filter(|f| !f.module.is_empty()) {
        let deps = graph.entry(f.module.clone()).or_default();
        let text = without_tests(&f.text);
        // Children named by a relative path (`loops::run`, `use groups::Group`).
        let prefix = format!("{}::", f.module);
        for child in modules.iter().filter_map(|m| m.strip_prefix(prefix.as_str())).filter(|c| !c.contains("::")) {
            let needle = format!("{child}::");
            let named = text
                .match_indices(&needle)
                .any(|(i, _)| !text[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == ':'));
            if named {
                deps.insert(format!("{prefix}{child}"));
            }
        }
        for path in paths(&f.module, text) {
            // The longest prefix that is a module of the crate.
            let target = (1..=path.len()).rev().map(|n| path[..n].join("::")).find(|p| modules.contains(p.as_str()));
            if let Some(t) = target {
                if t != f.module && !t.is_empty() {
                    deps.insert(t);
                }
            }
        }
    }
    graph
}

/// One cycle per strongly connected component of more than one module (Tarjan).
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'a> {
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on_stack.insert(v);
        if let Some(ws) = s.graph.get(v) {
            for w in ws {
                let w = w.as_str();
                if !s.index.contains_key(w) {
                    visit(s, w);
                    let lw = s.low[w];
                    let lv = s.low.get_mut(v).unwrap();
                    *lv = (*lv).min(lw);
                } else if s.on_stack.contains(w) {
                    let iw = s.index[w];
                    let lv = s.low.get_mut(v).unwrap();
                    *lv = (*lv).min(iw);
                }
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                comp.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                s.out.push(comp);
            }
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out
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
        let files = sources(&krate);
        let graph = module_graph(&files);
        for c in cycles(&graph) {
            let edges: Vec<String> = c
                .iter()
                .flat_map(|m| graph[m].iter().filter(|t| c.contains(t)).map(move |t| format!("{m} -> {t}")))
                .collect();
            found.push(format!("{}: {}", krate.file_name().unwrap().to_string_lossy(), edges.join(", ")));
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
    // A circle through `super::` and a qualified path; the root is left out.
    let files = [
        Source { module: String::new(), path: "lib.rs".into(), text: "mod a;\nuse crate::a::X;\n".into() },
        Source { module: "a".into(), path: "a/mod.rs".into(), text: "mod b;\nfn f() { b::g() }\n".into() },
        Source { module: "a::b".into(), path: "a/b.rs".into(), text: "use super::X;\nuse crate::Y;\n".into() },
        Source {
            module: "c".into(),
            path: "c.rs".into(),
            text: "#[cfg(test)]\nmod tests { use super::*; use crate::a::X; }\n".into(),
        },
        Source {
            module: "d".into(),
            path: "d.rs".into(),
            text: "pub(in crate::a) struct S;\nuse crate::{c, e::F};\n".into(),
        },
        Source { module: "e".into(), path: "e.rs".into(), text: String::new() },
    ];
    let graph = module_graph(&files);
    assert_eq!(cycles(&graph), vec![vec!["a".to_string(), "a::b".to_string()]]);
    assert!(graph["c"].is_empty(), "{graph:?}");
    assert_eq!(graph["d"].iter().collect::<Vec<_>>(), ["c", "e"], "groups are followed, visibility is no use");
    let body = "    x();\n".repeat(MAX_FN_LINES);
    let text = format!(
        "pub(crate) fn long() {{\n{body}}}\nfn short() {{\n}}\nhooks! {{\n    fn a(x: u32)\n        => |r| f(r, x);\n{body}    }}\n}}\n"
    );
    assert_eq!(long_functions(&text), vec![(1, MAX_FN_LINES + 2, "long".to_string())]);
}
