//! The runtime's state inside the program: the allocation registry, the findings, and the
//! options `gpusan run` passed through the environment. Created on first use; at exit the
//! findings (and leaks, when asked) are written where `gpusan run` reads them.

use std::io::Write;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

use gpusan_runtime::checks::{self, Finding};
use gpusan_runtime::registry::{self, Config as RegistryConfig, Registry, SiteId};
use gpusan_runtime::report::{Collector, CollectorConfig, Report};

/// Options, from `GPUSAN_*` variables set by `gpusan run`.
pub struct Options {
    pub mode: String,
    pub leak_check: bool,
    /// `GPUSAN_CHECK_REACTION`: what checked kernels do at an error.
    pub check_reaction: gpusan_passes::check::Reaction,
    /// `GPUSAN_CHECK_COUNT=1`: checked kernels also count their checks (a measurement
    /// build, `check/counting.rs`); the sums go into the report's `check_counts`.
    pub check_counting: gpusan_passes::check::Counting,
    /// Where this process writes its findings: `report-<pid>.json` (final, at exit) and
    /// `report-<pid>.json.events` (each new finding at once, so a crash loses nothing) in
    /// the folder `gpusan run` names. One pair per process: programs start others.
    pub report: Option<PathBuf>,
    pub registry: RegistryConfig,
}

impl Options {
    fn from_env() -> Options {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let mut registry = RegistryConfig::default();
        if let Some(b) = var("GPUSAN_QUARANTINE_BYTES").and_then(|v| v.parse().ok()) {
            registry.quarantine_bytes = b;
        }
        Options {
            mode: var("GPUSAN_MODE").unwrap_or_else(|| "api".into()),
            leak_check: var("GPUSAN_LEAK_CHECK").is_some_and(|v| v == "full"),
            check_reaction: var("GPUSAN_CHECK_REACTION")
                .and_then(|v| gpusan_passes::check::Reaction::from_name(&v))
                .unwrap_or_default(),
            check_counting: if var("GPUSAN_CHECK_COUNT").is_some_and(|v| v == "1") {
                gpusan_passes::check::Counting::Dynamic
            } else {
                gpusan_passes::check::Counting::Off
            },
            report: var("GPUSAN_REPORT_DIR")
                .map(|d| PathBuf::from(d).join(format!("report-{}.json", std::process::id()))),
            registry,
        }
    }
}

pub struct State {
    pub options: Options,
    pub registry: Registry,
    collector: Mutex<Collector>,
    events: Mutex<Option<std::fs::File>>,
}

static STATE: OnceLock<State> = OnceLock::new();

pub fn state() -> &'static State {
    STATE.get_or_init(|| {
        let options = Options::from_env();
        let events = options.report.as_ref().and_then(|p| {
            let mut name = p.clone().into_os_string();
            name.push(".events");
            std::fs::OpenOptions::new().create(true).append(true).open(name).ok()
        });
        State {
            registry: Registry::new(options.registry),
            collector: Mutex::new(Collector::new(CollectorConfig::default())),
            events: Mutex::new(events),
            options,
        }
    })
}

impl State {
    /// Records a finding; a new distinct one is also written to the events file now.
    pub fn report(&self, report: Report) {
        let is_new = self.collector.lock().unwrap_or_else(|p| p.into_inner()).push(report.clone());
        if !is_new {
            return;
        }
        let mut report = report;
        for stack in report.stacks_mut() {
            stack.frames = registry::symbolize(stack.site);
        }
        if let Ok(line) = serde_json::to_string(&report) {
            if let Some(f) = self.events.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
                let _ = writeln!(f, "{line}");
            }
        }
    }

    pub fn finding(&self, f: &Finding, site: SiteId) {
        self.report(f.to_report(site));
    }

    /// Writes the final document: findings, and leaks when `--leak-check full`.
    pub fn finish(&self) {
        let Some(path) = &self.options.report else { return };
        // Kernels may have written errors after the last synchronization (fails harmlessly
        // once CUDA has torn its contexts down).
        crate::mirror::drain();
        let collector = std::mem::replace(
            &mut *self.collector.lock().unwrap_or_else(|p| p.into_inner()),
            Collector::new(CollectorConfig::default()),
        );
        let leaks = if self.options.leak_check { checks::leak_summary(&self.registry) } else { Vec::new() };
        let mut doc = collector.finish(&self.options.mode, leaks, registry::symbolize);
        // `gpusan run` named the sanitizer library, but this process (which used CUDA) never
        // got the runtime-API callbacks: say so rather than pass for clean.
        let asked = std::env::var_os("GPUSAN_SANITIZER_LIB").is_some_and(|v| !v.is_empty())
            && std::env::var_os("CUDA_INJECTION64_PATH").is_some_and(|v| !v.is_empty());
        if asked
            && !crate::sanitizer::RUNTIME_API_OBSERVED.load(std::sync::atomic::Ordering::Relaxed)
            && !crate::wrappers::call_counts().is_empty()
        {
            doc.notes.push("runtime API errors were not observed (the Compute Sanitizer API did not start)".into());
        }
        let (table_bytes, table_moves) = crate::mirror::table_memory();
        if table_bytes > 0 {
            doc.counters.insert("device_table_bytes".into(), table_bytes);
            doc.counters.insert("device_table_moves".into(), table_moves);
        }
        let lost = crate::mirror::not_stored();
        if lost > 0 {
            doc.counters.insert("device_errors_not_stored".into(), lost);
        }
        if self.options.mode == "check" && self.options.check_counting.is_on() {
            // A last read, as for `count` below.
            crate::modules::read_counters();
            doc.check_counts = Some(crate::modules::with(|m| m.check_counts()));
        }
        if self.options.mode == "count" {
            // A last read, in case kernels ran after the last synchronization; fails
            // harmlessly once CUDA has torn its contexts down.
            crate::modules::read_counters();
            crate::modules::with(|m| {
                doc.counters.insert("executed_memory_instructions".into(), m.counts.values().sum());
                doc.counters.insert("modules_instrumented".into(), m.substituted);
                doc.counters.insert("modules_from_cache".into(), m.cache_hits);
                doc.unchecked_modules = m.unchecked.clone();
            });
        }
        let tmp = path.with_extension("tmp");
        if std::fs::write(&tmp, doc.to_json()).is_ok() {
            let _ = std::fs::rename(&tmp, path);
        }
    }
}

/// Set in a child created by `fork` (without `exec`). The child inherits the state, but
/// another thread may have held one of its locks at the fork, and CUDA itself cannot be
/// used in such a child: gpusan stays out of the way there (see `hooks::quietly`) and
/// leaves the parent's report alone.
pub static FORKED_CHILD: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn in_forked_child() {
    FORKED_CHILD.store(true, std::sync::atomic::Ordering::Relaxed);
}

extern "C" fn at_exit() {
    if FORKED_CHILD.load(std::sync::atomic::Ordering::Relaxed) {
        return;
    }
    let _ = std::panic::catch_unwind(|| {
        if let Some(s) = STATE.get() {
            s.finish();
        }
    });
}

extern "C" fn on_load() {
    // Registered before main, so it runs after the handlers CUDA registers later
    // (atexit runs in reverse order): the program's frees have all been seen by then.
    unsafe {
        libc::atexit(at_exit);
        libc::pthread_atfork(None, None, Some(in_forked_child));
    }
}

#[used]
#[link_section = ".init_array"]
static ON_LOAD: extern "C" fn() = on_load;
