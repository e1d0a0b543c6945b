//! What the probe saw: which symbols were resolved through which door, how often each
//! wrapper ran, and the Sanitizer API callbacks. Written as JSON at exit.

use std::collections::BTreeMap;
use std::sync::Mutex;

#[derive(Default)]
pub struct Seen {
    /// (door, symbol) → times resolved. Doors: "dlsym", "getproc".
    pub resolved: BTreeMap<(String, String), u64>,
    /// Sanitizer callbacks: (domain, cbid) → count.
    pub callbacks: BTreeMap<(u32, u32), u64>,
    /// Kernel names launched, as the Sanitizer API reports them (first 64).
    pub launched: Vec<String>,
    /// Cubin sizes of modules the Sanitizer API reported loaded (first 64).
    pub modules: Vec<u64>,
    pub device_allocs: u64,
    pub device_alloc_bytes: u64,
    pub notes: Vec<String>,
}

pub static SEEN: Mutex<Option<Seen>> = Mutex::new(None);

pub fn with<R>(f: impl FnOnce(&mut Seen) -> R) -> R {
    let mut guard = SEEN.lock().unwrap_or_else(|p| p.into_inner());
    f(guard.get_or_insert_with(Seen::default))
}

pub fn note(s: impl Into<String>) {
    let s = s.into();
    with(|seen| {
        if seen.notes.len() < 64 {
            seen.notes.push(s)
        }
    });
}

/// Runs at exit (registered from the library constructor).
extern "C" fn write_at_exit() {
    let _ = std::panic::catch_unwind(|| {
        let Some(path) = std::env::var_os("GPUSAN_PROBE_OUT") else { return };
        let calls = crate::wrappers::call_counts();
        if calls.is_empty() && with(|s| s.resolved.is_empty() && s.callbacks.is_empty() && s.notes.is_empty()) {
            return; // a process that never touched CUDA (shells, compilers the program starts)
        }
        let doc = with(|s| {
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
            })
        });
        // One file per process: PyTorch and Triton start helper processes.
        let path = std::path::PathBuf::from(path).join(format!("probe-{}.json", std::process::id()));
        let _ = std::fs::write(path, serde_json::to_vec_pretty(&doc).unwrap_or_default());
    });
}

extern "C" fn on_load() {
    unsafe { libc::atexit(write_at_exit) };
}

#[used]
#[link_section = ".init_array"]
static ON_LOAD: extern "C" fn() = on_load;
