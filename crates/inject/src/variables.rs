//! Module variables (`__device__`, `__constant__`) as allocations: their names come from
//! each loaded module's image (the cubin's symbol table, or the PTX's declarations), their
//! address and size from the driver (`cuModuleGetGlobal` / `cuLibraryGetGlobal`), and they
//! enter the registry as `ModuleVariable`s, so copies past a variable's end are judged and
//! reported with its name.
//!
//! Resolution is lazy: asking the driver for a library's variable loads the library's module
//! into the current context, which would defeat CUDA's lazy loading if done at every load.
//! It happens only when a copy or set touches device memory the registry does not know (or
//! a symbol copy needs a variable's size), once per (module, context).
//!
//! cudart does not always ask for variables through entry points gpusan sees (its symbol
//! lookups for `cudaGetSymbolAddress` go through its own tables), which is why gpusan asks
//! the driver itself.

use std::collections::{BTreeMap, HashSet};
use std::ffi::c_void;
use std::sync::Mutex;

use gpusan_runtime::locks;
use gpusan_runtime::per_process::PerProcess;
use gpusan_runtime::registry::{AllocKind, Allocation, Lookup, NewAlloc, SiteId};

use crate::capture::global_of;
use crate::driver::{current_context, Loaded};
use crate::state::state;

/// Where a module's variable names come from.
enum Names {
    /// Known (read at load: the image may not outlive the load call).
    Known(Vec<String>),
    /// Read at the first resolution: an image the program keeps (cudart's fatbins are
    /// static data of the program); parsing every image at load would decompress the
    /// code of every library the program links.
    Image(usize),
}

struct Module {
    loaded: Loaded,
    names: Names,
    /// Contexts this module's variables were resolved in.
    resolved: HashSet<u64>,
}

#[derive(Default)]
struct Variables {
    modules: Vec<Module>,
    /// Base address → name, of every variable registered.
    names: BTreeMap<u64, String>,
    /// Name → (base, size) of every variable registered under it: several modules (or
    /// contexts) may define one name.
    by_name: BTreeMap<String, Vec<(u64, u64)>>,
}

static VARIABLES: PerProcess<Mutex<Option<Variables>>> = PerProcess::new(|| Mutex::new(None));

fn with<R>(f: impl FnOnce(&mut Variables) -> R) -> R {
    let mut g = locks::lock(VARIABLES.get());
    f(g.get_or_insert_with(Variables::default))
}

/// Names gpusan's own instrumentation declares: not the program's variables.
fn is_own(name: &str) -> bool {
    name.starts_with(gpusan_abi::SYMBOL_PREFIX)
}

fn cubin_names(bytes: &[u8]) -> Vec<String> {
    match gpusan_fatbin::Cubin::parse(bytes) {
        Ok(c) => c.variables.iter().map(|v| v.name.to_string()).filter(|n| !is_own(n)).collect(),
        Err(_) => Vec::new(),
    }
}

/// Module-scope `.global` and `.const` variables a PTX module defines.
fn ptx_names(ptx: &str) -> Vec<String> {
    use gpusan_ptx::ast::{Item, Linkage, StateSpace};
    gpusan_ptx::Items::new(ptx)
        .filter_map(|i| match i {
            Ok(Item::Var(v))
                if matches!(v.space, StateSpace::Global | StateSpace::Const)
                    && !v.linkage.contains(&Linkage::Extern)
                    && !is_own(&v.name) =>
            {
                Some(v.name.to_string())
            }
            _ => None,
        })
        .collect()
}

/// The variable names of a loaded image: a fatbin (or registration wrapper), a cubin, or
/// PTX text. From one entry of a fatbin: every entry is built from the same source.
unsafe fn image_names(image: *const c_void) -> Vec<String> {
    use crate::image::Image;
    use gpusan_fatbin::EntryKind;
    match crate::image::read(image) {
        Ok(Image::Fatbin(fatbin)) => {
            if let Some(e) = fatbin.entries.iter().find(|e| e.kind == EntryKind::Elf) {
                return e.contents().map(|c| cubin_names(&c)).unwrap_or_default();
            }
            if let Some(e) = fatbin.entries.iter().find(|e| e.kind == EntryKind::Ptx) {
                return e.ptx_text().map(|t| ptx_names(&t)).unwrap_or_default();
            }
            Vec::new()
        }
        Ok(Image::Cubin(bytes)) => cubin_names(bytes),
        Ok(Image::Text(text)) if text.contains(".version") => ptx_names(text),
        Ok(Image::Text(_)) | Err(_) => Vec::new(),
    }
}

