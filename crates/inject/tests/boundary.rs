//! The C boundary, checked from the sources: every function of gpusan's that C can call
//! (an `extern "C" fn` with a body: the exported stand-ins, `dlsym`, `cuGetProcAddress`,
//! `InitializeInjection`, the Sanitizer API's callbacks, the load, exit and fork handlers)
//! runs its work under `driver::boundary`'s `contain` or `enter`, directly or through a
//! function of its own file that does; and nothing else catches panics. A new door cannot
//! forget it: a panic there would unwind into C, which Rust turns into an abort of the
//! program. The few that run none of gpusan's work are listed here, each with why.

use std::collections::BTreeMap;
use std::path::Path;

/// `extern "C"` functions that need no guard: (file, name, why).
const NEEDS_NONE: &[(&str, &str, &str)] = &[
    ("driver/hook.rs", "tracked", "calls the real function and notes its result in a `Cell`: nothing that panics"),
    ("doors/dlsym.rs", "dlsym", "naked: jumps to `dlsym_from` with the caller's address"),
    (
        "driver/resolve.rs",
        "each",
        "`dl_iterate_phdr`'s callback: copies a name into a list (allocation failure aborts)",
    ),
];

/// The source without comments, string and character literals' contents, and a file's
/// closing `#[cfg(test)]` module.
fn code(src: &str) -> String {
    let src = src.split("#[cfg(test)]").next().unwrap_or("");
    let b = src.as_bytes();
    let (mut out, mut i) = (String::new(), 0);
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                    i += 1;
                }
                i += 2;
            }
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                out.push_str("\"\"");
                i += 1;
            }
            // A character literal ('x', '\n'), not a lifetime ('a).
            b'\'' if b.get(i + 1) == Some(&b'\\') || b.get(i + 2) == Some(&b'\'') => {
                i += 1;
                while i < b.len() && b[i] != b'\'' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                out.push_str("' '");
                i += 1;
            }
            c => {
                out.push(c as char);
                i += 1;
            }
        }
    }
    out
}

/// Every function with a body in `code`: name → (whether `extern "C"`, body).
fn functions(code: &str) -> BTreeMap<String, (bool, String)> {
    let mut out = BTreeMap::new();
    let mut from = 0;
    while let Some(at) = code[from..].find("fn ").map(|a| a + from) {
        from = at + 3;
        if code[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_') {
            continue; // part of a longer word
        }
        let before = code[..at].trim_end();
        let rest = &code[from..];
        let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '$').collect();
        if name.is_empty() {
            continue; // a function pointer type: `fn(…)`
        }
        let is_extern_c = before.ends_with("extern \"\"");
        // The body opens at the first `{` before any `;` (a declaration has none).
        let Some(open) = rest.find(['{', ';']).filter(|&o| rest.as_bytes()[o] == b'{') else { continue };
        let mut depth = 0;
        let mut end = open;
        for (k, c) in rest[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + k;
                        break;
                    }
                }
                _ => {}
            }
        }
        out.insert(name, (is_extern_c, rest[open..=end].to_string()));
    }
    out
}

/// Whether `body` runs its work under the boundary, directly or through a function of
/// `fns` that does (one step).
fn guarded(body: &str, fns: &BTreeMap<String, (bool, String)>) -> bool {
    let direct = |b: &str| b.contains("boundary::contain(") || b.contains("boundary::enter(");
    direct(body)
        || fns.iter().any(|(name, (_, b))| {
            direct(b)
                && body
                    .match_indices(&format!("{name}("))
                    .any(|(at, _)| !body[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == '.'))
        })
}

/// Unguarded C entry points and stray panic catchers in the sources `files` (path → text).
fn violations(files: &BTreeMap<String, String>) -> Vec<String> {
    let mut wrong = Vec::new();
    for (path, text) in files {
        let code = code(text);
        for word in ["catch_unwind", "set_hook", "take_hook"] {
            if path != "driver/boundary.rs" && code.contains(word) {
                wrong.push(format!("{path}: `{word}` outside driver/boundary.rs (use boundary::contain)"));
            }
        }
        let fns = functions(&code);
        for (name, (is_extern_c, body)) in &fns {
            let listed = NEEDS_NONE.iter().any(|(f, n, _)| f == path && n == name);
            if *is_extern_c && !listed && !guarded(body, &fns) {
                wrong.push(format!("{path}: extern \"C\" fn {name} runs outside boundary::contain / enter"));
            }
        }
    }
    wrong
}

