//! CUDA graph memory nodes under `gpusan run`, with the fake driver (tests/fake_cuda/:
//! `graph_prog DOOR SCENARIO`). A graph's allocation node gives it memory at a fixed
//! address; each launch allocates it again, and it is freed by a free node (in the graph
//! or another one), by the program outside the graph (`cuMemFree`, `cuMemFreeAsync`), or
//! never. Issue 12: on an H100, graph memory freed outside the graph was "Free of unknown
//! pointer" (in api mode too) once graph memory had been trimmed, and a double free at the
//! next launch's free, where compute-sanitizer reports nothing.
//!
//! Each scenario runs through the driver's exported names (`link`) and the way cudart gets
//! them (`getproc`: `cuGetProcAddress` by base name and version), in api and check mode.
//! Clean ones must finish as natively and report nothing, leaks included; in check mode,
//! the table each launch's kernels read must hold the graph's allocation, live, with its
//! size (what bounds-checks a kernel's accesses). Bugs are reported once, with their kind.

mod fake_driver;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use fake_driver::Outcome;

fn dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| fake_driver::build("graph-memory", &[("graph_prog", "graph_prog.c")]))
}

fn run(mode: &str, door: &str, scenario: &str) -> Outcome {
    let d = dir();
    let prog = d.join("graph_prog");
    let cache = d.join("cache");
    fake_driver::gpusan_run(
        d,
        &["--mode", mode, "--leak-check", "full"],
        &[prog.to_str().unwrap(), door, scenario],
        &[("GPUSAN_CACHE_DIR", cache.as_path())],
    )
}

/// What went wrong with a run that must be silent.
fn not_silent(o: &Outcome, scenario: &str) -> Option<String> {
    let finished = o.code == Some(0) && o.stdout.contains(&format!("{scenario} done rc=0"));
    (!finished || !o.kinds().is_empty())
        .then(|| format!("exit {:?}, reported {:?}\n{}{}", o.code, o.report["summary"]["by_kind"], o.stdout, o.stderr))
}

