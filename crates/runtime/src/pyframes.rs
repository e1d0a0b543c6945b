//! Python frames inside a site's stack. A program run by a Python interpreter reaches CUDA
//! through the interpreter's C code, whose native frames say nothing of the user's script;
//! the injected library reads the Python frames above a call (file, function, line) and
//! puts them in the site's stack ahead of the native ones, each as a tagged stand-in for a
//! return address ([`tag`]). The tag is a non-canonical address (bits 48–63 all set, bit
//! 47 clear): no user-space return address on x86-64 or AArch64 has it, so a stack mixes
//! both kinds and interning, equality and the JSON form stay those of addresses.
//!
//! The table is per process like the sites it serves, and bounded: past [`MAX_FRAMES`]
//! distinct frames a new one gets no tag and is left out of its stack.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use crate::locks;
use crate::per_process::PerProcess;

const TAG: u64 = 0xffff_0000_0000_0000;
const TAG_MASK: u64 = 0xffff_8000_0000_0000;

/// Distinct Python frames kept (file, function, line); enough for any program's launch and
/// allocation sites, and a bound on what a program generating code in a loop can cost.
pub const MAX_FRAMES: usize = 1 << 18;

/// One Python frame: where the interpreter was.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PyFrame {
    pub file: Arc<str>,
    pub function: Arc<str>,
    pub line: u32,
}

#[derive(Default)]
struct Table {
    frames: Vec<PyFrame>,
    index: HashMap<PyFrame, u64>,
}

static TABLE: PerProcess<RwLock<Table>> = PerProcess::new(|| RwLock::new(Table::default()));

/// The tagged stand-in address of `frame`, interned; `None` once the table is full.
pub fn tag(frame: PyFrame) -> Option<u64> {
    if let Some(&t) = locks::read(TABLE.get()).index.get(&frame) {
        return Some(t);
    }
    let mut table = locks::write(TABLE.get());
    if let Some(&t) = table.index.get(&frame) {
        return Some(t);
    }
    if table.frames.len() >= MAX_FRAMES {
        return None;
    }
    let t = TAG | table.frames.len() as u64;
    table.frames.push(frame.clone());
    table.index.insert(frame, t);
    Some(t)
}

/// Whether `address` is a Python frame's stand-in rather than a return address.
pub fn is_python(address: u64) -> bool {
    address & TAG_MASK == TAG
}

/// The Python frame a stand-in address names (`None` for a return address, or a tag this
/// process never handed out).
pub fn frame(address: u64) -> Option<PyFrame> {
    if !is_python(address) {
        return None;
    }
    locks::read(TABLE.get()).frames.get((address & !TAG_MASK) as usize).cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(file: &str, line: u32) -> PyFrame {
        PyFrame { file: file.into(), function: "step".into(), line }
    }

    #[test]
    fn frames_intern_to_tags_no_return_address_can_have() {
        let a = tag(f("train.py", 12)).unwrap();
        assert_eq!(tag(f("train.py", 12)), Some(a));
        let b = tag(f("train.py", 13)).unwrap();
        assert_ne!(a, b);
        assert!(is_python(a) && is_python(b));
        assert_eq!(frame(b), Some(f("train.py", 13)));
        // User-space addresses (x86-64 and AArch64 keep them below 2^47/2^48) and kernel ones.
        for native in [0x4005d0u64, 0x7fff_ffff_f000, 0x0000_ffff_ffff_fff0, 0xffff_8000_0000_1000] {
            assert!(!is_python(native), "{native:#x}");
            assert_eq!(frame(native), None);
        }
    }
}
