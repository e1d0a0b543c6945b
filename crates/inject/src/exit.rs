//! The top of the crate: what runs when the library loads and when the process exits. At
//! exit the findings (and leaks, when asked) are written where `gpusan run` reads them,
//! with the counters the routes kept, and the probe's record when `$GPUSAN_PROBE_OUT` asks
//! for one. `fork` is watched: a child starts with state of its own (and forwards only,
//! when CUDA was initialised before the fork: `driver::fork`).

use gpusan_abi::{env, Mode};
use gpusan_runtime::registry;
use gpusan_runtime::report::{Collector, CollectorConfig, Document};
use gpusan_runtime::{checks, per_process};

use crate::driver::{boundary, fork};
use crate::routes::{mirror, substitute};
use crate::state::{quietly, State};
use crate::{doors, families, probe, state};

/// Writes the final document: findings, and leaks when `--leak-check full`. It is written
/// even when gpusan failed inside the program, with that said: each part that could fail
/// again is contained, and after an internal error what rests on bookkeeping since (the
/// kernels' last records, judged against tables no longer kept up, and the leak check,
/// against a registry that missed the frees) is left out rather than invent findings.
fn finish(st: &State) {
    let Some(path) = &st.options.report else { return };
    // Kernels may have written errors after the last synchronization (fails harmlessly
    // once CUDA has torn its contexts down). Not in a child that only forwards, nor after
    // an internal error.
    quietly(mirror::drain_at_exit);
    // Canary mode's final scan, if the guard's own exit handler has not run it.
    crate::routes::canary::at_exit();
    let collector = st.take_findings();
    let (leaks, faulted_left_out) = if st.options.leak_check {
        // After the drain: records that name graph memory were decoded with it known.
        quietly(|| {
            families::graphs::before_leak_check();
            let config = checks::LeakConfig { faulted_contexts: crate::routes::faults::faulted_contexts() };
            checks::leak_summary(&st.registry, &config)
        })
        .unwrap_or_default()
    } else {
        (Vec::new(), 0)
    };
    let mode = st.options.mode.name();
    // A site's frames come from the program's debug information, read by a third party's
    // parser: a failure there costs that site's frames, not the findings.
    let symbolize = |site| {
        let frames = || {
            boundary::test_panic("symbolize");
            registry::symbolize(site)
        };
        boundary::contain("exit", frames, Vec::new)
    };
    let mut doc = boundary::contain(
        "exit",
        || collector.finish(mode, leaks, symbolize),
        || Collector::new(CollectorConfig::default()).finish(mode, Vec::new(), |_| Vec::new()),
    );
    boundary::enter("exit", || more(st, &mut doc));
    let process = gpusan_runtime::report::Process::this();
    for e in &mut doc.errors {
        e.process = Some(process.clone());
    }
    if faulted_left_out > 0 {
        doc.notes.push(format!(
            "leak check: {faulted_left_out} allocation(s) of a context where a kernel faulted are not counted as \
             leaks (after the fault every call there fails, the program's frees included)"
        ));
    }
    if let Some(note) = boundary::internal_error() {
        doc.notes.push(note);
    }
    state::write_no_follow(path, doc.to_json().as_bytes());
}