/// The sources of this crate (path relative to `src/` → text).
fn sources() -> BTreeMap<String, String> {
    sources_in(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"))
}

fn sources_in(root: &Path) -> BTreeMap<String, String> {
    fn walk(dir: &Path, root: &Path, out: &mut BTreeMap<String, String>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, root, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                out.insert(rel, std::fs::read_to_string(&p).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

#[test]
fn every_function_c_calls_runs_under_the_boundary() {
    let files = sources();
    let wrong = violations(&files);
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // The exceptions still exist and still need no guard (a stale entry would excuse a
    // new function of the same name).
    for (path, name, _) in NEEDS_NONE {
        let fns = functions(&code(&files[*path]));
        let (is_extern_c, body) = fns.get(*name).unwrap_or_else(|| panic!("{path}: no fn {name}"));
        assert!(*is_extern_c, "{path}: {name} is not extern \"C\"");
        assert!(!body.contains("state()") && !body.contains("quietly("), "{path}: {name} does gpusan's work");
    }
    // Every export the library has is among those checked (the doors, the stand-ins' macro).
    let all: String = files.values().map(|t| code(t)).collect();
    for export in ["fn dlsym_from(", "fn cuGetProcAddress_v2(", "fn cuGetProcAddress(", "fn InitializeInjection("] {
        assert!(all.contains(export), "{export} not found");
    }
}

/// A panic caught at the boundary leaves the locks it held poisoned, and `lock().unwrap()`
/// would panic again in every later call that takes one (the report at exit among them):
/// the code that runs inside the program (this crate and `gpusan-runtime`) takes its locks
/// through `gpusan_runtime::locks`, poisoned or not.
#[test]
fn every_lock_is_taken_poisoned_or_not() {
    let runtime = Path::new(env!("CARGO_MANIFEST_DIR")).join("../runtime/src");
    let mut wrong = Vec::new();
    for (krate, files) in [("inject", sources()), ("runtime", sources_in(&runtime))] {
        for (path, text) in files.iter().filter(|(p, _)| !(krate == "runtime" && *p == "locks.rs")) {
            let code = code(text);
            for taken in [".lock()", ".read().unwrap", ".write().unwrap", ".read().expect", ".write().expect"] {
                if code.contains(taken) {
                    wrong.push(format!("crates/{krate}/src/{path}: `{taken}` (use gpusan_runtime::locks)"));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_rule_sees_what_it_forbids() {
    let file = |text: &str| BTreeMap::from([("doors/new.rs".to_string(), text.to_string())]);
    let bare = "#[no_mangle]\npub unsafe extern \"C\" fn cuNew(x: u32) -> CUresult {\n    work(x)\n}\n";
    assert_eq!(violations(&file(bare)).len(), 1, "an unguarded export");
    let callback =
        "unsafe extern \"C\" fn cb(d: *const c_void) {\n    let s = \"{ // }\";\n    probe::with(|s| s.n += 1);\n}\n";
    assert_eq!(violations(&file(callback)).len(), 1, "an unguarded callback, braces and // in a string");
    let direct = "pub extern \"C\" fn f() -> c_int {\n    boundary::contain(\"f\", || 1, || 0)\n}\n";
    assert!(violations(&file(direct)).is_empty());
    let through =
        "extern \"C\" fn g() {\n    helper(1)\n}\nfn helper(x: u32) {\n    boundary::enter(\"g\", || ());\n}\n";
    assert!(violations(&file(through)).is_empty(), "through a function that guards");
    let other =
        "extern \"C\" fn g() {\n    my_helper(1)\n}\nfn helper(x: u32) {\n    boundary::enter(\"g\", || ());\n}\n";
    assert_eq!(violations(&file(other)).len(), 1, "a name that only ends like the guarding function's");
    let types = "type F = unsafe extern \"C\" fn(u32) -> i32;\nfn h(real: unsafe extern \"C\" fn(u32)) {}\n";
    assert!(violations(&file(types)).is_empty(), "function pointer types are no entry points");
    let catcher = "fn q() {\n    let _ = std::panic::catch_unwind(|| ());\n}\n";
    assert_eq!(violations(&file(catcher)).len(), 1, "a panic caught outside the boundary");
    let in_test = "fn q() {}\n#[cfg(test)]\nmod tests {\n    extern \"C\" fn seven() -> i32 {\n        7\n    }\n}\n";
    assert!(violations(&file(in_test)).is_empty(), "a file's tests are not the library");
}
