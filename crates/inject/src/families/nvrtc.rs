//! NVRTC, the runtime compiler (CuPy's kernels, cuda.core's `Program`, PyTorch's jiterator):
//! its PTX is handed out instrumented, and a program that asks for a cubin gets one built
//! from the instrumented PTX.
//!
//! A program asks for a cubin by compiling for a real architecture (`-arch=sm_90`): NVRTC
//! then makes machine code and no PTX. So the stand-in compiles for the matching virtual
//! architecture (`compute_90`) instead — one compilation, as the program asked, with its
//! source, headers, name expressions and other options — and hands out the instrumented PTX
//! in the cubin's place ([`cubin_of`] says why that is safe; relocatable PTX is linked into a
//! cubin with the driver's linker, `routes::built`). Whatever fails on the
//! way (the compilation for the virtual architecture, the pass, the link, no context to
//! link in) gives the program exactly what NVRTC would have: the cubin of its own options,
//! listed unchecked with the reason when it is loaded. LTO-IR (`-dlto`) and relocatable
//! cubins (`-rdc` for a real architecture) are left as they are, unchecked: a later link
//! step would need them as NVRTC makes them.
//!
//! One NVRTC library per process is followed: the first one loaded (`driver::resolve`).

// Handlers mirror the functions they stand for, arguments and all.
#![allow(clippy::too_many_arguments)]

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::Mutex;

use gpusan_runtime::built::Origin;
use gpusan_runtime::locks;
use gpusan_runtime::per_process::PerProcess;

use crate::driver::hook::hooks;
use crate::driver::{typed, CUresult};
use crate::routes::{built, substitute};
use crate::state::{quietly, state};

/// `nvrtcProgram`.
type Program = *mut c_void;
/// `nvrtcResult`: an enum, an `int` in the ABI (as `CUresult` is).
const NVRTC_SUCCESS: CUresult = 0;

hooks! {
    fn nvrtcCreateProgram(prog: *mut Program, src: *const c_char, name: *const c_char, headers: c_int, contents: *const *const c_char, names: *const *const c_char)
        => |real| create_program(real, prog, src, name, headers, contents, names);
    fn nvrtcAddNameExpression(prog: Program, expr: *const c_char) => |real| add_name_expression(real, prog, expr);
    fn nvrtcCompileProgram(prog: Program, n: c_int, options: *const *const c_char) => |real| compile_program(real, prog, n, options);
    fn nvrtcGetPTXSize(prog: Program, size: *mut usize) => |real| get_size(real, prog, size, Output::Ptx);
    fn nvrtcGetPTX(prog: Program, out: *mut c_char) => |real| get(real, prog, out, Output::Ptx);
    fn nvrtcGetCUBINSize(prog: Program, size: *mut usize) => |real| get_size(real, prog, size, Output::Cubin);
    fn nvrtcGetCUBIN(prog: Program, out: *mut c_char) => |real| get(real, prog, out, Output::Cubin);
    fn nvrtcDestroyProgram(prog: *mut Program) => |real| destroy_program(real, prog);
}

/// What the program made the program of, kept to compile it again as asked when gpusan's
/// build fails.
#[derive(Default)]
struct Source {
    text: CString,
    name: Option<CString>,
    headers: Vec<(Option<CString>, Option<CString>)>,
    name_expressions: Vec<CString>,
}

/// A program's PTX as instrumented: the text (NUL-terminated), its metadata, and its cache
/// key when the text is the cache's (not made weak for a relocatable program).
#[derive(Clone)]
struct Ptx {
    text: Vec<u8>,
    meta: gpusan_passes::meta::ModuleMeta,
    key: Option<String>,
}

#[derive(Default)]
struct Compiled {
    source: Source,
    /// The program's options, when gpusan compiled for the virtual architecture instead of
    /// the real one they name (`Some`: the program expects a cubin).
    wants_cubin: Option<Vec<CString>>,
    /// The target of that cubin (90 for `sm_90`), when it names a plain one.
    target: Option<u32>,
    /// Relocatable PTX: its ABI variables are declared weak.
    relocatable: bool,
    /// Why the cubin NVRTC makes of the program's own options is what it gets.
    unchecked: Option<String>,
    /// The instrumented PTX, or why there is none; made on first request.
    ptx: Option<Result<Ptx, String>>,
    cubin: Option<Vec<u8>>,
}

static PROGRAMS: PerProcess<Mutex<Option<HashMap<usize, Compiled>>>> = PerProcess::new(|| Mutex::new(None));