/// The document's notes, counters and unchecked modules.
fn more(st: &State, doc: &mut Document) {
    boundary::test_panic("exit");
    // `gpusan run` named the sanitizer library, but this process (which used CUDA) never
    // got the runtime-API callbacks: say so rather than pass for clean.
    let asked = std::env::var_os(env::SANITIZER_LIB).is_some_and(|v| !v.is_empty())
        && std::env::var_os("CUDA_INJECTION64_PATH").is_some_and(|v| !v.is_empty());
    if fork::forward_only() {
        // One wording for every such child, so the merged report says it once.
        doc.notes.push(
            "a process forked after CUDA was initialised called the driver: CUDA cannot be used in such a \
             child (its calls fail), so they were passed on unchecked"
                .into(),
        );
    } else if asked && !doors::sanitizer::runtime_api_observed() && !families::call_counts().is_empty() {
        doc.notes.push("runtime API errors were not observed (the Compute Sanitizer API did not start)".into());
    }
    if doors::sanitizer::runtime_api_observed() && doors::cupti::switched_on() {
        doc.notes.push(
            "a CUDA profiler's library (CUPTI: torch.profiler, Nsight) was loaded: it may record no kernels while \
             gpusan's Compute Sanitizer API is on (torch.profiler counted none under `gpusan run --mode check` on \
             the H100); profile without gpusan"
                .into(),
        );
    }
    // Triton assembles its kernels itself, with `$TRITON_PTXAS_PATH`: `gpusan run --mode check`
    // points it at the ptxas stand-in when it finds NVIDIA's ptxas to hand on to, and
    // leaves it unset when not. Said only by a process that loaded Triton.
    if st.options.mode == Mode::Check && std::env::var_os("TRITON_PTXAS_PATH").is_none() && mapped("/libtriton") {
        doc.notes
            .push(format!("Triton kernels were not checked: NVIDIA's ptxas was not found (set {})", env::REAL_PTXAS));
    }
    if let Some(note) = families::ipc::unregistered_note() {
        doc.notes.push(note);
    }
    if let Some(note) = families::memory::release_failures() {
        doc.notes.push(note);
    }
    if let Some(note) = gpusan_runtime::cache::refused() {
        doc.notes.push(note.into());
    }
    let (table_bytes, table_moves) = mirror::table_memory();
    if table_bytes > 0 {
        doc.counters.insert("device_table_bytes".into(), table_bytes);
        doc.counters.insert("device_table_moves".into(), table_moves);
    }
    // Per-tensor cost of pool blocks on the device (issue 15: at most 32 bytes a tensor).
    let peak = mirror::table_peak();
    if let Some(per_block) = peak.bytes_per_block() {
        doc.counters.insert("device_table_peak_entries".into(), peak.entries);
        doc.counters.insert("device_table_peak_allocations".into(), peak.allocations);
        doc.counters.insert("device_table_peak_pool_blocks".into(), peak.blocks);
        doc.counters.insert("device_table_bytes_per_pool_block".into(), per_block);
    }
    for (name, n) in crate::routes::binary::counters() {
        doc.counters.insert(name.into(), n);
    }
    for (name, n) in crate::routes::canary::counters() {
        doc.counters.insert(name.into(), n);
    }
    for (name, n) in crate::routes::canary_diag::counters() {
        doc.counters.insert(name, n);
    }
    doc.canary = quietly(crate::routes::canary::coverage).flatten();
    if doc.canary.is_some() {
        doc.notes.push(crate::routes::canary::NOT_GUARDED.into());
    }
    doc.notes.extend(crate::routes::canary::failure_note());
    doc.notes.extend(quietly(crate::routes::trace::notes).unwrap_or_default());
    doc.notes.extend(quietly(crate::routes::canary::heap_notes).unwrap_or_default());
    if crate::driver::remote::active() {
        doc.notes.push(
            "fence: a tenant of `gpusan serve`: its allocations, copies, modules and launches went to the manager, \
             which fenced its kernels into its partition"
                .into(),
        );
        doc.notes.extend(quietly(crate::driver::remote::notes).unwrap_or_default());
    }
    let (judged, not_judged) = families::tensormaps::counts();
    if judged + not_judged > 0 {
        doc.counters.insert("tensor_maps_judged".into(), judged);
        doc.counters.insert("tensor_maps_not_judged".into(), not_judged);
    }
    let lost = mirror::not_stored();
    if lost > 0 {
        doc.counters.insert("device_errors_not_stored".into(), lost);
    }
    if mirror::buffer_filled() {
        doc.notes.push(format!(
            "the device error buffer filled ({} records): kernels stop counting errors there, so those after \
             were neither stored nor counted",
            gpusan_abi::record::ERROR_CAPACITY
        ));
    }
    if st.options.mode == Mode::Check && st.options.check_counting.is_on() {
        // A last read, as for `count` below.
        quietly(substitute::read_counters);
        doc.check_counts = Some(substitute::with(|m| m.check_counts()));
    }
    if st.options.mode == Mode::Count {
        // A last read, in case kernels ran after the last synchronization; fails
        // harmlessly once CUDA has torn its contexts down.
        quietly(substitute::read_counters);
        substitute::with(|m| {
            doc.counters.insert("executed_memory_instructions".into(), m.counts.values().sum());
            doc.counters.insert("modules_instrumented".into(), m.substituted);
            doc.counters.insert("modules_from_cache".into(), m.cache_hits);
        });
    }
    if st.options.mode.reports_kernel_coverage() {
        doc.coverage = quietly(crate::routes::coverage::coverage).unwrap_or_default();
    }
    // Every mode that instruments says which modules it could not: a `check` run that
    // passed over a machine-code-only module must not read as if that module was clean.
    if st.options.mode.instruments_kernels() {
        doc.unchecked_modules = substitute::with(|m| m.unchecked.clone());
        // Machine code the binary route patched was loaded unchanged, and is checked.
        for why in quietly(crate::routes::coverage::patched_load_reasons).unwrap_or_default() {
            if let Some(n) = doc.unchecked_modules.get_mut(&why) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    doc.unchecked_modules.remove(&why);
                }
            }
        }
    }
}

