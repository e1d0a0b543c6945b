//! Host addresses as a report names them: the module (executable or shared library) and the
//! offset in it, always, so that `addr2line -e MODULE OFFSET` finds the place; and the
//! function, file and line where the module has a symbol table or DWARF line information.
//!
//! Reading debug information is slow and needs memory, so it is done only when a report is
//! written, each module's once (`addr2line`'s loader over the mapped file, kept for the
//! process's later reports), and only for modules a frame falls in. Names are demangled
//! here ([`crate::coverage::signature`]); the symbol as the module spells it is kept too.

use std::collections::{HashMap, HashSet};
use std::ffi::{c_int, c_void, CStr};
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Mutex;

use crate::locks;
use crate::per_process::PerProcess;

/// One function an address lies in: the innermost first where calls were inlined.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Function {
    /// Demangled (`cudaMalloc<unsigned int>(unsigned int**, unsigned long)`).
    pub name: Option<String>,
    /// The symbol as the module has it, where demangling changed it.
    pub symbol: Option<String>,
    pub file: Option<String>,
    pub line: Option<u32>,
}

/// Where a return address is.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Place {
    /// The file the module was loaded from (the executable's own path for the program).
    pub module: Option<String>,
    /// The call's offset in the module, as `addr2line -e module` takes it: the byte before
    /// the return address, so the line named is the call's, not the next statement's.
    pub offset: Option<u64>,
    /// Empty where the module has neither symbols nor line information for the address.
    pub functions: Vec<Function>,
}

/// Resolves a return address of this process. Never fails: what cannot be found is left out.
pub fn resolve(address: u64) -> Place {
    let mut symbolizer = locks::lock(SYMBOLIZER.get());
    symbolizer.resolve(address)
}

/// Per process: a child made by `fork` has the same modules, but looks them up afresh
/// rather than share a cache its parent may have been changing.
static SYMBOLIZER: PerProcess<Mutex<Symbolizer>> = PerProcess::new(|| Mutex::new(Symbolizer::default()));

#[derive(Default)]
struct Symbolizer {
    /// The modules loaded when an address was last not found in them.
    modules: Vec<Module>,
    /// Each module's debug information, by path; `None` where it could not be read.
    loaders: HashMap<PathBuf, Option<addr2line::Loader>>,
    /// Addresses in no module even after a fresh look (generated code, `0`): not looked
    /// for again, since every site of a run may hold one.
    unmapped: HashSet<u64>,
}

struct Module {
    path: PathBuf,
    /// What was added to the module's addresses when it was loaded.
    bias: u64,
    segments: Vec<Range<u64>>,
}

impl Symbolizer {
    fn resolve(&mut self, address: u64) -> Place {
        // The program may have loaded libraries since the last report.
        if self.module_of(address).is_none() && address != 0 && !self.unmapped.contains(&address) {
            self.modules = loaded_modules();
        }
        let Some(i) = self.module_of(address) else {
            self.unmapped.insert(address);
            return Place::default();
        };
        let (path, bias) = (self.modules[i].path.clone(), self.modules[i].bias);
        // A return address follows its call: the call's last byte is the one before.
        let offset = address.wrapping_sub(bias).wrapping_sub(1);
        let loader = self.loaders.entry(path.clone()).or_insert_with(|| addr2line::Loader::new(&path).ok());
        let functions = loader.as_ref().map(|l| functions(l, offset)).unwrap_or_default();
        Place { module: Some(path.display().to_string()), offset: Some(offset), functions }
    }

    fn module_of(&self, address: u64) -> Option<usize> {
        self.modules.iter().position(|m| m.segments.iter().any(|s| s.contains(&address)))
    }
}

/// The functions at `offset`, innermost first: from DWARF where it covers the address, else
/// the symbol table's (dynamic symbols of a stripped library included).
fn functions(loader: &addr2line::Loader, offset: u64) -> Vec<Function> {
    let mut out = Vec::new();
    if let Ok(mut frames) = loader.find_frames(offset) {
        while let Ok(Some(frame)) = frames.next() {
            let raw = frame.function.as_ref().and_then(|f| f.raw_name().ok()).map(|n| n.into_owned());
            let (file, line) = frame.location.map_or((None, None), |l| (l.file.map(str::to_string), l.line));
            out.push(Function { file, line, ..named(raw.as_deref()) });
        }
    }
    if out.iter().all(|f| f.name.is_none()) {
        if let Some(symbol) = loader.find_symbol(offset) {
            match out.first_mut() {
                // Line information without a function name (a unit without DW_AT_name).
                Some(first) => {
                    let Function { name, symbol: mangled, .. } = named(Some(symbol));
                    (first.name, first.symbol) = (name, mangled);
                }
                None => out.push(named(Some(symbol))),
            }
        }
    }
    out
}

