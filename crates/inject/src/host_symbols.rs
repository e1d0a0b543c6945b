//! Names of the program's own variables from their addresses: cudart's symbol calls
//! (`cudaMemcpyToSymbol(table, …)`) name a `__device__` variable by the address of its host
//! shadow, a variable of the same name in the program's data. `dladdr` gives the file and
//! where it is loaded; the file's `.symtab` (or `.dynsym`) gives the name of the object
//! starting at that address. Read once per file, and only when a symbol call failed.

use std::collections::HashMap;
use std::ffi::{c_void, CStr};
use std::sync::Mutex;

use gpusan_runtime::locks;
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
    // The names come from the program's symbol tables, so a length may be anything: one
    // that runs past the name, wraps round or cuts a character in two ends the walk.
    if let Some(rest) = host.strip_prefix("_ZL") {
        // `_ZL<len><name>` at namespace scope: the device symbol is the plain name.
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if let Ok(len) = rest[..digits].parse::<usize>() {
            if digits.checked_add(len) == Some(rest.len()) {
                out.push(rest[digits..].to_string());
            }
        }
    } else if let Some(rest) = host.strip_prefix("_ZN") {
        // Components `<len><name>`; an `L` before one marks internal linkage.
        let b = rest.as_bytes();
        let mut i = 0;
        while i < b.len() {
            if b[i] == b'L' && b.get(i + 1).is_some_and(u8::is_ascii_digit) {
                // `L` is ASCII: `i` is a char boundary.
                out.push(format!("_ZN{}{}", &rest[..i], &rest[i + 1..]));
                break;
            }
            let digits = b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
            // `get`: a length that ended inside a character leaves `i` off a boundary.
            let Some(Ok(len)) = rest.get(i..i + digits).map(str::parse::<usize>) else { break };
            let Some(next) = i.checked_add(digits).and_then(|j| j.checked_add(len)) else { break };
            i = next;
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
    let mut g = locks::lock(FILES.get());
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

    /// Lengths that cut a character in two, or overflow, once panicked (or, in a release
    /// build, looped forever: `i + digits + len` wrapping back to `i`) inside the program.
    #[test]
    fn malformed_lengths_end_the_walk() {
        assert_eq!(device_names("_ZN1\u{e9}L1x"), ["_ZN1\u{e9}L1x"]);
        let wraps = format!("_ZN{}", u64::MAX - 19);
        assert_eq!(device_names(&wraps), [wraps.as_str()]);
        assert_eq!(device_names("_ZL18446744073709551615x"), ["_ZL18446744073709551615x"]);
        assert_eq!(device_names("_ZN99999999999999999999999x"), ["_ZN99999999999999999999999x"]);
    }

    /// Every name of up to five characters from the pieces manglings are made of, after each
    /// prefix the walk reads: none may panic, and each keeps the name itself, last.
    #[test]
    fn no_short_name_breaks_the_walk() {
        const PIECES: [&str; 8] = ["1", "2", "9", "L", "x", "E", "\u{e9}", "18446744073709551615"];
        let (mut names, mut level) = (vec![String::new()], vec![String::new()]);
        for _ in 0..5 {
            level = level.iter().flat_map(|n| PIECES.iter().map(move |p| format!("{n}{p}"))).collect();
            names.extend(level.iter().cloned());
        }
        for prefix in ["_ZN", "_ZL"] {
            for n in &names {
                let host = format!("{prefix}{n}");
                assert_eq!(device_names(&host).last(), Some(&host));
            }
        }
    }
}