fn programs<R>(f: impl FnOnce(&mut HashMap<usize, Compiled>) -> R) -> R {
    f(locks::lock(PROGRAMS.get()).get_or_insert_with(HashMap::new))
}

fn substituting() -> bool {
    state().options.mode.instruments_kernels()
}

unsafe fn owned(p: *const c_char) -> Option<CString> {
    (!p.is_null()).then(|| CStr::from_ptr(p).to_owned())
}

unsafe fn create_program(
    real: unsafe extern "C" fn(
        *mut Program,
        *const c_char,
        *const c_char,
        c_int,
        *const *const c_char,
        *const *const c_char,
    ) -> CUresult,
    prog: *mut Program,
    src: *const c_char,
    name: *const c_char,
    headers: c_int,
    contents: *const *const c_char,
    names: *const *const c_char,
) -> CUresult {
    let r = real(prog, src, name, headers, contents, names);
    if r == NVRTC_SUCCESS && !prog.is_null() && !src.is_null() {
        quietly(|| {
            let at = |list: *const *const c_char, i: usize| if list.is_null() { None } else { owned(*list.add(i)) };
            let source = Source {
                text: CStr::from_ptr(src).to_owned(),
                name: owned(name),
                headers: (0..headers.max(0) as usize).map(|i| (at(contents, i), at(names, i))).collect(),
                name_expressions: Vec::new(),
            };
            programs(|p| p.insert(*prog as usize, Compiled { source, ..Compiled::default() }));
        });
    }
    r
}

unsafe fn add_name_expression(
    real: unsafe extern "C" fn(Program, *const c_char) -> CUresult,
    prog: Program,
    expr: *const c_char,
) -> CUresult {
    let r = real(prog, expr);
    if r == NVRTC_SUCCESS {
        quietly(|| {
            if let Some(e) = owned(expr) {
                programs(|p| p.get_mut(&(prog as usize)).map(|c| c.source.name_expressions.push(e)));
            }
        });
    }
    r
}

/// How the stand-in compiles a program the program compiles with `options`.
#[derive(Debug, PartialEq, Eq)]
pub struct Plan {
    /// The options to compile with; `None`: the program's own, unchanged.
    pub options: Option<Vec<String>>,
    /// The real architecture the program asked for, as a target number when plain.
    pub cubin_target: Option<Option<u32>>,
    pub relocatable: bool,
}

/// Decides how to compile: a real architecture (`-arch=sm_90`, `--gpu-architecture sm_90a`)
/// becomes its virtual one, unless LTO-IR or a relocatable cubin is asked for.
pub fn plan(options: &[String]) -> Plan {
    let flag = |o: &str, names: &[&str]| {
        names.iter().any(|n| o == *n || o.strip_prefix(n).is_some_and(|r| r.starts_with('=')))
    };
    let relocatable = options.iter().any(|o| {
        o == "-dc"
            || o == "-rdc=true"
            || o == "--relocatable-device-code=true"
            || (o == "-rdc" || o == "--relocatable-device-code") // the value follows
    });
    let lto = options.iter().any(|o| flag(o, &["-dlto", "--dlink-time-opt", "-dlink-time-opt"]));
    // The architecture: `-arch=X`, `--gpu-architecture=X`, or either followed by `X`.
    let mut out = options.to_vec();
    let mut real = None;
    let mut i = 0;
    while i < out.len() {
        let o = out[i].clone();
        let (value_at, value) =
            if let Some(v) = ["-arch=", "--gpu-architecture="].iter().find_map(|p| o.strip_prefix(p)) {
                (i, v.to_string())
            } else if (o == "-arch" || o == "--gpu-architecture") && i + 1 < out.len() {
                (i + 1, out[i + 1].clone())
            } else {
                i += 1;
                continue;
            };
        if let Some(arch) = value.strip_prefix("sm_") {
            real = Some(arch.parse::<u32>().ok());
            out[value_at] = out[value_at].replacen(&value, &format!("compute_{arch}"), 1);
        }
        i = value_at + 1;
    }
    match real {
        Some(target) if !lto && !relocatable => Plan { options: Some(out), cubin_target: Some(target), relocatable },
        _ => Plan { options: None, cubin_target: None, relocatable },
    }
}

