//! Modules and libraries: loads go through the routes (`routes::load_module`: instrumented
//! in place when the mode asks for it); asking for a module variable's address makes its
//! exact bounds known; the function lookups are only watched.

// Handlers mirror the driver functions they stand for, arguments and all.
#![allow(clippy::too_many_arguments)]

use std::ffi::{c_char, c_int, c_void, CStr};

use crate::driver::hook::hooks;
use crate::driver::{CUdeviceptr, CUfunction, CUkernel, CUlibrary, CUmodule, CUresult, Loaded, CUDA_SUCCESS};
use crate::routes::load_module;
use crate::state::quietly;

hooks! {
    // Module loads: replaced by instrumented builds when the mode instruments kernels.
    fn cuModuleLoadData(module: *mut CUmodule, image: *const c_void) => |real| module_load_data(real, module, image);
    fn cuModuleLoadDataEx(module: *mut CUmodule, image: *const c_void, n: u32, options: *mut c_int, values: *mut *mut c_void)
        => |real| module_load_data_ex(real, module, image, n, options, values);
    fn cuModuleLoadFatBinary(module: *mut CUmodule, fatbin: *const c_void) => |real| module_load_fat_binary(real, module, fatbin);
    fn cuLibraryLoadData(lib: *mut CUlibrary, code: *const c_void, jo: *mut c_int, jv: *mut *mut c_void, njo: u32, lo: *mut c_int, lv: *mut *mut c_void, nlo: u32)
        => |real| library_load_data(real, lib, code, jo, jv, njo, lo, lv, nlo);
    // Loads from a file (cudart's `cudaLibraryLoadFromFile`, programs that keep cubins or PTX
    // in files): read, and loaded like data when substituted.
    fn cuModuleLoad(module: *mut CUmodule, path: *const c_char) => |real| module_load_file(real, module, path);
    fn cuLibraryLoadFromFile(lib: *mut CUlibrary, path: *const c_char, jo: *mut c_int, jv: *mut *mut c_void, njo: u32, lo: *mut c_int, lv: *mut *mut c_void, nlo: u32)
        => |real| library_load_file(real, lib, path, jo, jv, njo, lo, lv, nlo);

    // Module variables: their bounds become known when the program asks for their address.
    fn cuLibraryGetGlobal(dptr: *mut CUdeviceptr, bytes: *mut usize, lib: CUlibrary, name: *const c_char)
        => |real| library_get_global(real, dptr, bytes, lib, name);
    fn cuModuleGetGlobal_v2(dptr: *mut CUdeviceptr, bytes: *mut usize, module: CUmodule, name: *const c_char)
        => |real| module_get_global(real, dptr, bytes, module, name);

    // Launches reach the substituted modules' kernels by construction; the lookups say
    // which module each handle the program launches belongs to (the report's coverage).
    fn cuModuleGetFunction(f: *mut CUfunction, module: CUmodule, name: *const c_char)
        => |real| looked_up(real(f, module, name), f as *mut usize, Loaded::Module(module as usize), name);
    fn cuLibraryGetKernel(k: *mut CUkernel, lib: CUlibrary, name: *const c_char)
        => |real| looked_up(real(k, lib, name), k as *mut usize, Loaded::Library(lib as usize), name);
    fn cuKernelGetFunction(f: *mut CUfunction, k: CUkernel) => |real| kernel_function(real(f, k), f, k);
    // Unloads: the handles go back to the driver, which hands them out again.
    fn cuModuleUnload(module: CUmodule) => |real| unloading(Loaded::Module(module as usize), || real(module));
    fn cuLibraryUnload(lib: CUlibrary) => |real| unloading(Loaded::Library(lib as usize), || real(lib));
}

/// The program unloads `module`. Forgotten before the driver frees the handle: once freed,
/// another thread's load may get the same handle (XLA loads and unloads autotuning
/// candidates from several threads), and the binary route records its patching of that new
/// module during the load; forgetting after could drop that record, and the new module's
/// kernels would read as unchecked. (This did not explain JAX's unchecked autotuning
/// modules on the H100: see bench/results/h100-issue14/README.md, run 5.) An unload the
/// driver refuses names no module of ours.
fn unloading(module: Loaded, real: impl FnOnce() -> CUresult) -> CUresult {
    quietly(|| {
        crate::routes::coverage::unloaded(module);
        crate::routes::window::unloaded(module);
    });
    real()
}

/// The program got `*handle` for kernel `name` of `module`.
unsafe fn looked_up(r: CUresult, handle: *mut usize, module: Loaded, name: *const c_char) -> CUresult {
    if r == CUDA_SUCCESS && !handle.is_null() && !name.is_null() {
        let name = CStr::from_ptr(name).to_string_lossy();
        quietly(|| crate::routes::coverage::function(*handle, module, &name));
    }
    r
}

/// The program got `*f`, kernel `k` in the current context.
unsafe fn kernel_function(r: CUresult, f: *mut CUfunction, k: CUkernel) -> CUresult {
    if r == CUDA_SUCCESS && !f.is_null() {
        quietly(|| crate::routes::coverage::same_as(*f as usize, k as usize));
    }
    r
}

// ---- module loads (kernel substitution) ------------------------------------------------

unsafe fn module_load_data(
    real: unsafe extern "C" fn(*mut CUmodule, *const c_void) -> CUresult,
    module: *mut CUmodule,
    image: *const c_void,
) -> CUresult {
    load_module(image, |i| real(module, i), || Loaded::Module(*module as usize))
}

