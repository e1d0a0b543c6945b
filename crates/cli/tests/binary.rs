//! The binary route (issue 14) without a GPU: the fake driver reports module loads and
//! launches to the fake Compute Sanitizer library (`fake_cuda/libsanitizer.c`), which logs
//! every patching call and plays the patched kernels' records. Machine code is patched and
//! its kernels listed with route `binary` under `--route auto`; PTX gpusan instruments is
//! not patched; `--route ptx` and a refused patch leave machine code unchecked with the
//! reason; a library without the patching API changes nothing else. A patched kernel run in
//! a graph gets its params through the graph node callback (the fake faults a patched kernel
//! that runs with data nobody set, as the GPU did); one whose params cannot be made runs
//! with null and is listed unchecked; machine code that launches kernels from the device is
//! not patched.

mod fake_driver;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use fake_driver::Outcome;

/// The fake driver and program, and both fake sanitizer libraries (`sanitizer/`, and
/// `old-sanitizer/` without the patching API).
fn dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = fake_driver::build("binary", &[("binary_prog", "binary_prog.c")]);
        for (sub, defines) in [("sanitizer", &[][..]), ("old-sanitizer", &["-DFAKE_NO_PATCHING"][..])] {
            std::fs::create_dir_all(d.join(sub)).unwrap();
            fake_driver::run(
                Command::new("cc")
                    .args(["-shared", "-fPIC"])
                    .args(defines)
                    .arg("-o")
                    .args([d.join(sub).join("libsanitizer-public.so"), fake_driver::sources().join("libsanitizer.c")]),
            );
        }
        d
    })
}

struct Run {
    o: Outcome,
    /// The patching calls gpusan made, one a line.
    log: String,
}

fn run(options: &[&str], scenario: &str, sanitizer: &str, extra: &[(&str, &Path)]) -> Run {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let d = dir();
    let (log, cache, lib) = (d.join(format!("log-{n}")), d.join(format!("cache-{n}")), d.join(sanitizer));
    let lib = lib.join("libsanitizer-public.so");
    let mut env = vec![("GPUSAN_CACHE_DIR", cache.as_path()), ("GPUSAN_SANITIZER_LIB", lib.as_path())];
    env.push(("FAKE_SANITIZER_LOG", log.as_path()));
    env.extend_from_slice(extra);
    let prog = d.join("binary_prog");
    let o = fake_driver::gpusan_run(d, options, &[prog.to_str().unwrap(), scenario], &env);
    assert!(o.stdout.contains(&format!("{scenario} done rc=0")), "{scenario}: {}{}", o.stdout, o.stderr);
    Run { o, log: std::fs::read_to_string(&log).unwrap_or_default() }
}

/// (name, launches, checked_by, unchecked) of each kernel in the report.
fn kernels(o: &Outcome) -> Vec<(String, u64, Option<String>, Option<String>)> {
    let list = o.report["coverage"]["kernels"].as_array().cloned().unwrap_or_default();
    let s = |v: &serde_json::Value| v.as_str().map(str::to_string);
    list.iter()
        .map(|k| (s(&k["name"]).unwrap(), k["launches"].as_u64().unwrap(), s(&k["checked_by"]), s(&k["unchecked"])))
        .collect()
}

fn lines(log: &str, starting: &str) -> usize {
    log.lines().filter(|l| l.starts_with(starting)).count()
}

