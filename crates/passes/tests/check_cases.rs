//! The shared and local memory cases of `tests/cases/` as the pinned nvcc compiles them
//! (`-O3 -lineinfo`, as the GPU suite builds them): the accesses each case is about must
//! be checked against their variable, not left unchecked, and the instrumented PTX must
//! assemble. Whether a check fires is the GPU suite's to show (`bench/gpu-suite.sh`); this
//! test makes sure there is a check to fire, and that the clean cases' on-chip accesses are
//! checked too (so their silence on the GPU means something). The use-after-scope cases'
//! accesses through call results and loaded pointers must get that check.

mod common;

use std::path::PathBuf;
use std::process::Command;

use gpusan_passes::check::{self, Check};

/// `(case, shared accesses, local accesses)`: how many on-chip accesses the case's
/// kernels make in their own space (generic accesses into a window come on top).
const CASES: &[&str] = &[
    "check_shared_static_oob",
    "check_shared_dynamic_oob",
    "check_shared_between_arrays",
    "check_local_oob",
    "check_clean_shared_tiles",
    "check_clean_local_arrays",
    "check_bug_local_use_after_scope",
    "check_clean_local_scope",
    "check_local_array_neighbour",
    "check_clean_local_objects",
    "check_bug_local_scope_return_in_func",
    "check_clean_local_scope_return_in_func",
];

/// `(case, use-after-scope checks at least)`: the kernel's accesses through call results
/// and loaded pointers (the returned and the stored address; the loop's call, the stored
/// pointer and the recursive function's result).
const SCOPE_CASES: &[(&str, u32)] = &[("check_bug_local_use_after_scope", 2), ("check_clean_local_scope", 3)];

/// `(case, sizes of the local objects its kernel's accesses are held to, largest first)`:
/// what the object bounds make of the frame nvcc lays out. The neighbour case's `a[8]` and
/// `b[8]`; the clean case's `m[4][8]` (walked flat and through a row pointer: one object,
/// never split at a row), `S` of two arrays (walked as bytes: one object) and `other[8]`.
const OBJECT_CASES: &[(&str, &[u64])] =
    &[("check_local_array_neighbour", &[32, 32]), ("check_clean_local_objects", &[128, 32, 32])];

/// `(case, functions whose returned value is checked for being in their own frame)`.
const RETURN_CASES: &[(&str, &[&str])] = &[
    ("check_bug_local_scope_return_in_func", &["_Z4fillPKii"]),
    ("check_bug_local_use_after_scope", &["_Z4fillPKii"]),
    ("check_clean_local_scope", &[]),
    ("check_clean_local_scope_return_in_func", &[]),
];

fn compile(case: &str, dir: &std::path::Path) -> (PathBuf, String) {
    compile_file(&gpusan_testkit::repo_root().join("tests/cases").join(format!("{case}.cu")), (case, "-lineinfo"), dir)
}