unsafe fn compile_program(
    real: unsafe extern "C" fn(Program, c_int, *const *const c_char) -> CUresult,
    prog: Program,
    n: c_int,
    options: *const *const c_char,
) -> CUresult {
    let given: Vec<String> = if options.is_null() {
        Vec::new()
    } else {
        (0..n.max(0) as usize)
            .filter_map(|i| owned(*options.add(i)))
            .map(|c| c.to_string_lossy().into_owned())
            .collect()
    };
    let known = quietly(|| programs(|p| p.contains_key(&(prog as usize)))).unwrap_or(false);
    let plan = (known && substituting()).then(|| plan(&given));
    let Some(Plan { options: Some(virtual_options), cubin_target: Some(target), relocatable }) = plan else {
        let r = real(prog, n, options);
        if r == NVRTC_SUCCESS {
            let relocatable = plan.is_some_and(|p| p.relocatable);
            quietly(|| programs(|p| p.get_mut(&(prog as usize)).map(|c| c.relocatable = relocatable)));
        }
        return r;
    };
    let c_options: Vec<CString> = virtual_options.iter().filter_map(|o| CString::new(o.as_str()).ok()).collect();
    let pointers: Vec<*const c_char> = c_options.iter().map(|c| c.as_ptr()).collect();
    let r = real(prog, pointers.len() as c_int, pointers.as_ptr());
    if r != NVRTC_SUCCESS {
        // The program gets what its own options give.
        let why = format!("NVRTC could not compile the program for a virtual architecture (error {r})");
        quietly(|| programs(|p| p.get_mut(&(prog as usize)).map(|c| c.unchecked = Some(why))));
        return real(prog, n, options);
    }
    let own: Vec<CString> = given.iter().filter_map(|o| CString::new(o.as_str()).ok()).collect();
    quietly(|| {
        programs(|p| {
            p.get_mut(&(prog as usize)).map(|c| {
                c.wants_cubin = Some(own);
                c.unchecked = None;
                c.target = target;
                c.relocatable = relocatable;
                c.ptx = None;
                c.cubin = None;
            })
        })
    });
    r
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Output {
    Ptx,
    Cubin,
}

/// The bytes gpusan hands out for `prog`'s `output`, made on first request; `None`: the
/// real function answers.
unsafe fn output_of(prog: Program, output: Output) -> Option<Vec<u8>> {
    quietly(|| {
        let (wants_cubin, relocatable, have) = programs(|p| {
            let c = p.get(&(prog as usize))?;
            let have = match output {
                Output::Ptx => c.ptx.clone().map(|r| r.ok().map(|p| p.text)),
                Output::Cubin => c.cubin.clone().map(Some),
            };
            Some((c.wants_cubin.is_some(), c.relocatable, have))
        })?;
        if let Some(have) = have {
            return have;
        }
        if !substituting() || (output == Output::Cubin && !wants_cubin) {
            return None;
        }
        let ptx = instrumented_ptx(prog, relocatable);
        programs(|p| p.get_mut(&(prog as usize)).map(|c| c.ptx = Some(ptx.clone())));
        if let (Output::Ptx, Ok(p)) = (output, &ptx) {
            // Loaded as it is later: its records name lines of the PTX before instrumenting.
            built::record(&p.text[..p.text.len() - 1], Origin::Nvrtc, &p.meta, None);
        }
        match output {
            Output::Ptx => ptx.ok().map(|p| p.text),
            Output::Cubin => {
                let cubin = cubin_of(prog, ptx);
                programs(|p| p.get_mut(&(prog as usize)).map(|c| c.cubin = cubin.clone()));
                cubin
            }
        }
    })
    .flatten()
}

/// The program's PTX from NVRTC, instrumented, or why not.
unsafe fn instrumented_ptx(prog: Program, relocatable: bool) -> Result<Ptx, String> {
    let (Some(size_of), Some(get)) = (
        typed::<unsafe extern "C" fn(Program, *mut usize) -> CUresult>(
            nvrtcGetPTXSize::REAL.driver(c"nvrtcGetPTXSize"),
        ),
        typed::<unsafe extern "C" fn(Program, *mut c_char) -> CUresult>(nvrtcGetPTX::REAL.driver(c"nvrtcGetPTX")),
    ) else {
        return Err("NVRTC has no nvrtcGetPTX".into());
    };
    let mut size = 0usize;
    if size_of(prog, &mut size) != NVRTC_SUCCESS || size == 0 {
        return Err("NVRTC gave no PTX".into());
    }
    let mut buf = vec![0u8; size];
    if get(prog, buf.as_mut_ptr() as *mut c_char) != NVRTC_SUCCESS {
        return Err("NVRTC gave no PTX".into());
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    let ptx = std::str::from_utf8(&buf[..end]).map_err(|_| "NVRTC's PTX is not text".to_string())?;
    let done = substitute::instrument_ptx(ptx, state().options.mode)?;
    let (mut text, key) = if relocatable {
        (gpusan_passes::weak_abi(std::str::from_utf8(&done.text).unwrap_or_default()).into_bytes(), None)
    } else {
        (done.text, Some(done.key))
    };
    text.push(0);
    Ok(Ptx { text, meta: done.meta, key })
}

/// The "cubin" for a program compiled for the virtual architecture in its stead: the
/// instrumented PTX itself, else compiled again as the program asked.
///
/// Every loader a program hands NVRTC's cubin to (`cuModuleLoadData`, `cuModuleLoad`,
/// `cuLibraryLoadData`, as CuPy, cuda.core and PyTorch's jiterator do) takes PTX as well, and
/// the driver JIT-compiles it once, as the PTX route does: a cubin built here would be a
/// second compilation of every kernel on a first run (measured on the H100: 53 ms added per
/// kernel against the PTX route's 22, `bench/results/h100-issue13/cupy-start-run2.json`).
/// Relocatable PTX (`-rdc`) is still linked into a real cubin: a link step may follow.
unsafe fn cubin_of(prog: Program, ptx: Result<Ptx, String>) -> Option<Vec<u8>> {
    let target = programs(|p| p.get(&(prog as usize)).and_then(|c| c.target));
    let built = ptx.and_then(|ptx| {
        let body = &ptx.text[..ptx.text.len() - 1];
        if ptx.key.is_some() {
            // Loaded as it is later, as PTX asked for with nvrtcGetPTX is.
            built::record(body, Origin::Nvrtc, &ptx.meta, None);
            return Ok(ptx.text);
        }
        let cubin = built::link(&ptx.text, target, built::Optimization::Full)?;
        built::record(&cubin, Origin::Nvrtc, &ptx.meta, None);
        Ok(cubin)
    });
    match built {
        Ok(cubin) => Some(cubin),
        Err(why) => {
            let own = own_cubin(prog)?;
            built::record_unchecked(&own, format!("NVRTC cubin not instrumented: {why}"));
            Some(own)
        }
    }
}

/// The cubin NVRTC makes of the program with the program's own options: a second program
/// of the same source, headers and name expressions.
unsafe fn own_cubin(prog: Program) -> Option<Vec<u8>> {
    type Create = unsafe extern "C" fn(
        *mut Program,
        *const c_char,
        *const c_char,
        c_int,
        *const *const c_char,
        *const *const c_char,
    ) -> CUresult;
    let create = typed::<Create>(nvrtcCreateProgram::REAL.driver(c"nvrtcCreateProgram"))?;
    let add = typed::<unsafe extern "C" fn(Program, *const c_char) -> CUresult>(
        nvrtcAddNameExpression::REAL.driver(c"nvrtcAddNameExpression"),
    );
    let compile = typed::<unsafe extern "C" fn(Program, c_int, *const *const c_char) -> CUresult>(
        nvrtcCompileProgram::REAL.driver(c"nvrtcCompileProgram"),
    )?;
    let size_of = typed::<unsafe extern "C" fn(Program, *mut usize) -> CUresult>(
        nvrtcGetCUBINSize::REAL.driver(c"nvrtcGetCUBINSize"),
    )?;
    let get =
        typed::<unsafe extern "C" fn(Program, *mut c_char) -> CUresult>(nvrtcGetCUBIN::REAL.driver(c"nvrtcGetCUBIN"))?;
    let destroy = typed::<unsafe extern "C" fn(*mut Program) -> CUresult>(
        nvrtcDestroyProgram::REAL.driver(c"nvrtcDestroyProgram"),
    )?;
    let (text, name, headers, exprs, options) = programs(|p| {
        let c = p.get(&(prog as usize))?;
        let s = &c.source;
        Some((s.text.clone(), s.name.clone(), s.headers.clone(), s.name_expressions.clone(), c.wants_cubin.clone()?))
    })?;
    let ptr = |c: &Option<CString>| c.as_ref().map_or(std::ptr::null(), |c| c.as_ptr());
    let contents: Vec<*const c_char> = headers.iter().map(|(c, _)| ptr(c)).collect();
    let names: Vec<*const c_char> = headers.iter().map(|(_, n)| ptr(n)).collect();
    let opts: Vec<*const c_char> = options.iter().map(|o| o.as_ptr()).collect();
    let mut second: Program = std::ptr::null_mut();
    let list = |v: &Vec<*const c_char>| if v.is_empty() { std::ptr::null() } else { v.as_ptr() };
    if create(&mut second, text.as_ptr(), ptr(&name), headers.len() as c_int, list(&contents), list(&names))
        != NVRTC_SUCCESS
    {
        return None;
    }
    if let Some(add) = add {
        for e in &exprs {
            add(second, e.as_ptr());
        }
    }
    let mut cubin = None;
    let mut size = 0usize;
    if compile(second, opts.len() as c_int, list(&opts)) == NVRTC_SUCCESS && size_of(second, &mut size) == NVRTC_SUCCESS
    {
        let mut buf = vec![0u8; size];
        if get(second, buf.as_mut_ptr() as *mut c_char) == NVRTC_SUCCESS {
            cubin = Some(buf);
        }
    }
    destroy(&mut second);
    cubin
}

unsafe fn get_size(
    real: unsafe extern "C" fn(Program, *mut usize) -> CUresult,
    prog: Program,
    size: *mut usize,
    output: Output,
) -> CUresult {
    match output_of(prog, output) {
        Some(bytes) if !size.is_null() => {
            *size = bytes.len();
            NVRTC_SUCCESS
        }
        _ => real(prog, size),
    }
}

unsafe fn get(
    real: unsafe extern "C" fn(Program, *mut c_char) -> CUresult,
    prog: Program,
    out: *mut c_char,
    output: Output,
) -> CUresult {
    match output_of(prog, output) {
        Some(bytes) if !out.is_null() => {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), out as *mut u8, bytes.len());
            NVRTC_SUCCESS
        }
        _ => {
            let r = real(prog, out);
            if r == NVRTC_SUCCESS && output == Output::Cubin && !out.is_null() {
                quietly(|| note_own_cubin(prog, out));
            }
            r
        }
    }
}