#[test]
fn machine_code_is_patched_and_its_kernel_checked_by_the_binary_route() {
    let r = run(&["--mode", "check"], "cubin", "sanitizer", &[]);
    let o = &r.o;
    assert_eq!(lines(&r.log, "AddPatches"), 1, "{}", r.log);
    assert_eq!(lines(&r.log, "PatchInstructions module=0x4000 3 gpusan_global_access"), 1, "{}", r.log);
    assert_eq!(lines(&r.log, "PatchModule module=0x4000"), 1, "{}", r.log);
    // The API allows no driver call inside its callbacks: the table and error buffer were
    // made before the launch, the params block with the API's own memory calls.
    assert_eq!(lines(&r.log, "driver call in a callback"), 0, "{}", r.log);
    // Before each launch of the patched kernel, its params block.
    assert_eq!(lines(&r.log, "SetCallbackData function=0x4100 data=set"), 2, "{}", r.log);
    assert_eq!(kernels(o), vec![("mc_overflow".into(), 2, Some("binary".into()), None)], "{:#}", o.report);
    assert!(o.stderr.contains("COVERAGE: checked 1 of 1 kernel (launches: 2 of 2)"), "{}", o.stderr);
    // Each launch's record, drained at its synchronization, named and placed in the SASS.
    assert_eq!(o.count("out_of_bounds_write"), 2, "{:#}", o.report);
    let e = &o.report["errors"][0];
    assert_eq!(e["details"]["kernel"], "mc_overflow", "{e:#}");
    assert_eq!(e["details"]["sass_offset"], 0x70, "{e:#}");
    assert_eq!(e["details"]["thread"], serde_json::json!([3, 0, 0]), "{e:#}");
    assert!(o.stderr.contains("at mc_overflow (SASS +0x70)"), "{}", o.stderr);
    assert!(o.stderr.contains("is 0 bytes past the end of a 1000-byte device allocation"), "{}", o.stderr);
    // Patched machine code is no module left unchecked.
    assert!(o.report.get("unchecked_modules").is_none_or(|u| u.as_object().unwrap().is_empty()), "{:#}", o.report);
    assert!(!o.stderr.contains("UNCHECKED"), "{}", o.stderr);
    // The kernels' accesses to memory gpusan did not see: counted, not judged.
    assert_eq!(o.report["counters"]["binary_untracked_accesses"], 2, "{:#}", o.report["counters"]);
    assert_eq!(o.report["counters"]["binary_patched_kernels"], 1, "{:#}", o.report["counters"]);
}

#[test]
fn ptx_gpusan_instruments_is_not_patched_under_auto() {
    let r = run(&["--mode", "check"], "ptx", "sanitizer", &[]);
    assert_eq!(lines(&r.log, "PatchModule"), 0, "{}", r.log);
    assert_eq!(lines(&r.log, "SetCallbackData"), 0, "{}", r.log);
    assert_eq!(kernels(&r.o), vec![("zeta".into(), 1, Some("PTX at load".into()), None)], "{:#}", r.o.report);
}

#[test]
fn route_binary_patches_every_module_and_instruments_no_ptx() {
    let r = run(&["--mode", "check", "--route", "binary"], "ptx", "sanitizer", &[]);
    assert_eq!(lines(&r.log, "PatchModule module=0x4000"), 1, "{}", r.log);
    assert_eq!(kernels(&r.o), vec![("zeta".into(), 1, Some("binary".into()), None)], "{:#}", r.o.report);
}

#[test]
fn route_ptx_and_api_mode_leave_machine_code_unchecked_with_the_reason() {
    let r = run(&["--mode", "check", "--route", "ptx"], "cubin", "sanitizer", &[]);
    assert_eq!(r.log, "", "nothing patched");
    let why = Some("machine code only (cubin)".to_string());
    assert_eq!(kernels(&r.o), vec![("mc_overflow".into(), 2, None, why)], "{:#}", r.o.report);
    assert!(r.o.kinds().is_empty(), "{:#}", r.o.report);

    let r = run(&["--mode", "api"], "cubin", "sanitizer", &[]);
    assert_eq!(r.log, "", "api mode patches nothing");
    assert!(r.o.kinds().is_empty(), "{:#}", r.o.report);
}

#[test]
fn a_module_the_api_refuses_to_patch_stays_unchecked_with_the_reason() {
    let fail = [("FAKE_SANITIZER_PATCH_FAIL", Path::new("1"))];
    let r = run(&["--mode", "check"], "cubin", "sanitizer", &fail);
    assert_eq!(lines(&r.log, "SetCallbackData"), 0, "{}", r.log);
    let why = Some("binary route: sanitizerPatchModule failed (error 14)".to_string());
    assert_eq!(kernels(&r.o), vec![("mc_overflow".into(), 2, None, why)], "{:#}", r.o.report);
    assert!(r.o.kinds().is_empty(), "{:#}", r.o.report);
    assert_eq!(r.o.code, Some(0));
}