unsafe fn module_load_data_ex(
    real: unsafe extern "C" fn(*mut CUmodule, *const c_void, u32, *mut c_int, *mut *mut c_void) -> CUresult,
    module: *mut CUmodule,
    image: *const c_void,
    n: u32,
    options: *mut c_int,
    values: *mut *mut c_void,
) -> CUresult {
    load_module(image, |i| real(module, i, n, options, values), || Loaded::Module(*module as usize))
}

unsafe fn module_load_fat_binary(
    real: unsafe extern "C" fn(*mut CUmodule, *const c_void) -> CUresult,
    module: *mut CUmodule,
    image: *const c_void,
) -> CUresult {
    load_module(image, |i| real(module, i), || Loaded::Module(*module as usize))
}

unsafe fn library_load_data(
    real: unsafe extern "C" fn(
        *mut CUlibrary,
        *const c_void,
        *mut c_int,
        *mut *mut c_void,
        u32,
        *mut c_int,
        *mut *mut c_void,
        u32,
    ) -> CUresult,
    lib: *mut CUlibrary,
    code: *const c_void,
    jo: *mut c_int,
    jv: *mut *mut c_void,
    njo: u32,
    lo: *mut c_int,
    lv: *mut *mut c_void,
    nlo: u32,
) -> CUresult {
    load_module(code, |i| real(lib, i, jo, jv, njo, lo, lv, nlo), || Loaded::Library(*lib as usize))
}

/// The contents of the module file at `path`, NUL-terminated (PTX is text), kept for the
/// life of the process: what gpusan learnt of the image (its variables, read lazily) points
/// into it. `None` when it cannot be read or is over 1 GiB: the driver then loads the file.
unsafe fn file_image(path: *const c_char) -> Option<&'static [u8]> {
    if path.is_null() {
        return None;
    }
    quietly(|| {
        let p = std::path::Path::new(std::ffi::OsStr::from_encoded_bytes_unchecked(CStr::from_ptr(path).to_bytes()));
        if std::fs::metadata(p).ok()?.len() > 1 << 30 {
            return None;
        }
        let mut bytes = std::fs::read(p).ok()?;
        bytes.push(0);
        Some(&*Box::leak(bytes.into_boxed_slice()))
    })
    .flatten()
}

unsafe fn module_load_file(
    real: unsafe extern "C" fn(*mut CUmodule, *const c_char) -> CUresult,
    module: *mut CUmodule,
    path: *const c_char,
) -> CUresult {
    let (Some(image), Some(load_data)) = (file_image(path), crate::driver::real::cuModuleLoadData()) else {
        return real(module, path);
    };
    let own = image.as_ptr() as *const c_void;
    // The program's own module is loaded from its file, as it asked.
    load_module(
        own,
        |i| if i == own { real(module, path) } else { load_data(module, i) },
        || Loaded::Module(*module as usize),
    )
}

unsafe fn library_load_file(
    real: unsafe extern "C" fn(
        *mut CUlibrary,
        *const c_char,
        *mut c_int,
        *mut *mut c_void,
        u32,
        *mut c_int,
        *mut *mut c_void,
        u32,
    ) -> CUresult,
    lib: *mut CUlibrary,
    path: *const c_char,
    jo: *mut c_int,
    jv: *mut *mut c_void,
    njo: u32,
    lo: *mut c_int,
    lv: *mut *mut c_void,
    nlo: u32,
) -> CUresult {
    let (Some(image), Some(load_data)) = (file_image(path), crate::driver::real::cuLibraryLoadData()) else {
        return real(lib, path, jo, jv, njo, lo, lv, nlo);
    };
    let own = image.as_ptr() as *const c_void;
    load_module(
        own,
        |i| {
            if i == own {
                real(lib, path, jo, jv, njo, lo, lv, nlo)
            } else {
                load_data(lib, i, jo, jv, njo, lo, lv, nlo)
            }
        },
        || Loaded::Library(*lib as usize),
    )
}

// ---- module variables ----------------------------------------------------------------

/// The program asked where a module variable is (cudart does before `cudaMemcpyToSymbol`):
/// from now on its exact bounds are known, so copies past its end are caught.
unsafe fn learn_variable(r: CUresult, dptr: *mut CUdeviceptr, bytes: *mut usize, name: *const c_char) -> CUresult {
    if r == CUDA_SUCCESS && !dptr.is_null() && !bytes.is_null() {
        let (base, size) = (*dptr, *bytes as u64);
        let name = (!name.is_null()).then(|| CStr::from_ptr(name).to_string_lossy().into_owned());
        quietly(|| crate::variables::learned(base, size, name.as_deref()));
    }
    r
}

unsafe fn library_get_global(
    real: unsafe extern "C" fn(*mut CUdeviceptr, *mut usize, CUlibrary, *const c_char) -> CUresult,
    dptr: *mut CUdeviceptr,
    bytes: *mut usize,
    lib: CUlibrary,
    name: *const c_char,
) -> CUresult {
    learn_variable(real(dptr, bytes, lib, name), dptr, bytes, name)
}

unsafe fn module_get_global(
    real: unsafe extern "C" fn(*mut CUdeviceptr, *mut usize, CUmodule, *const c_char) -> CUresult,
    dptr: *mut CUdeviceptr,
    bytes: *mut usize,
    module: CUmodule,
    name: *const c_char,
) -> CUresult {
    learn_variable(real(dptr, bytes, module, name), dptr, bytes, name)
}