/// The program's own cubin, when gpusan meant to build one and could not: the reason
/// goes into the report when it is loaded.
unsafe fn note_own_cubin(prog: Program, out: *mut c_char) {
    let Some(why) = programs(|p| p.get(&(prog as usize)).and_then(|c| c.unchecked.clone())) else { return };
    let size_of = typed::<unsafe extern "C" fn(Program, *mut usize) -> CUresult>(
        nvrtcGetCUBINSize::REAL.driver(c"nvrtcGetCUBINSize"),
    );
    let mut size = 0usize;
    if size_of.is_some_and(|f| f(prog, &mut size) == NVRTC_SUCCESS) {
        built::record_unchecked(std::slice::from_raw_parts(out as *const u8, size), why);
    }
}

unsafe fn destroy_program(real: unsafe extern "C" fn(*mut Program) -> CUresult, prog: *mut Program) -> CUresult {
    if !prog.is_null() {
        let p = *prog as usize;
        quietly(|| programs(|m| m.remove(&p)));
    }
    real(prog)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn a_real_architecture_is_compiled_for_its_virtual_one() {
        let p = plan(&s(&["-arch=sm_90", "-lineinfo"]));
        assert_eq!(p.options, Some(s(&["-arch=compute_90", "-lineinfo"])));
        assert_eq!(p.cubin_target, Some(Some(90)));
        let p = plan(&s(&["--gpu-architecture", "sm_90a", "-std=c++17"]));
        assert_eq!(p.options, Some(s(&["--gpu-architecture", "compute_90a", "-std=c++17"])));
        assert_eq!(p.cubin_target, Some(None), "sm_90a names no plain target");
        assert_eq!(plan(&s(&["--gpu-architecture=sm_80"])).options, Some(s(&["--gpu-architecture=compute_80"])));
    }

    #[test]
    fn ptx_lto_and_relocatable_cubins_are_left_as_asked() {
        for opts in [
            &["-arch=compute_90"][..],
            &[],
            &["-arch=sm_90", "-dlto"],
            &["-arch=sm_90", "-rdc=true"],
            &["-dc", "-arch", "sm_90"],
        ] {
            let p = plan(&s(opts));
            assert_eq!((p.options, p.cubin_target), (None, None), "{opts:?}");
        }
        assert!(plan(&s(&["-arch=compute_90", "--relocatable-device-code=true"])).relocatable);
    }
}