#[test]
fn a_sanitizer_library_without_the_patching_api_leaves_machine_code_unchecked() {
    let r = run(&["--mode", "check"], "cubin", "old-sanitizer", &[]);
    assert_eq!(r.o.code, Some(0), "{}", r.o.stderr);
    let why = Some("binary route: the Compute Sanitizer library has no patching API".to_string());
    assert_eq!(kernels(&r.o), vec![("mc_overflow".into(), 2, None, why)], "{:#}", r.o.report);
    // The rest of the Sanitizer API's work goes on.
    assert!(!r.o.stderr.contains("runtime API errors were not observed"), "{}", r.o.stderr);
}

/// Findings of `mc_overflow`'s launches: each writes 4 bytes at the end of its allocation.
fn overflows(o: &Outcome) -> u64 {
    o.count("out_of_bounds_write")
}

#[test]
fn a_patched_kernel_launched_only_in_a_graph_gets_its_params_through_the_node_callback() {
    let r = run(&["--mode", "check"], "graph", "sanitizer", &[]);
    let o = &r.o;
    // No launch callback reaches a graph's node: its launch's own data is set there.
    assert_eq!(lines(&r.log, "SetLaunchCallbackData function=0x4100 data=set"), 1, "{}", r.log);
    assert_eq!(lines(&r.log, "driver call in a callback"), 0, "{}", r.log);
    assert_eq!(overflows(o), 1, "{:#}", o.report);
    assert_eq!(o.report["errors"][0]["details"]["kernel"], "mc_overflow", "{:#}", o.report);
    assert_eq!(kernels(o), vec![("mc_overflow".into(), 1, Some("binary".into()), None)], "{:#}", o.report);
    assert_eq!(o.report["counters"]["binary_patched_kernels"], 1, "{:#}", o.report["counters"]);
    assert!(!o.stderr.contains("GPU fault"), "{}", o.stderr);
}

#[test]
fn a_graph_uploaded_before_its_launch_gives_its_patched_kernel_params_at_both() {
    let r = run(&["--mode", "check"], "graph_upload", "sanitizer", &[]);
    // The block is made at the upload, complete before the graph runs on any stream.
    assert_eq!(lines(&r.log, "SetLaunchCallbackData function=0x4100 data=set"), 2, "{}", r.log);
    assert_eq!(lines(&r.log, "StreamSynchronize"), 1, "{}", r.log);
    assert_eq!(lines(&r.log, "driver call in a callback"), 0, "{}", r.log);
    assert_eq!(overflows(&r.o), 1, "{:#}", r.o.report);
    assert_eq!(r.o.report["counters"]["binary_patched_kernels"], 1, "{:#}", r.o.report["counters"]);
}

#[test]
fn a_patched_kernel_launched_directly_and_in_a_graph_is_checked_at_both() {
    let r = run(&["--mode", "check"], "direct_and_graph", "sanitizer", &[]);
    let o = &r.o;
    assert_eq!(lines(&r.log, "SetCallbackData function=0x4100 data=set"), 1, "{}", r.log);
    assert_eq!(lines(&r.log, "SetLaunchCallbackData function=0x4100 data=set"), 1, "{}", r.log);
    assert_eq!(overflows(o), 2, "{:#}", o.report);
    assert_eq!(kernels(o), vec![("mc_overflow".into(), 2, Some("binary".into()), None)], "{:#}", o.report);
    // One block for the kernel in its context, whichever launch made it.
    assert_eq!(o.report["counters"]["binary_patched_kernels"], 1, "{:#}", o.report["counters"]);
}

