//! The tracer linked into a real C program built with gcc's thread-sanitizer
//! instrumentation (`tests/c/small.c`): the trace holds its objects, its pointer stores and
//! loads with their targets, its threads, its read-only region and its frees.

use std::path::{Path, PathBuf};
use std::process::Command;

use gpusan_trace::{Access, Event, Kind, Reader};

/// This crate's static library as this test run built it. `cargo test` leaves it in
/// `target/<profile>/deps` under a hashed name (only `cargo build` copies it up a folder): the
/// newest of those and the copied one.
fn static_library() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    let mut found: Vec<(std::time::SystemTime, PathBuf)> = std::fs::read_dir(deps)
        .unwrap()
        .map(|e| e.unwrap().path())
        .chain([deps.parent().unwrap().join("libgpusan_cputrace.a")])
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.starts_with("libgpusan_cputrace") && name.ends_with(".a")
        })
        .filter_map(|p| Some((std::fs::metadata(&p).ok()?.modified().ok()?, p)))
        .collect();
    found.sort();
    found.pop().map(|(_, p)| p).unwrap_or_else(|| panic!("libgpusan_cputrace.a is not built (in {})", deps.display()))
}

fn build(source: &Path, out: &Path) {
    let lib = static_library();
    let obj = out.with_extension("o");
    let cc = |args: &[&std::ffi::OsStr]| {
        let o = Command::new("gcc").args(args).output().expect("gcc runs (the CPU tracer needs gcc)");
        assert!(o.status.success(), "gcc {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    };
    cc(&[
        "-O1".as_ref(),
        "-pthread".as_ref(),
        "-fsanitize=thread".as_ref(),
        "-c".as_ref(),
        source.as_os_str(),
        "-o".as_ref(),
        obj.as_os_str(),
    ]);
    let mut link: Vec<&std::ffi::OsStr> = vec![obj.as_os_str(), "-o".as_ref(), out.as_os_str(), lib.as_os_str()];
    link.push(
        "-Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=free,--wrap=posix_memalign,--wrap=aligned_alloc"
            .as_ref(),
    );
    for l in ["-lgcc_s", "-lutil", "-lrt", "-lpthread", "-lm", "-ldl", "-lc"] {
        link.push(l.as_ref());
    }
    cc(&link);
}

fn events(path: &Path) -> Vec<Event> {
    let mut r = Reader::new(std::fs::File::open(path).unwrap()).unwrap();
    assert_eq!(r.meta().source, "gpusan cputrace");
    let mut all = Vec::new();
    r.for_each(|c| all.extend_from_slice(&c.events)).unwrap();
    all
}

#[test]
fn a_c_program_traced_shows_its_objects_pointers_threads_and_frees() {
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("small");
    build(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/small.c"), &exe);
    let trace = dir.path().join("small.gstrace");
    let out = Command::new(&exe).env("GPUSAN_CPUTRACE", &trace).output().unwrap();
    assert!(out.status.success());
    // Traced, it computes what it computes natively.
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "66");
    let all = events(&trace);
    let dump = || all.iter().map(|e| format!("{e:?}")).collect::<Vec<_>>().join("\n");

    // The table, four nodes, the read-only array, its region and its reallocation.
    let allocs: Vec<&Event> = all.iter().filter(|e| e.kind == Kind::Alloc && e.epoch == 0).collect();
    let sizes: Vec<u64> = allocs.iter().map(|e| e.size).collect();
    assert_eq!(sizes, [32, 16, 16, 16, 16, 32, 64], "{}", dump());
    let (table, nodes, ro) = (allocs[0], &allocs[1..5], allocs[5]);
    let region: Vec<&Event> = all.iter().filter(|e| e.kind == Kind::Alloc && e.epoch == 1).collect();
    assert_eq!(region.len(), 1);
    assert_eq!((region[0].addr, region[0].size), (ro.addr, 32));

    // Each node's pointer stored into the table: an 8-byte store into the table whose
    // value points at the node's start.
    for (i, n) in nodes.iter().enumerate() {
        assert!(
            all.iter().any(|e| e.kind == Kind::Access
                && e.op.access() == Access::Store
                && e.addr == table.addr + 8 * i as u64
                && e.alloc == table.alloc
                && e.epoch == n.alloc
                && e.count == 0),
            "no pointer store of node {i}:\n{}",
            dump()
        );
    }
    // A pointer into the middle of node 1, stored in node 0's `next`.
    assert!(all.iter().any(|e| e.op.access() == Access::Store
        && e.addr == nodes[0].addr + 8
        && e.epoch == nodes[1].alloc
        && e.count == 8));
    // Each worker loaded the pointers of the two nodes it updates (gcc loads only those):
    // three threads in all.
    let mut threads: Vec<u32> = all.iter().filter(|e| e.kind == Kind::Access).map(|e| e.sm).collect();
    threads.sort_unstable();
    threads.dedup();
    assert_eq!(threads.len(), 3, "{}", dump());
    for w in &threads[1..] {
        let loads = all
            .iter()
            .filter(|e| e.sm == *w && e.op.access() == Access::Load && e.alloc == table.alloc && e.epoch != 0)
            .count();
        assert_eq!(loads, 2, "thread {w}'s pointer loads:\n{}", dump());
    }
    // The workers' reads of the read-only array are marked; the main thread's writes before
    // the mark are not.
    let ro_loads = all.iter().filter(|e| e.alloc == ro.alloc && e.op.access() == Access::Load && e.warp == 1).count();
    assert_eq!(ro_loads, 4, "{}", dump());
    assert!(all.iter().any(|e| e.alloc == ro.alloc && e.op.access() == Access::Store && e.warp == 0));

    // Every object freed (the realloc'ed array's first self too), the region with its object.
    let freed: Vec<u32> = all.iter().filter(|e| e.kind == Kind::Free).map(|e| e.alloc).collect();
    for a in allocs.iter().map(|e| e.alloc).chain([region[0].alloc]) {
        assert!(freed.contains(&a), "{a} not freed:\n{}", dump());
    }
}

/// A forked child is not traced, and does not damage the parent's trace (they share its file):
/// the trace reads to its end and holds the parent's allocation only.
#[test]
fn a_forked_child_leaves_the_parents_trace_whole() {
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("fork");
    build(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/fork.c"), &exe);
    let trace = dir.path().join("fork.gstrace");
    let out = Command::new(&exe).env("GPUSAN_CPUTRACE", &trace).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "0");
    let all = events(&trace);
    let sizes: Vec<u64> = all.iter().filter(|e| e.kind == Kind::Alloc).map(|e| e.size).collect();
    assert_eq!(sizes, [24]);
    assert_eq!(all.iter().filter(|e| e.kind == Kind::Free).count(), 1);
    // The parent's store after the child ended is there.
    assert!(all.iter().any(|e| e.op.access() == Access::Store && e.kind == Kind::Access && e.alloc != 0));
}