fn named(raw: Option<&str>) -> Function {
    let Some(raw) = raw.filter(|r| !r.is_empty()) else { return Function::default() };
    // Rust first: its legacy mangling is also valid C++, which would keep the hash
    // (`foo::bar::h0123…`); a C++ symbol is no valid Rust one.
    let name = match rustc_demangle::try_demangle(raw) {
        Ok(rust) => format!("{rust:#}"),
        Err(_) => crate::coverage::signature(raw),
    };
    let symbol = (name != raw).then(|| raw.to_string());
    Function { name: Some(name), symbol, ..Function::default() }
}

/// Every module mapped now, with the address ranges of its loaded segments.
fn loaded_modules() -> Vec<Module> {
    unsafe extern "C" fn each(info: *mut libc::dl_phdr_info, _size: usize, data: *mut c_void) -> c_int {
        // SAFETY: the loader hands a valid entry; `data` is the vector below, ours alone.
        let (info, modules) = unsafe { (&*info, &mut *data.cast::<Vec<Module>>()) };
        let name = if info.dlpi_name.is_null() {
            &[][..]
        } else {
            // SAFETY: a NUL-terminated string of the loader's.
            unsafe { CStr::from_ptr(info.dlpi_name) }.to_bytes()
        };
        let path = if name.is_empty() {
            // The program itself is listed first, without a name.
            if !modules.is_empty() {
                return 0;
            }
            match std::env::current_exe() {
                Ok(exe) => exe,
                Err(_) => return 0,
            }
        } else {
            use std::os::unix::ffi::OsStrExt;
            PathBuf::from(std::ffi::OsStr::from_bytes(name))
        };
        let headers = if info.dlpi_phdr.is_null() {
            &[][..]
        } else {
            // SAFETY: `dlpi_phnum` headers at `dlpi_phdr`, as the loader keeps them.
            unsafe { std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum)) }
        };
        let bias = info.dlpi_addr;
        let segments = headers
            .iter()
            .filter(|h| h.p_type == libc::PT_LOAD)
            .map(|h| bias.wrapping_add(h.p_vaddr)..bias.wrapping_add(h.p_vaddr).wrapping_add(h.p_memsz))
            .collect();
        modules.push(Module { path, bias, segments });
        0
    }
    let mut modules: Vec<Module> = Vec::new();
    // SAFETY: the callback only reads the entries and writes into `modules`.
    unsafe { libc::dl_iterate_phdr(Some(each), (&raw mut modules).cast()) };
    modules
}

/// Whether a module of this path is mapped into the process now (`libtriton` for Triton).
pub fn module_loaded(name_part: &str) -> bool {
    loaded_modules().iter().any(|m| m.path.to_string_lossy().contains(name_part))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_of_the_program_has_its_module_offset_and_function() {
        let function = an_address_of_the_program_has_its_module_offset_and_function as fn() as usize as u64;
        let place = resolve(function + 1);
        let exe = std::env::current_exe().unwrap().display().to_string();
        assert_eq!(place.module.as_deref(), Some(exe.as_str()));
        let name = place.functions.first().and_then(|f| f.name.clone()).unwrap_or_default();
        assert!(name.contains("an_address_of_the_program"), "{place:?}");
        assert!(place.functions[0].file.as_deref().is_some_and(|f| f.ends_with("symbols.rs")), "{place:?}");
    }

    #[test]
    fn unmapped_addresses_resolve_to_nothing() {
        assert_eq!(resolve(0), Place::default());
    }

    #[test]
    fn names_are_demangled_and_the_symbol_kept() {
        let f = named(Some("_Z10cudaMallocIjE9cudaErrorPPT_m"));
        assert_eq!(f.name.as_deref(), Some("cudaMalloc<unsigned int>(unsigned int**, unsigned long)"));
        assert_eq!(f.symbol.as_deref(), Some("_Z10cudaMallocIjE9cudaErrorPPT_m"));
        let rust = named(Some("_ZN5sites22nested_allocation_site17h63c71411600593e8E"));
        assert_eq!(rust.name.as_deref(), Some("sites::nested_allocation_site"));
        let plain = named(Some("main"));
        assert_eq!((plain.name.as_deref(), plain.symbol), (Some("main"), None));
    }
}