#[test]
fn a_patched_kernel_whose_params_cannot_be_made_runs_with_null_and_is_reported_unchecked() {
    let fail = [("FAKE_SANITIZER_ALLOC_FAIL", Path::new("1"))];
    let r = run(&["--mode", "check"], "direct_and_graph", "sanitizer", &fail);
    let o = &r.o;
    // Never the API's own: null, with which the patches check nothing.
    assert_eq!(lines(&r.log, "SetCallbackData function=0x4100 data=null"), 1, "{}", r.log);
    assert_eq!(lines(&r.log, "SetLaunchCallbackData function=0x4100 data=null"), 1, "{}", r.log);
    assert!(!o.stderr.contains("GPU fault"), "{}", o.stderr);
    assert!(o.kinds().is_empty(), "{:#}", o.report);
    let why = "binary route: its params block could not be made for some of its launches (they ran unchecked)";
    assert_eq!(kernels(o), vec![("mc_overflow".into(), 2, None, Some(why.into()))], "{:#}", o.report);
}

#[test]
fn machine_code_that_launches_kernels_from_the_device_is_left_unpatched_with_the_reason() {
    let r = run(&["--mode", "check"], "cdp", "sanitizer", &[]);
    // Its device-side launches would reach no callback: none of its kernels is patched.
    assert_eq!(lines(&r.log, "PatchModule"), 0, "{}", r.log);
    assert_eq!(lines(&r.log, "SetCallbackData"), 0, "{}", r.log);
    let why = "binary route: launches kernels from the device (dynamic parallelism), which no callback lets gpusan give their params";
    assert_eq!(kernels(&r.o), vec![("mc_overflow".into(), 1, None, Some(why.into()))], "{:#}", r.o.report);
    assert!(r.o.kinds().is_empty(), "{:#}", r.o.report);
}

/// The route's fixed costs are in the report, for `bench/binary-speed.sh`: the time spent in
/// the API's patching calls and in patched kernels' first launches (the fake's are quick,
/// so only their presence is held).
#[test]
fn the_route_reports_the_time_its_patching_and_first_launches_took() {
    let r = run(&["--mode", "check"], "cubin", "sanitizer", &[]);
    let counters = &r.o.report["counters"];
    for name in ["binary_patch_us", "binary_first_launch_us"] {
        assert!(counters[name].is_u64(), "{name}: {counters:#}");
    }
}

// ---- red zones and the other access kinds ------------------------------------------------

fn stdout_line<'a>(o: &'a Outcome, starting: &str) -> &'a str {
    o.stdout.lines().find(|l| l.starts_with(starting)).unwrap_or_else(|| panic!("no `{starting}`: {}", o.stdout))
}

#[test]
fn device_allocations_get_a_red_zone_and_are_registered_at_the_size_asked() {
    let r = run(&["--mode", "check"], "redzone", "sanitizer", &[]);
    // The driver is asked for the red zone too…
    assert_eq!(stdout_line(&r.o, "asked"), "asked a=1256 b=1256", "{}", r.o.stdout);
    // …the table entry a patched kernel reads has the size asked and records the red zone…
    assert_eq!(lines(&r.log, "entry size=1000 redzone=256"), 1, "{}", r.log);
    // …what the red zones cost counts as free, as without gpusan, and nothing is reported:
    // the driver rounds to 512 bytes, so 1256 takes 1536 where 1000 takes 1024, 512 more
    // each (the fake's own count is byte-exact, so here gpusan adds back more than it took).
    assert_eq!(stdout_line(&r.o, "meminfo"), "meminfo extra=1024", "{}", r.o.stdout);
    // The driver's range of the allocation is as long as asked, too.
    assert_eq!(stdout_line(&r.o, "range"), "range base=1 size=1000", "{}", r.o.stdout);
    assert!(r.o.kinds().is_empty(), "{:#}", r.o.report);
}

#[test]
fn red_zones_are_whole_units_of_the_size_asked_for() {
    let r = run(&["--mode", "check", "--redzone", "1000"], "redzone", "sanitizer", &[]);
    assert_eq!(stdout_line(&r.o, "asked"), "asked a=2024 b=2024", "{}", r.o.stdout);
    assert_eq!(lines(&r.log, "entry size=1000 redzone=1024"), 1, "{}", r.log);
}