/// Whether the process mapped a file whose path has `part` (`/libtriton`: Triton).
fn mapped(part: &str) -> bool {
    std::fs::read_to_string("/proc/self/maps").is_ok_and(|maps| maps.contains(part))
}

// `fork`: the parent's threads may hold gpusan's locks at that moment, and in the child
// they never will be released. The child leaves all its parent's state behind instead
// (`per_process`), deciding first whether it can use CUDA at all (`driver::fork`); only
// work on third-party state that cannot be left behind (the symbolizer's) is waited for.
extern "C" fn before_fork() {
    boundary::enter("fork", per_process::before_fork);
}

extern "C" fn after_fork_in_parent() {
    boundary::enter("fork", per_process::after_fork_in_parent);
}

extern "C" fn after_fork_in_child() {
    fork::in_child();
    boundary::enter("fork", per_process::after_fork_in_child);
}

extern "C" fn at_exit() {
    if fork::not_targeted() {
        return;
    }
    boundary::enter("exit", || {
        // A process whose driver calls never needed the state (`cuInit` alone) used CUDA
        // all the same: its report says it was seen.
        // So did one where gpusan failed before any stand-in ran: that must be said.
        let used = || !families::call_counts().is_empty() || boundary::stopped();
        if let Some(s) = state::existing().or_else(|| used().then(state::state)) {
            finish(s);
        }
    });
}

extern "C" fn on_load() {
    boundary::enter("library load", || {
        fork::at_load();
        boundary::silence_panics();
        boundary::read_test_panic();
        crate::routes::built::separate_program_caches();
        crate::driver::fault::set_handler(crate::routes::faults::seen);
        crate::state::observe_registries_with(crate::routes::trace::observer);
    });
    // Registered before main, so it runs after the handlers CUDA registers later
    // (atexit runs in reverse order): the program's frees have all been seen by then.
    unsafe {
        libc::atexit(at_exit);
        libc::pthread_atfork(Some(before_fork), Some(after_fork_in_parent), Some(after_fork_in_child));
    }
}

#[used]
#[link_section = ".init_array"]
static ON_LOAD: extern "C" fn() = on_load;

/// The probe's record, at exit (registered from the library constructor).
extern "C" fn write_probe_at_exit() {
    boundary::enter("exit", || {
        let Some(path) = std::env::var_os(env::PROBE_OUT) else { return };
        let calls = families::call_counts();
        if calls.is_empty()
            && probe::with(|s| {
                s.resolved.is_empty() && s.callbacks.is_empty() && s.notes.is_empty() && s.export_tables.is_empty()
            })
        {
            return; // a process that never touched CUDA (shells, compilers the program starts)
        }
        let doc = probe::with(|s| {
            serde_json::json!({
                "pid": std::process::id(),
                "exe": std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_default(),
                "resolved": s.resolved.iter().map(|((door, sym), n)| serde_json::json!({"door": door, "symbol": sym, "count": n})).collect::<Vec<_>>(),
                "wrapper_calls": calls,
                "sanitizer_callbacks": s.callbacks.iter().map(|((d, c), n)| serde_json::json!({"domain": d, "cbid": c, "count": n})).collect::<Vec<_>>(),
                "launched": s.launched,
                "module_cubin_sizes": s.modules,
                "device_allocs": s.device_allocs,
                "device_alloc_bytes": s.device_alloc_bytes,
                "notes": s.notes,
                "export_tables": s.export_tables,
            })
        });
        // One file per process: PyTorch and Triton start helper processes.
        let path = std::path::PathBuf::from(path).join(format!("probe-{}.json", std::process::id()));
        let _ = std::fs::write(path, serde_json::to_vec_pretty(&doc).unwrap_or_default());
    });
}

extern "C" fn on_load_probe() {
    boundary::enter("library load", || unsafe {
        libc::atexit(write_probe_at_exit);
    });
}

#[used]
#[link_section = ".init_array"]
static ON_LOAD_PROBE: extern "C" fn() = on_load_probe;
