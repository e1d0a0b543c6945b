//! Names of the program's own variables from their addresses: cudart's symbol calls
//! (`cudaMemcpyToSymbol(table, …)`) name a `__device__` variable by the address of its host
//! shadow, a variable of the same name in the program's data. `dladdr` gives the file and
//! where it is loaded; the file's `.symtab` (or `.dynsym`) gives the name of the object
//! starting at that address. Read once per file, and only when a symbol call failed.

use std::collections::HashMap;
use std::ffi::{c_void, CStr};
use std::sync::Mutex;

use gpusan_runtime::per_process::PerProcess;
use object::{Object, ObjectSegment, ObjectSymbol, SymbolKind};

/// (start relative to the file's lowest segment, name) of each data object, by start.
type Objects = Vec<(u64, String)>;

/// File → its objects (`None`: unreadable), read once per process.
static FILES: PerProcess<Mutex<HashMap<String, Option<Objects>>>> = PerProcess::new(Default::default);

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

/// The names the device side may give a host shadow called `host`: nvcc makes shadows
/// `static`, and a C++ compiler mangles internal linkage with an `L` before the name
/// (`_ZL5table`, `_ZN2nsL5bytesE`) where the device symbol has none (`table`,
/// `_ZN2ns5bytesE`). Most likely first.
pub fn device_names(host: &str) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(rest) = host.strip_prefix("_ZL") {
        // `_ZL<len><name>` at namespace scope: the device symbol is the plain name.
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if let Ok(len) = rest[..digits].parse::<usize>() {
            if rest.len() == digits + len {
                out.push(rest[digits..].to_string());
            }
        }
    } else if let Some(rest) = host.strip_prefix("_ZN") {
        // Components `<len><name>`; an `L` before one marks internal linkage.
        let b = rest.as_bytes();
        let mut i = 0;
        while i < b.len() {
            if b[i] == b'L' && b.get(i + 1).is_some_and(u8::is_ascii_digit) {
                out.push(format!("_ZN{}{}", &rest[..i], &rest[i + 1..]));
                break;
            }
            let digits = b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
            let Ok(len) = rest[i..i + digits].parse::<usize>() else { break };
            i += digits + len;
        }
    }
    out.push(host.to_string());
    out
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
    let mut g = FILES.get().lock().unwrap_or_else(|p| p.into_inner());
    let objects = g.entry(path.clone()).or_insert_with(|| objects_of(&path));
    let objects = objects.as_ref()?;
    let i = objects.binary_search_by_key(&relative, |o| o.0).ok()?;
    Some(objects[i].1.clone())
}

#[cfg(test)]
mod tests {
    use super::device_names;

    #[test]
    fn internal_linkage_shadows_map_to_device_names() {
        assert_eq!(device_names("_ZL5table"), ["table", "_ZL5table"]);
        assert_eq!(device_names("_ZN2nsL5bytesE"), ["_ZN2ns5bytesE", "_ZN2nsL5bytesE"]);
        // An `L` inside a name is not a linkage mark.
        assert_eq!(device_names("_ZN3ABLL1xE"), ["_ZN3ABL1xE", "_ZN3ABLL1xE"]);
        assert_eq!(device_names("table"), ["table"]);
        assert_eq!(device_names("_ZN2ns5bytesE"), ["_ZN2ns5bytesE"]);
    }
}