#[test]
fn no_red_zone_where_no_machine_code_is_patched_or_with_redzone_0() {
    for options in
        [&["--mode", "check", "--route", "ptx"][..], &["--mode", "check", "--redzone", "0"], &["--mode", "api"]]
    {
        let r = run(options, "redzone", "sanitizer", &[]);
        assert_eq!(stdout_line(&r.o, "asked"), "asked a=1000 b=1000", "{options:?}: {}", r.o.stdout);
        assert_eq!(stdout_line(&r.o, "meminfo"), "meminfo extra=0", "{options:?}: {}", r.o.stdout);
        assert_eq!(stdout_line(&r.o, "range"), "range base=1 size=1000", "{options:?}: {}", r.o.stdout);
    }
    // Without the patching API no kernel is patched: nothing to pad for.
    let r = run(&["--mode", "check"], "redzone", "old-sanitizer", &[]);
    assert_eq!(stdout_line(&r.o, "asked"), "asked a=1000 b=1000", "{}", r.o.stdout);
}

#[test]
fn an_allocation_refused_with_its_red_zone_is_made_without_it() {
    let limit = [("FAKE_CUDA_ALLOC_LIMIT", Path::new("1100"))];
    let r = run(&["--mode", "check"], "redzone", "sanitizer", &limit);
    assert_eq!(stdout_line(&r.o, "asked"), "asked a=1000 b=1000", "{}", r.o.stdout);
    assert_eq!(lines(&r.log, "entry size=1000 redzone=0"), 1, "{}", r.log);
    assert!(r.o.kinds().is_empty(), "{:#}", r.o.report);
}

/// `PatchInstructions` lines of `module=0x4000` for instruction `id` with `patch`.
fn patched_with(log: &str, id: u32, patch: &str) -> usize {
    lines(log, &format!("PatchInstructions module=0x4000 {id} {patch}"))
}

#[test]
fn shared_memory_async_and_bulk_copies_are_patched_with_their_functions() {
    let r = run(&["--mode", "check", "--binary-kinds", "all"], "cubin", "sanitizer", &[]);
    for (id, patch) in [
        (4, "gpusan_shared_access"),
        (14, "gpusan_memcpy_async"),
        (30, "gpusan_bulk_global_to_shared"),
        (35, "gpusan_bulk_shared_to_global"),
        (37, "gpusan_bulk_reduction_to_global"),
    ] {
        assert_eq!(patched_with(&r.log, id, patch), 1, "{id} {patch}: {}", r.log);
    }
    // No local memory (nothing sound to say), and no heap where the code calls no malloc.
    assert_eq!(lines(&r.log, "PatchInstructions module=0x4000 5 "), 0, "{}", r.log);
    for id in [11, 12, 18] {
        assert_eq!(lines(&r.log, &format!("PatchInstructions module=0x4000 {id} ")), 0, "{}", r.log);
    }
    // The measurement patch judges nothing, of any kind.
    let empty = [("GPUSAN_BINARY_PATCH", Path::new("empty"))];
    let r = run(&["--mode", "check", "--binary-kinds", "all"], "cubin", "sanitizer", &empty);
    assert_eq!(lines(&r.log, "PatchInstructions"), 1, "{}", r.log);
}