/// Whether `p` lies in a file the process mapped (a fatbin in a program's or library's
/// data, as cudart registers them): such an image outlives the load and is read later.
/// Anything else (a buffer the program filled) may be freed once the load returns.
fn in_mapped_file(p: *const c_void) -> bool {
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    unsafe { libc::dladdr(p, &mut info) != 0 && !info.dli_fbase.is_null() }
}

/// After a module or library loaded from `image`.
pub fn on_module_loaded(loaded: Loaded, image: *const c_void) {
    let names =
        if in_mapped_file(image) { Names::Image(image as usize) } else { Names::Known(unsafe { image_names(image) }) };
    with(|v| {
        // A handle the driver hands out again belongs to a new module.
        v.modules.retain(|m| m.loaded != loaded);
        v.modules.push(Module { loaded, names, resolved: HashSet::new() });
    });
}

/// Resolves the variables of every module not yet resolved in the current context and
/// registers them. Returns whether any variable was registered.
pub fn resolve() -> bool {
    let (context, device) = current_context();
    if context == 0 {
        return false;
    }
    // Names are read outside the lock of the registry; the driver calls below may re-enter
    // gpusan's hooks (they do not, being real entry points), so no lock is held across them.
    let todo: Vec<(Loaded, Vec<String>)> = with(|v| {
        let mut todo = Vec::new();
        for m in v.modules.iter_mut().filter(|m| !m.resolved.contains(&context)) {
            m.resolved.insert(context);
            if let Names::Image(p) = m.names {
                m.names = Names::Known(unsafe { image_names(p as *const c_void) });
            }
            if let Names::Known(names) = &m.names {
                todo.push((m.loaded, names.clone()));
            }
        }
        todo
    });
    let mut any = false;
    for (loaded, names) in todo {
        for name in names {
            let Some((base, size)) = global_of(loaded, &name) else { continue };
            any |= register(base, size as u64, &name, context, device);
        }
    }
    any
}

/// Registers one variable (unless the registry knows its address as something else) and
/// remembers its name.
fn register(base: u64, size: u64, name: &str, context: u64, device: i32) -> bool {
    if base == 0 || size == 0 {
        return false;
    }
    let st = state();
    let new = match st.registry.lookup(base) {
        Lookup::Outside { .. } => st
            .registry
            .insert(NewAlloc { base, size, kind: AllocKind::ModuleVariable, device, context, site: SiteId::UNKNOWN })
            .is_ok(),
        Lookup::Live { alloc, .. } if alloc.kind == AllocKind::ModuleVariable && alloc.base == base => false,
        _ => return false,
    };
    with(|v| {
        v.names.insert(base, name.to_string());
        let all = v.by_name.entry(name.to_string()).or_default();
        if !all.contains(&(base, size)) {
            all.push((base, size));
        }
    });
    new
}

/// The program (or cudart) asked the driver for a variable itself: its name is known too.
pub fn learned(base: u64, size: u64, name: Option<&str>) {
    let (context, device) = current_context();
    match name {
        Some(n) => {
            register(base, size, n, context, device);
        }
        None => {
            let st = state();
            if matches!(st.registry.lookup(base), Lookup::Outside { .. }) {
                let kind = AllocKind::ModuleVariable;
                let _ = st.registry.insert(NewAlloc { base, size, kind, device, context, site: SiteId::UNKNOWN });
            }
        }
    }
}

/// The name of the module variable `alloc` is, if gpusan knows it.
pub fn name_of(alloc: &Allocation) -> Option<String> {
    if alloc.kind != AllocKind::ModuleVariable {
        return None;
    }
    with(|v| v.names.get(&alloc.base).cloned())
}

/// (base, size) of the variable called `name`, resolving the loaded modules if needed;
/// `None` unless every variable of that name has the same size (never a guess).
pub fn by_name(name: &str) -> Option<(u64, u64)> {
    let find = || {
        with(|v| {
            let all = v.by_name.get(name)?;
            let first = *all.first()?;
            all.iter().all(|&(_, size)| size == first.1).then_some(first)
        })
    };
    find().or_else(|| {
        resolve();
        find()
    })
}
