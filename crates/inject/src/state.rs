//! The runtime's state inside the program: the options `gpusan run` passed through the
//! environment (the [`Mode`] among them), the allocation registry and the findings. Created
//! on first use, per process (a child made by `fork` makes its own: its own report file,
//! an empty registry); `exit` writes the findings where `gpusan run` reads them. Also the
//! guard every piece of gpusan's bookkeeping runs under ([`quietly`]).

use std::io::Write;
use std::path::PathBuf;
use std::sync::Mutex;

use gpusan_abi::{env, Mode, Reaction};
use gpusan_runtime::checks::Finding;
use gpusan_runtime::locks;
use gpusan_runtime::per_process::PerProcess;
use gpusan_runtime::registry::{self, Config as RegistryConfig, Registry, SiteId};
use gpusan_runtime::report::{Collector, CollectorConfig, Report};

/// A map keyed by handles or addresses on a hot path (each launch): a fast hash instead of
/// SipHash, whose resistance to chosen keys the driver's handles do not need.
pub type FastMap<K, V> = std::collections::HashMap<K, V, std::hash::BuildHasherDefault<ahash::AHasher>>;

/// Options, from `GPUSAN_*` variables set by `gpusan run`.
pub struct Options {
    pub mode: Mode,
    /// `GPUSAN_ROUTE`: how `check` reaches kernels (PTX instrumented, machine code patched).
    pub route: gpusan_abi::Route,
    pub leak_check: bool,
    /// `GPUSAN_CHECK_REACTION`: what checked kernels do at an error.
    pub check_reaction: Reaction,
    /// `GPUSAN_LOCAL_BOUNDS`: local arrays bounded one by one, or the frame as a whole.
    pub local_bounds: gpusan_abi::LocalBounds,
    /// `GPUSAN_CHECK_COUNT=1`: checked kernels also count their checks (a measurement
    /// build, `check/counting.rs`); the sums go into the report's `check_counts`.
    pub check_counting: gpusan_passes::check::Counting,
    /// Where this process writes its findings: `report-<pid>.json` (final, at exit) and
    /// `report-<pid>.json.events` (each new finding at once, so a crash loses nothing) in
    /// the folder `gpusan run` names. One pair per process: programs start others (and
    /// fork: a child's options are read anew, with its own pid).
    pub report: Option<PathBuf>,
    pub registry: RegistryConfig,
    /// `GPUSAN_REDZONE`: bytes padded after device allocations where the binary route may
    /// patch (`routes::redzones`); 0: none.
    pub redzone: u64,
    /// `GPUSAN_POOL_SITES`: pool blocks record their allocation and free stacks.
    pub pool_sites: bool,
    /// `GPUSAN_BINARY_KINDS`: the access kinds beyond global memory the binary route patches.
    pub binary_kinds: gpusan_abi::binary::Kinds,
    /// `GPUSAN_KERNEL_SELECTION`: which launches are checked (`routes::window`); `None`:
    /// every one.
    pub selection: Option<gpusan_runtime::kernel_filter::Selection>,
    /// `GPUSAN_PROGRESS`: a terminal shows the progress of long instrumentation
    /// (`routes::passes`).
    pub progress: bool,
    /// `GPUSAN_TRACE_OUT` is set: the run is traced (`routes::trace`), and the binary
    /// route's patches record.
    pub trace: bool,
}

impl Options {
    fn from_env() -> Options {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let mut registry = RegistryConfig::default();
        if let Some(b) = var(env::QUARANTINE_BYTES).and_then(|v| v.parse().ok()) {
            registry.quarantine_bytes = b;
        }
        Options {
            // An unknown mode or reaction is the default one (`api`, `report`).
            mode: var(env::MODE).and_then(|v| Mode::from_name(&v)).unwrap_or_default(),
            leak_check: var(env::LEAK_CHECK).is_some_and(|v| v == env::LEAK_CHECK_FULL),
            route: var(env::ROUTE).and_then(|v| gpusan_abi::Route::from_name(&v)).unwrap_or_default(),
            check_reaction: var(env::CHECK_REACTION).and_then(|v| Reaction::from_name(&v)).unwrap_or_default(),
            local_bounds: var(env::LOCAL_BOUNDS)
                .and_then(|v| gpusan_abi::LocalBounds::from_name(&v))
                .unwrap_or_default(),
            check_counting: if var(env::CHECK_COUNT).is_some_and(|v| v == env::CHECK_COUNT_ON) {
                gpusan_passes::check::Counting::Dynamic
            } else {
                gpusan_passes::check::Counting::Off
            },
            report: var(env::REPORT_DIR).map(|d| PathBuf::from(d).join(format!("report-{}.json", std::process::id()))),
            registry,
            redzone: var(env::REDZONE).and_then(|v| v.parse().ok()).unwrap_or(env::REDZONE_DEFAULT),
            pool_sites: var(env::POOL_SITES).is_some_and(|v| v == env::POOL_SITES_ON),
            progress: var(env::PROGRESS).is_some(),
            trace: var(env::TRACE_OUT).is_some(),
            binary_kinds: var(env::BINARY_KINDS)
                .and_then(|v| gpusan_abi::binary::Kinds::parse(&v))
                .unwrap_or(gpusan_abi::binary::Kinds::DEFAULT),
            selection: var(env::KERNEL_SELECTION)
                .and_then(|v| gpusan_runtime::kernel_filter::Spec::from_env(&v))
                .filter(|s| !s.is_all())
                .map(|s| gpusan_runtime::kernel_filter::Selection::new(&s)),
        }
    }
}