#[test]
fn device_heap_calls_are_patched_where_machine_code_names_malloc_and_findings_decoded() {
    let r = run(&["--mode", "check", "--binary-kinds", "all"], "kinds", "sanitizer", &[]);
    let o = &r.o;
    assert_eq!(patched_with(&r.log, 11, "gpusan_device_malloc"), 1, "{}", r.log);
    assert_eq!(patched_with(&r.log, 18, "gpusan_device_malloc"), 1, "{}", r.log);
    assert_eq!(patched_with(&r.log, 12, "gpusan_device_free"), 1, "{}", r.log);
    assert_eq!(lines(&r.log, "driver call in a callback"), 0, "{}", r.log);
    // Its kernel got the context's heap table in its params block, zeroed before any other
    // stream's launch can use it.
    assert_eq!(lines(&r.log, "heap=1"), 1, "{}", r.log);
    assert_eq!(lines(&r.log, "StreamSynchronize"), 1, "{}", r.log);
    assert_eq!(o.count("shared_out_of_bounds"), 1, "{:#}", o.report);
    assert_eq!(o.count("double_free"), 1, "{:#}", o.report);
    let errors = o.report["errors"].as_array().unwrap();
    let shared = errors.iter().find(|e| e["kind"] == "shared_out_of_bounds").unwrap();
    assert_eq!(shared["details"]["kernel"], "mc_shared", "{shared:#}");
    assert_eq!(shared["details"]["space"], "shared", "{shared:#}");
    assert_eq!(shared["details"]["sass_offset"], 0x90, "{shared:#}");
    let double = errors.iter().find(|e| e["kind"] == "double_free").unwrap();
    assert_eq!(double["details"]["kernel"], "mc_double_free", "{double:#}");
    assert!(double["details"]["heap_block"].is_object(), "{double:#}");
    // A window offset names no host allocation.
    assert!(shared["details"].get("nearest").is_none_or(|n| n.is_null()), "{shared:#}");
    assert!(!o.stderr.contains("before a 1000-byte device allocation"), "{}", o.stderr);
}

#[test]
fn binary_kinds_chooses_which_kinds_beyond_global_memory_are_patched() {
    let r = run(&["--mode", "check", "--binary-kinds", "none"], "kinds", "sanitizer", &[]);
    assert_eq!(lines(&r.log, "PatchInstructions"), 1, "global accesses only: {}", r.log);
    assert_eq!(lines(&r.log, "heap=0"), 1, "no heap table where its calls are not patched: {}", r.log);
    let r = run(&["--mode", "check", "--binary-kinds", "shared,heap"], "kinds", "sanitizer", &[]);
    assert_eq!(lines(&r.log, "PatchInstructions"), 5, "{}", r.log);
    let want = [
        (3, "gpusan_global_access"),
        (4, "gpusan_shared_access"),
        (11, "gpusan_device_malloc"),
        (18, "gpusan_device_malloc"),
        (12, "gpusan_device_free"),
    ];
    for (id, patch) in want {
        assert_eq!(patched_with(&r.log, id, patch), 1, "{id} {patch}: {}", r.log);
    }
    assert_eq!(lines(&r.log, "heap=1"), 1, "{}", r.log);
}

#[test]
fn by_default_only_device_heap_calls_are_patched_beyond_global_memory() {
    let r = run(&["--mode", "check"], "kinds", "sanitizer", &[]);
    assert_eq!(patched_with(&r.log, 3, "gpusan_global_access"), 1, "{}", r.log);
    assert_eq!(patched_with(&r.log, 12, "gpusan_device_free"), 1, "{}", r.log);
    for patch in ["gpusan_shared_access", "gpusan_memcpy_async", "gpusan_bulk_global_to_shared"] {
        assert_eq!(lines(&r.log, patch), 0, "{patch} is opt-in: {}", r.log);
    }
    assert_eq!(r.o.count("double_free"), 1, "{:#}", r.o.report);
}

#[test]
fn an_unknown_binary_kind_is_refused() {
    let d = dir();
    let prog = d.join("binary_prog");
    let o = fake_driver::gpusan_run(
        d,
        &["--mode", "check", "--binary-kinds", "shared,local"],
        &[prog.to_str().unwrap(), "cubin"],
        &[],
    );
    assert_ne!(o.code, Some(0), "{}", o.stderr);
    assert!(
        o.stderr.contains("--binary-kinds: `shared,local` is not all, none or a list of shared, async, bulk, heap"),
        "{}",
        o.stderr
    );
}