/// Every scenario through both doors in both modes: each must be silent.
fn all_silent(scenarios: &[&str]) {
    let mut failures = Vec::new();
    for scenario in scenarios {
        for door in ["link", "getproc"] {
            for mode in ["api", "check"] {
                if let Some(why) = not_silent(&run(mode, door, scenario), scenario) {
                    failures.push(format!("{scenario} ({door}, --mode {mode}): {why}"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} runs not silent:\n{}", failures.len(), failures.join("\n"));
}

/// The program frees the graph's memory outside the graph after each of 3 launches, with
/// `cuMemFree` or with `cuMemFreeAsync`: each launch allocates it again.
#[test]
fn graph_memory_freed_outside_the_graph_after_each_launch_is_silent() {
    all_silent(&["free_outside_sync", "free_outside_async"]);
}

/// The same, alternating the two frees, with graph memory trimmed after each (the H100's
/// "Free of unknown pointer"), and with nodes made by `cuGraphAddNode`, which gpusan does
/// not see made.
#[test]
fn graph_memory_freed_outside_and_trimmed_is_silent_whatever_made_the_node() {
    all_silent(&["free_outside_trimmed", "free_outside_generic"]);
}

/// Allocated and freed inside the graph, launched 3 times: with the graph destroyed right
/// after its instantiation (its executable graph lives on), with nodes made by
/// `cuGraphAddNode`, and with graph and executable graph kept to the exit. None is a leak:
/// the graph frees its memory at the end of each launch.
#[test]
fn graph_memory_freed_inside_the_graph_is_silent_and_never_a_leak() {
    all_silent(&["free_inside", "free_inside_generic", "free_inside_kept"]);
}

/// Stream capture: `cuMemAllocAsync` and `cuMemFreeAsync` captured; the allocation freed by
/// the program after each launch instead; the same from a memory pool
/// (`cuMemAllocFromPoolAsync`), whose free must reach the driver at once as any graph
/// memory's (the next launch fails while it is held back).
#[test]
fn captured_graph_memory_is_silent() {
    all_silent(&["captured", "captured_free_after", "captured_pool_free_after"]);
}

/// A free node of another graph frees the allocation: launched in turn, silent; freed once
/// more by the program after the other graph's launch, a double free.
#[test]
fn a_free_node_of_another_graph_frees_graph_memory() {
    all_silent(&["other_graph_frees"]);
    for door in ["link", "getproc"] {
        let o = run("api", door, "other_graph_frees_twice");
        assert_eq!(o.code, Some(0), "{door}: {}{}", o.stdout, o.stderr);
        assert_eq!((o.kinds(), o.count("double_free")), (vec!["double_free".to_string()], 1), "{door}: {:#}", o.report);
    }
}

/// Graph memory freed twice by the program (launched twice, freed after each, trimmed,
/// freed again): one double free, the last, whose free the driver refuses (so gpusan
/// must too); trimming does not turn it into an unknown pointer.
#[test]
fn a_double_free_of_graph_memory_is_reported_once() {
    for door in ["link", "getproc"] {
        for mode in ["api", "check"] {
            let o = run(mode, door, "double_free");
            assert_eq!(o.code, Some(0), "{door} {mode}: {}{}", o.stdout, o.stderr);
            assert_eq!(
                (o.kinds(), o.count("double_free")),
                (vec!["double_free".to_string()], 1),
                "{door} {mode}: {:#}",
                o.report
            );
        }
    }
}

/// At the exit, as for `cudaMalloc` memory: graph memory a launch allocated and nothing
/// freed is a leak (its graph and executable graph destroyed: the driver frees no live
/// graph memory with them); memory of a graph never launched was never allocated.
#[test]
fn graph_memory_is_a_leak_only_when_a_launch_allocated_it_and_nothing_freed_it() {
    for door in ["link", "getproc"] {
        let o = run("api", door, "leak_launched");
        assert_eq!(o.code, Some(0), "{door}: {}{}", o.stdout, o.stderr);
        assert_eq!(o.kinds(), vec!["leak".to_string()], "{door}: {:#}", o.report);
        assert_eq!(o.report["summary"]["leaked_bytes"], 1024, "{door}: {:#}", o.report);
    }
    all_silent(&["leak_unlaunched"]);
}

/// Check mode: a kernel of the graph writing past the end of its allocation, at a launch
/// after the program freed it outside the graph and trimmed graph memory, is reported
/// against that allocation, live, with its size.
#[test]
fn an_overflow_of_graph_memory_is_reported_against_it_in_check_mode() {
    for door in ["link", "getproc"] {
        let o = run("check", door, "overflow");
        assert_eq!(o.code, Some(0), "{door}: {}{}", o.stdout, o.stderr);
        assert_eq!(o.kinds(), vec!["out_of_bounds_write".to_string()], "{door}: {:#}", o.report);
        let nearest = &o.report["errors"][0]["details"]["nearest"]["allocation"];
        assert_eq!(
            (&nearest["kind"], &nearest["size"], &nearest["freed"]),
            (&"graph_node".into(), &1024.into(), &false.into()),
            "{door}: {:#}",
            o.report
        );
    }
}

/// Memory its own graph frees, freed outside the graph too: the driver refuses it (on the
/// H100 at any time, before the first launch too), so it is a double free, the graph's
/// free node the first; whatever made the nodes.
#[test]
fn freeing_outside_the_graph_what_the_graph_frees_itself_is_a_double_free() {
    for scenario in ["freed_inside_and_outside", "freed_inside_and_outside_generic"] {
        for door in ["link", "getproc"] {
            let o = run("api", door, scenario);
            assert_eq!(o.code, Some(0), "{scenario} {door}: {}{}", o.stdout, o.stderr);
            assert_eq!(
                (o.kinds(), o.count("double_free")),
                (vec!["double_free".to_string()], 1),
                "{scenario} {door}: {:#}",
                o.report
            );
        }
    }
}

/// `cuGraphExecUpdate` with a graph of the same shape: from then on the executable graph
/// allocates at the new graph's address (as on the H100, where the old one can no longer be
/// freed). Freed outside after each launch: silent, no leak, and each launch's table holds
/// the new allocation.
#[test]
fn an_updated_executable_graph_allocates_at_the_updating_graph_address() {
    all_silent(&["exec_update"]);
}

/// A launch the driver refuses (another allocation of its graph still unfreed) allocates
/// nothing: memory freed before it and freed again after it is a double free.
#[test]
fn a_refused_launch_allocates_nothing() {
    for door in ["link", "getproc"] {
        let o = run("api", door, "refused_relaunch");
        assert_eq!(o.code, Some(0), "{door}: {}{}", o.stdout, o.stderr);
        assert_eq!((o.kinds(), o.count("double_free")), (vec!["double_free".to_string()], 1), "{door}: {:#}", o.report);
    }
}

/// Graph memory whose node `cuGraphAddNode` made (how cudart 13's `cudaGraphAddNode` makes
/// one) is known from the node's making: a leak of it names where the program made the node
/// (`alloc_graph`), not where it instantiated the graph.
#[test]
fn graph_memory_of_a_generic_node_is_named_where_the_node_was_made() {
    for door in ["link", "getproc"] {
        let o = run("api", door, "leak_launched_generic");
        assert_eq!(o.code, Some(0), "{door}: {}{}", o.stdout, o.stderr);
        assert_eq!(o.kinds(), vec!["leak".to_string()], "{door}: {:#}", o.report);
        let stack = o.report["leaks"][0]["alloc_stack"].to_string();
        assert!(stack.contains("alloc_graph"), "{door}: the leak's stack misses the node's making: {stack}");
    }
}
