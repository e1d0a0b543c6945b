//! What the injection probe (`$GPUSAN_PROBE_OUT`) saw: which symbols were resolved through
//! which door and the Sanitizer API callbacks. `exit` writes it as JSON, with how often each
//! stand-in ran.

use std::collections::BTreeMap;
use std::sync::Mutex;

use gpusan_runtime::locks;
use gpusan_runtime::per_process::PerProcess;

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
    /// `cuGetExportTable` requests: "UUID result first_word" → count.
    pub export_tables: BTreeMap<String, u64>,
}

/// Per process: a forked child writes a record of its own.
static SEEN: PerProcess<Mutex<Seen>> = PerProcess::new(Default::default);

pub fn with<R>(f: impl FnOnce(&mut Seen) -> R) -> R {
    f(&mut locks::lock(SEEN.get()))
}

pub fn note(s: impl Into<String>) {
    let s = s.into();
    with(|seen| {
        if seen.notes.len() < 64 {
            seen.notes.push(s)
        }
    });
}