pub struct State {
    pub options: Options,
    pub registry: Registry,
    collector: Mutex<Collector>,
    events: Mutex<Option<std::fs::File>>,
    /// What the program says it is doing (`gpusan_set_label`): findings carry it.
    label: Mutex<Option<String>>,
}

static STATE: PerProcess<State> = PerProcess::new(State::new);

/// The state, if anything created it in this process (at exit: nothing to write otherwise).
pub fn existing() -> Option<&'static State> {
    STATE.existing()
}

/// What each process's registry tells of its changes, if an upper layer asked
/// (`gpusan trace`, `routes::trace`): made when the process's state is, the parent's and a
/// forked child's alike. The state knows no route.
static REGISTRY_OBSERVER: std::sync::OnceLock<MakeObserver> = std::sync::OnceLock::new();

/// What makes a process's registry observer.
pub type MakeObserver = fn() -> Option<Box<dyn gpusan_runtime::registry::Observer>>;

/// Has `make` give each process's registry its observer (set once, at load).
pub fn observe_registries_with(make: MakeObserver) {
    let _ = REGISTRY_OBSERVER.set(make);
}

pub fn state() -> &'static State {
    STATE.get()
}

impl State {
    fn new() -> State {
        let options = Options::from_env();
        // Opened (created) now, so a process that leaves by `_exit` (a `multiprocessing`
        // worker) and never reaches the final document is still counted, with its findings.
        let events = options.report.as_ref().and_then(|p| {
            let mut name = p.clone().into_os_string();
            name.push(".events");
            append_no_follow(std::path::Path::new(&name))
        });
        let registry = Registry::new(options.registry);
        if let Some(o) = REGISTRY_OBSERVER.get().and_then(|make| make()) {
            registry.observe(o);
        }
        State {
            registry,
            collector: Mutex::new(Collector::new(CollectorConfig::default())),
            events: Mutex::new(events),
            label: Mutex::new(None),
            options,
        }
    }

    /// Records a finding, under the label set now; a new distinct one is also written to
    /// the events file now.
    pub fn report(&self, mut report: Report) {
        if report.label.is_none() {
            report.label = locks::lock(&self.label).clone();
        }
        let mut collector = locks::lock(&self.collector);
        let is_new = collector.push(report.clone());
        // Tests: a panic with the lock held, which poisons it.
        crate::driver::boundary::test_panic("report");
        drop(collector);
        if !is_new {
            return;
        }
        let mut report = report;
        for stack in report.stacks_mut() {
            stack.frames = registry::symbolize(stack.site);
        }
        let line = gpusan_runtime::report::EventLine { process: Some(gpusan_runtime::report::Process::this()), report };
        if let Ok(line) = serde_json::to_string(&line) {
            if let Some(f) = locks::lock(&self.events).as_mut() {
                let _ = writeln!(f, "{line}");
            }
        }
    }

    /// Names what the program does from now on (`None`: nothing); findings reported after
    /// this carry it.
    pub fn set_label(&self, label: Option<String>) {
        *locks::lock(&self.label) = label;
    }

    pub fn finding(&self, f: &Finding, site: SiteId) {
        self.report(f.to_report(site));
    }

    /// The findings collected so far, leaving an empty collector (for the final document).
    pub fn take_findings(&self) -> Collector {
        std::mem::replace(&mut *locks::lock(&self.collector), Collector::new(CollectorConfig::default()))
    }
}

/// Opens `path` to append, creating it 0600, never through a symlink: the report folder
/// may be one others can write (`$GPUSAN_REPORT_DIR`), and a planted symlink would have
/// gpusan write into a file of the user's.
fn append_no_follow(path: &std::path::Path) -> Option<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new().create(true).append(true).mode(0o600).custom_flags(libc::O_NOFOLLOW).open(path).ok()
}

/// Writes `path` atomically, through a fresh temporary file beside it (created
/// exclusively, 0600) renamed into place: a symlink planted at `path` is replaced, never
/// followed, and a reader never sees half a file. The final report, cache files.
pub fn write_no_follow(path: &std::path::Path, bytes: &[u8]) -> bool {
    gpusan_runtime::cache::write_no_follow(path, bytes)
}

/// Runs gpusan's bookkeeping; a panic inside it is contained, recorded as an internal
/// error and stops the bookkeeping for good (`driver::boundary`). Skipped entirely in a
/// child forked once CUDA was initialised (`driver::fork`) and once stopped: the call then
/// simply goes through.
pub fn quietly<R>(f: impl FnOnce() -> R) -> Option<R> {
    use crate::driver::boundary;
    if boundary::bypassed() {
        return None;
    }
    boundary::contain(boundary::entry(), || Some(f()), || None)
}