/// `src` compiled to `dir/case.ptx` with `flag` (`-lineinfo`, or `-G`).
fn compile_file(src: &std::path::Path, (case, flag): (&str, &str), dir: &std::path::Path) -> (PathBuf, String) {
    let ptx = dir.join(format!("{case}.ptx"));
    let out = Command::new(gpusan_testkit::cuda_tool("nvcc"))
        .args(["-arch=sm_90", flag, "-ptx", "-o"])
        .arg(&ptx)
        .arg(src)
        .output()
        .expect("running the pinned nvcc");
    assert!(out.status.success(), "nvcc {case}: {}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&ptx).unwrap();
    (ptx, text)
}

/// On-chip accesses (shared or local space) of the module's kernels, counted from the
/// input. (A `.func` reaching its caller's array through a parameter is not checked: only
/// the caller knows the array.)
fn on_chip(ptx: &str) -> (u32, u32) {
    let m = gpusan_ptx::parse(ptx).unwrap();
    let (mut shared, mut local) = (0, 0);
    for item in &m.items {
        let gpusan_ptx::ast::Item::Function(f) = item else { continue };
        if !f.is_kernel() {
            continue;
        }
        let Ok(cfg) = gpusan_ptx::cfg::Cfg::build(f) else { continue };
        for inst in cfg.instructions(f) {
            for a in gpusan_ptx::semantics::memory_accesses(inst) {
                if a.space.is_shared() {
                    shared += 1;
                } else if a.space == gpusan_ptx::semantics::Space::Local {
                    local += 1;
                }
            }
        }
    }
    (shared, local)
}

#[test]
fn on_chip_cases_are_checked_and_assemble() {
    let dir = std::env::temp_dir().join(format!("gpusan-check-cases-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ptxas = gpusan_testkit::ptxas();
    for case in CASES {
        let (_, src) = compile(case, &dir);
        let (shared, local) = on_chip(&src);
        // The return cases are about their `.func`s: the kernel itself may have no local access.
        let returns = RETURN_CASES.iter().any(|(c, _)| c == case);
        assert!(shared + local > 0 || returns, "{case}: nvcc made no shared or local access; the case tests nothing");
        let mut m = gpusan_ptx::parse(&src).unwrap();
        let r = check::run(&mut m, Some(&src)).unwrap();
        let kernels = || r.functions.iter().filter(|f| f.kind == gpusan_ptx::ast::FunctionKind::Entry);
        let checked_shared: u32 = kernels().map(|f| f.shared).sum();
        let checked_local: u32 = kernels().map(|f| f.local).sum();
        let checked_scope: u32 = kernels().map(|f| f.scope).sum();
        if let Some(&(_, at_least)) = SCOPE_CASES.iter().find(|(c, _)| c == case) {
            assert!(checked_scope >= at_least, "{case}: {checked_scope} use-after-scope checks, {at_least} expected");
        }
        // Every access in shared or local space is checked (generic ones may add more).
        assert!(checked_shared >= shared, "{case}: {checked_shared} of {shared} shared accesses checked");
        // Local accesses through a call result are checked for use after scope instead.
        assert!(
            checked_local + checked_scope >= local,
            "{case}: {checked_local} + {checked_scope} of {local} local accesses checked"
        );
        let out = gpusan_passes::instrument(&src, &Check).unwrap();
        let file = dir.join(format!("{case}.instrumented.ptx"));
        std::fs::write(&file, &out.ptx).unwrap();
        common::assemble(&ptxas, &file, &dir.join(format!("{case}.cubin")))
            .unwrap_or_else(|e| panic!("{case}: instrumented, it does not assemble:\n{e}"));
        // The bug cases' checks name the right code (`%__gs_r` is the record less the
        // buffer's header): the window's, which a misaligned address replaces.
        let code_at = gpusan_abi::record::HEADER_BYTES + gpusan_abi::record::CODE.offset;
        let text = out.ptx.split_whitespace().collect::<Vec<_>>().join(" ");
        let names = |code: u32| {
            text.contains(&format!("mov.u32 %__gs_k, {code};"))
                && text.contains(&format!("selp.u32 %__gs_k, {}, %__gs_k, %__gs_q;", gpusan_abi::CODE_MISALIGNED))
                && text.contains(&format!("[%__gs_r+{code_at}], %__gs_k;"))
        };
        if case.contains("shared") && !case.contains("clean") {
            assert!(names(gpusan_abi::CODE_SHARED_OUT_OF_BOUNDS), "{case}");
        }
        if case.contains("scope") && !case.contains("clean") {
            assert!(names(gpusan_abi::CODE_LOCAL_USE_AFTER_SCOPE), "{case}");
        } else if case.contains("local") && !case.contains("clean") {
            assert!(names(gpusan_abi::CODE_LOCAL_OUT_OF_BOUNDS), "{case}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The misaligned-load case (`tests/cases/check_misaligned_vector_load.cu`): its float4 load
/// is checked for 16-byte alignment as well as for bounds, a misaligned address is recorded
/// as misaligned, and the instrumented PTX assembles. The aligned twin gets the same checks
/// on its global, shared and local vector accesses (its silence on the GPU then means
/// something).
#[test]
fn vector_accesses_are_checked_for_alignment() {
    let dir = std::env::temp_dir().join(format!("gpusan-check-align-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ptxas = gpusan_testkit::cuda_tool("ptxas");
    for (case, masks) in [("check_misaligned_vector_load", &[15][..]), ("check_clean_aligned_vectors", &[15, 7, 3][..])]
    {
        let (_, src) = compile(case, &dir);
        let out = gpusan_passes::instrument(&src, &Check).unwrap();
        let text = out.ptx.split_whitespace().collect::<Vec<_>>().join(" ");
        for mask in masks {
            assert!(text.contains(&format!("and.b32 %__gs_al, %__gs_al, {mask};")), "{case}: no {mask} alignment test");
        }
        assert!(text.contains("setp.ne.or.u32 %__gs_bad, %__gs_al, 0, %__gs_bad;"), "{case}");
        assert!(text.contains(&format!("selp.u32 %__gs_k, {}, %__gs_k, %__gs_q;", gpusan_abi::CODE_MISALIGNED)));
        let file = dir.join(format!("{case}.instrumented.ptx"));
        std::fs::write(&file, &out.ptx).unwrap();
        common::assemble(&ptxas, &file, &dir.join(format!("{case}.cubin")))
            .unwrap_or_else(|e| panic!("{case}: instrumented, it does not assemble:\n{e}"));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The plan's lines for local accesses held to an object: `(function, lo, hi)` of each.
fn objects_of(plans: &str) -> Vec<(String, u64, u64)> {
    let mut function = String::new();
    let mut out = Vec::new();
    for line in plans.lines() {
        if let Some(f) = line.strip_prefix("function ") {
            function = f.trim_end_matches(':').to_string();
        }
        let Some((_, rest)) = line.split_once("in the local object at ") else { continue };
        let Some((_, range)) = rest.split_once(" [") else { continue };
        let (lo, hi) = range.trim_end_matches(')').split_once(", ").unwrap();
        out.push((function.clone(), lo.parse().unwrap(), hi.parse().unwrap()));
    }
    out
}

/// The local cases as the pinned nvcc compiles them: each kernel's local accesses are held
/// to the arrays and structs the source declares (`OBJECT_CASES`), none to a piece of one
/// (which would report the clean case's legal walks) and none to the whole frame (which
/// would miss the neighbour case); `.func`s returning their own frame get the check at the
/// return, and no other function does (`RETURN_CASES`).
#[test]
fn local_objects_are_the_ones_the_source_declares() {
    let dir = std::env::temp_dir().join(format!("gpusan-check-objects-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (case, sizes) in OBJECT_CASES {
        let (_, src) = compile(case, &dir);
        let mut m = gpusan_ptx::parse(&src).unwrap();
        let (_, plans) = check::run_explained(&mut m, Some(&src), &check::CheckConfig::default()).unwrap();
        let objects = objects_of(&plans);
        let mut distinct: Vec<(u64, u64)> = objects.iter().map(|(_, lo, hi)| (*lo, *hi)).collect();
        distinct.sort();
        distinct.dedup();
        let mut found: Vec<u64> = distinct.iter().map(|(lo, hi)| hi - lo).collect();
        found.sort_by(|a, b| b.cmp(a));
        assert_eq!(&found, sizes, "{case}: objects {distinct:?}\n{plans}");
        assert!(!plans.contains("in local __local_depot"), "{case}: a local access held to the whole frame\n{plans}");
    }
    for (case, functions) in RETURN_CASES {
        let (_, src) = compile(case, &dir);
        let mut m = gpusan_ptx::parse(&src).unwrap();
        let (_, plans) = check::run_explained(&mut m, Some(&src), &check::CheckConfig::default()).unwrap();
        let mut function = "";
        let mut checked = Vec::new();
        for line in plans.lines() {
            if let Some(f) = line.strip_prefix("function ") {
                function = f.trim_end_matches(':');
            }
            if line.contains("returned: not to be in its own frame") {
                checked.push(function);
            }
        }
        assert_eq!(&checked, functions, "{case}\n{plans}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `fixtures/check/local_layouts.cu`'s kernels and the objects their local accesses must be
/// held to: the arrays and structs each declares, found from nvcc's output alone.
const LAYOUTS: &[(&str, &[(u64, u64)])] = &[
    ("two_arrays", &[(0, 32), (32, 64)]),
    ("matrix", &[(0, 128)]),
    ("flat", &[(0, 128)]),
    ("two_members", &[(0, 32), (32, 64)]),
    ("passed", &[(0, 32), (32, 64)]),
    ("bytes", &[(0, 32)]),
    ("unrolled", &[(0, 64), (64, 128)]),
    ("member_ptr", &[(0, 32)]),
    ("row_ptr", &[(0, 128)]),
    ("row_branch", &[(0, 128)]),
    ("member_only", &[(0, 32)]),
    ("end_ptr", &[(0, 32), (32, 64)]),
    ("row_call", &[(0, 128)]),
    ("member_call", &[(0, 32)]),
    ("row_store", &[(0, 128)]),
    ("branch_interior", &[(0, 32), (32, 64)]),
    ("loop_from_middle", &[(0, 64), (64, 128)]),
];

/// The evidence the object bounds rest on: each way of reaching inside a local object that
/// `local_layouts.cu` writes (rows, flat walks, member pointers, bytes, interior pointers
/// passed, stored or made in branches, unrolled loops) is held to the whole object it
/// starts from, and neighbouring arrays each to their own; `--local-bounds frame` holds
/// every one to the frame. The same of a debug build (`-G`, where nvcc forms an object's
/// address anew at each use), whose one difference is where `row_store`'s volatile pointer
/// goes: first in the frame, before `m`.
#[test]
fn local_layouts_are_the_source_objects() {
    let dir = std::env::temp_dir().join(format!("gpusan-check-layouts-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/check/local_layouts.cu");
    for flag in ["-lineinfo", "-G"] {
        let (_, src) = compile_file(&file, ("local_layouts", flag), &dir);
        let plans = |config: &check::CheckConfig| {
            let mut m = gpusan_ptx::parse(&src).unwrap();
            check::run_explained(&mut m, Some(&src), config).unwrap().1
        };
        let objects = objects_of(&plans(&check::CheckConfig::default()));
        for (kernel, want) in LAYOUTS {
            let want: &[(u64, u64)] = if flag == "-G" && *kernel == "row_store" { &[(8, 144)] } else { want };
            let mut got: Vec<(u64, u64)> =
                objects.iter().filter(|(f, _, _)| f == kernel).map(|(_, lo, hi)| (*lo, *hi)).collect();
            got.sort();
            got.dedup();
            assert_eq!(got, want, "{kernel} {flag}");
        }
        let frame = check::CheckConfig { local_bounds: check::LocalBounds::Frame, ..Default::default() };
        let framed = plans(&frame);
        assert!(objects_of(&framed).is_empty() && framed.contains("in local __local_depot"), "{flag}: {framed}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
