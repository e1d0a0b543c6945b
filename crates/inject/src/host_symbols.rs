//! Names of the program's own variables from their addresses: cudart's symbol calls
//! (`cudaMemcpyToSymbol(table, …)`) name a `__device__` variable by the address of its host
//! shadow, a variable of the same name in the program's data. `dladdr` gives the file and
//! where it is loaded; the file's `.symtab` (or `.dynsym`) gives the name of the object
//! starting at that address. Read once per file, and only when a symbol call failed.

use std::collections::HashMap;
use std::ffi::{c_void, CStr};
use std::sync::Mutex;

use object::{Object, ObjectSegment, ObjectSymbol, SymbolKind};

/// (start relative to the file's lowest segment, name) of each data object, by start.
type Objects = Vec<(u64, String)>;

static FILES: Mutex<Option<HashMap<String, Option<Objects>>>> = Mutex::new(None);

fn objects_of(path: &str) -> Option<Objects> {
    let data = std::fs::read(path).ok()?;
    let file = object::File::parse(&*data).ok()?;
    let low = file.segments().map(|s| s.address()).min().unwrap_or(0) & !0xfff;
    let mut out: Objects = file
        .symbols()
        .chain(file.dynamic_symbols())
        .filter(|s| s.kind() == SymbolKind::Data && s.size() > 0)
        .filter_map(|s| Some((s.address().checked_sub(low)?, s.name().ok()?.to_string())))
        .collect();
    out.sort();
    out.dedup_by_key(|o| o.0);
    Some(out)
}

/// The name of the data object starting exactly at `addr` in a loaded file, if its symbol
/// table says so.
pub fn name_at(addr: u64) -> Option<String> {
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    if unsafe { libc::dladdr(addr as *const c_void, &mut info) } == 0 || info.dli_fname.is_null() {
        return None;
    }
    if !info.dli_sname.is_null() && info.dli_saddr as u64 == addr {
        return Some(unsafe { CStr::from_ptr(info.dli_sname) }.to_string_lossy().into_owned());
    }
    let mut path = unsafe { CStr::from_ptr(info.dli_fname) }.to_string_lossy().into_owned();
    if path.is_empty() {
        // The main program: dladdr names it "" on some loaders.
        path = std::fs::read_link("/proc/self/exe").ok()?.to_string_lossy().into_owned();
    }
    let relative = addr.checked_sub(info.dli_fbase as u64)?;
    let mut g = FILES.lock().unwrap_or_else(|p| p.into_inner());
    let objects = g.get_or_insert_with(HashMap::new).entry(path.clone()).or_insert_with(|| objects_of(&path));
    let objects = objects.as_ref()?;
    let i = objects.binary_search_by_key(&relative, |o| o.0).ok()?;
    Some(objects[i].1.clone())
}