/// A patched kernel's first launch runs inside the driver, which holds its own lock then;
/// another thread may hold gpusan's table lock across an upload whose copy waits for that
/// driver lock (the H100 deadlocked so: PyTorch threads, check mode, pool blocks changing
/// the table before every launch). The fake driver plays that lock and forces the meeting:
/// the first launch makes its params block without the table lock, the program finishes,
/// and both launches are checked (their overflow found twice). `--timeout` ends a hung run.
#[test]
fn a_first_launch_inside_the_driver_never_waits_for_an_upload_that_waits_for_the_driver() {
    let r = run(&["--mode", "check", "--timeout", "30"], "contended", "sanitizer", &[]);
    let mc = kernels(&r.o).into_iter().find(|k| k.0 == "mc_overflow").expect("mc_overflow listed");
    assert_eq!((mc.1, mc.2.as_deref(), mc.3.as_deref()), (2, Some("binary"), None), "{:#}", r.o.report["coverage"]);
    assert_eq!(overflows(&r.o), 2, "{:#}", r.o.report["summary"]);
}

/// `gpusan trace`'s device side: a traced run patches global, shared and local accesses
/// with the tracing patches (which judge as the others do and also record), gives the
/// kernel's params block a trace buffer, and drains it after the launch; the trace reads
/// back with the launch in it.
/// `gpusan trace --sample-launches 1:0`: the kernel's first launch is traced, its second
/// gets the twin params block with no trace buffer (checked, not recorded, not waited for),
/// and only the first is in the trace.
#[test]
fn a_sampled_trace_records_only_the_launches_the_sample_takes() {
    let d = dir();
    let trace = d.join(format!("sampled-{}.gstrace", std::process::id()));
    let opts = ["--mode", "check", "--route", "binary", "--trace", trace.to_str().unwrap(), "--trace-sample", "1:0"];
    let r = run(&opts, "cubin", "sanitizer", &[]);
    assert_eq!(lines(&r.log, "SetCallbackData function=0x4100 data=set traced"), 1, "{}", r.log);
    assert_eq!(lines(&r.log, "SetCallbackData function=0x4100 data=set"), 2, "{}", r.log);
    let notes = r.o.report["notes"].as_array().unwrap();
    assert!(notes.iter().any(|n| n.as_str().unwrap().contains("1 traced, 1 left out")), "{notes:?}");
    let mut reader = gpusan_trace::Reader::new(std::fs::File::open(&trace).unwrap()).unwrap();
    assert_eq!(reader.meta().sample_launches, "1:0");
    let mut chunk = gpusan_trace::Chunk::default();
    let mut begun = 0;
    while reader.next_chunk(&mut chunk).unwrap() {
        begun += chunk.events.iter().filter(|e| e.kind == gpusan_trace::Kind::KernelBegin).count();
    }
    assert_eq!(begun, 1, "only the launch taken");
    let _ = std::fs::remove_file(&trace);
}

#[test]
fn a_traced_run_patches_with_the_tracing_patches() {
    let d = dir();
    let trace = d.join(format!("traced-{}.gstrace", std::process::id()));
    let r =
        run(&["--mode", "check", "--route", "binary", "--trace", trace.to_str().unwrap()], "cubin", "sanitizer", &[]);
    for line in [
        "PatchInstructions module=0x4000 3 gpusan_trace_global",
        "PatchInstructions module=0x4000 4 gpusan_trace_shared",
        "PatchInstructions module=0x4000 5 gpusan_trace_local",
    ] {
        assert_eq!(lines(&r.log, line), 1, "{line}\n{}", r.log);
    }
    assert_eq!(lines(&r.log, "PatchInstructions module=0x4000 4 gpusan_shared_access"), 0, "{}", r.log);
    assert_eq!(lines(&r.log, "PatchInstructions module=0x4000 3 gpusan_global_access"), 0, "{}", r.log);
    // The kernel is still checked, by the tracing patch.
    assert!(kernels(&r.o).iter().any(|k| k.2.as_deref() == Some("binary")), "{:?}", kernels(&r.o));
    let out = Command::new(env!("CARGO_BIN_EXE_gpusan")).args(["sim", "characterize"]).arg(&trace).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let c: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(!c["kernels"].as_array().unwrap().is_empty(), "{c}");
    let _ = std::fs::remove_file(&trace);
}
