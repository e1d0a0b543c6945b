//! What the injection probe (`$GPUSAN_PROBE_OUT`) saw: which symbols were resolved through
//! which door and the Sanitizer API callbacks. `exit` writes it as JSON, with how often each
//! stand-in ran.

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

static SEEN: Mutex<Option<Seen>> = Mutex::new(None);

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
