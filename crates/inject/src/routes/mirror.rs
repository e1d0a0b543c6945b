//! The runtime's half of the device ABI ([`gpusan_runtime::device_abi`]): the allocation
//! table and the error buffer on the GPU, their addresses set into every module that
//! declares the ABI variables, the table re-uploaded before a launch when the registry
//! changed, and new error records drained into reports at synchronizations.
//!
//! Nothing here runs unless a module declared the ABI: programs whose kernels are not
//! instrumented pay one failed symbol lookup per module load and nothing per launch.
//!
//! Ordering: uploads are complete before the launch that needs them is made, so a kernel
//! never starts with a table older than the allocations made before its launch.
//!
//! Stream capture: every driver call here goes through [`crate::capture`], so none can
//! invalidate a capture the program has going (cudart loads a module at the first launch
//! of one of its kernels, which may be a captured launch). A module loaded during a
//! capture gets its error buffer and variables at once; the table upload waits for the
//! next launch that runs (a captured launch runs with its graph, whose launch uploads).
//!
//! Table memory ([`super::table_memory`]): a virtual range reserved once per context and
//! mapped as the table grows, so the table keeps its address and modules are pointed at it
//! once; where the driver's virtual memory management fails, `cuMemAlloc` buffers that
//! move the table when outgrown (modules re-pointed, outgrown buffers kept).
//!
//! One table and one error buffer per context: a module's kernels run on its context's
//! device, which need not reach another device's memory. A library (`cuLibraryLoad*`, as
//! cudart loads a program's kernels) is loaded by the driver into every context its kernels
//! run in, with its variables in each: every context's copy is pointed at that context's
//! buffers, at the context's first launch after the library loaded.
//!
//! Locks: the map of contexts is locked only to find or insert a context's entry or read
//! the list of libraries, never across a driver call; each context's entry has a lock of
//! its own, held across its uploads. The order is a context's lock, then the map's
//! ([`point_libraries`] reads the list with its context locked); nothing takes them the
//! other way round. So a launch waits only for an upload to its own context's table, which it
//! needs anyway, never for another context's (another GPU's, another tenant's) copies,
//! and a drain reports (symbolizes, writes) with no lock of this module held. The table is device memory; the
//! error buffer is pinned host memory mapped into the device where the driver allows
//! (see [`call_host_alloc`]), device memory otherwise. A launch
//! brings the table of the calling thread's current context up to date; a drain reads the
//! error buffers of all contexts. Module numbers are unique across contexts.

use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use gpusan_abi::record::{self, ErrorBufferHeader, ERROR_CAPACITY};
use gpusan_abi::table::{self, table_bytes};
use gpusan_abi::{RuntimeVar, ERRORS_SYMBOL, MODULE_SYMBOL, RUNTIME_VARS, TABLE_SYMBOL};
use gpusan_passes::meta::ModuleMeta;
use gpusan_runtime::device_abi::{ErrorRecord, SourceLines};
use gpusan_runtime::locks;
use gpusan_runtime::per_process::PerProcess;
use gpusan_runtime::registry::{DeviceTable, TableShape};

use crate::capture::{self, dtoh, global_of, htod};
use crate::driver::{current_context, real, Loaded, CUDA_SUCCESS};
use crate::routes::table_memory::TableMemory;
use crate::state::state;

struct AbiModule {
    /// Where its ABI variables are: in a module that declares them, or in the params block
    /// of one kernel the binary route patched (`super::binary`).
    target: Target,
    id: u32,
    /// What its records name; shared, so a drain reports with no lock held.
    info: Arc<ModuleInfo>,
}

#[derive(Clone, Copy)]
enum Target {
    Variables(Loaded),
    /// A patched kernel's params block (`gpusan_abi::binary`), and what its count of
    /// accesses to memory in no entry was when last read.
    Params {
        block: u64,
        untracked: u64,
    },
}

impl Target {
    fn loaded(&self) -> Option<Loaded> {
        match self {
            Target::Variables(l) => Some(*l),
            Target::Params { .. } => None,
        }
    }
}

struct ModuleInfo {
    /// Functions defined by the module in number order: `ErrorRecord::function` indexes it.
    names: Vec<String>,
    /// Its records carry SASS offsets where PTX lines would be (the binary route's).
    sass: bool,
    /// PTX line → CUDA source line, from the module's `.loc` directives (its metadata).
    lines: SourceLines,
    label: String,
}

struct Abi {
    /// The context's device, where its kernels run.
    device: i32,
    table: DeviceTable,
    memory: TableMemory,
    /// The last update found no room: the device table misses changes `table` has taken in.
    behind: bool,
    errors_ptr: u64,
    /// The error buffer as the host sees it, when it is pinned host memory mapped into the
    /// device: a drain then reads it in place instead of copying it back.
    errors_host: Option<usize>,
    drained: u32,
    not_stored: u64,
    modules: Vec<AbiModule>,
    /// How many of the process's ABI libraries ([`Contexts::libraries`]) were pointed here.
    libraries: usize,
}

/// One context's state: [`Abi`] under its lock (held across uploads, which are driver
/// calls), and what a patched kernel's first launch needs without that lock (it runs inside
/// the driver, which may be what an upload waits for): the table's and error buffer's
/// addresses, and the params blocks made since the last time the lock was taken.
struct Ctx {
    abi: Mutex<Abi>,
    /// `abi.memory.table()` as of the last upload (0 before the first).
    table: AtomicU64,
    errors: u64,
    /// Params blocks made by first launches, with the table address written into each;
    /// taken into `abi.modules` (re-pointed if the table moved since) under the lock.
    pending: Mutex<Vec<(AbiModule, u64)>>,
}

impl Ctx {
    fn new(abi: Abi) -> Ctx {
        let (table, errors) = (abi.memory.table(), abi.errors_ptr);
        Ctx { abi: Mutex::new(abi), table: AtomicU64::new(table), errors, pending: Mutex::new(Vec::new()) }
    }
}

/// Context → its table, error buffer and ABI modules.
#[derive(Default)]
struct Contexts {
    by_context: std::collections::HashMap<u64, Arc<Ctx>>,
    modules_numbered: u32,
    /// Libraries (`cuLibraryLoad*`, how cudart loads a program's kernels) that declare the
    /// ABI, in load order. The driver loads a library into each context its kernels run in,
    /// with variables of its own there: every context's copy is pointed at that context's
    /// buffers (at its next launch), not only the copy of the context that loaded it.
    libraries: Vec<(Loaded, u32, Arc<ModuleInfo>)>,
    /// Contexts whose table and error buffer could not be made at a launch for the
    /// libraries: not tried again at every launch (a driver call or two each).
    not_set_up: std::collections::HashSet<u64>,
    /// What contexts that went away counted: records not stored, table memory held, moves,
    /// untracked accesses of patched kernels.
    gone: (u64, u64, u64, u64),
    /// The largest table of a context that went away.
    gone_peak: TableShape,
}

static ABI: PerProcess<Mutex<Option<Contexts>>> = PerProcess::new(|| Mutex::new(None));
/// Set once a module declared the ABI: launches and syncs check nothing before that.
static ACTIVE: PerProcess<AtomicBool> = PerProcess::new(|| AtomicBool::new(false));
/// `Contexts::libraries.len()`, read by every launch without the map's lock.
static LIBRARIES: PerProcess<std::sync::atomic::AtomicUsize> =
    PerProcess::new(|| std::sync::atomic::AtomicUsize::new(0));

fn lock() -> MutexGuard<'static, Option<Contexts>> {
    locks::lock(ABI.get())
}

/// A context's [`Abi`], locked, with the params blocks first launches made meanwhile in its
/// modules (each pointed at the table again if the table moved after it was written).
fn lock_abi(ctx: &Ctx) -> MutexGuard<'_, Abi> {
    let mut abi = locks::lock(&ctx.abi);
    let pending = std::mem::take(&mut *locks::lock(&ctx.pending));
    for (m, table) in pending {
        if table != abi.memory.table() {
            // SAFETY: the module's params block, made in this context.
            unsafe { point(&abi, &m) };
        }
        abi.modules.push(m);
    }
    abi
}

/// The entry of `context`, if set up (the map's lock held only for the lookup).
fn entry(context: u64) -> Option<Arc<Ctx>> {
    lock().as_ref().and_then(|c| c.by_context.get(&context).cloned())
}

/// Every context's entry, for a drain or a count.
fn entries() -> Vec<Arc<Ctx>> {
    lock().as_ref().map(|c| c.by_context.values().cloned().collect()).unwrap_or_default()
}

unsafe fn call_alloc(bytes: usize) -> Option<u64> {
    let f = real::cuMemAlloc_v2()?;
    let mut p = 0u64;
    (capture::relaxed(|| f(&mut p, bytes)) == CUDA_SUCCESS).then_some(p)
}

/// Pinned host memory mapped into the current context's device (`cuMemHostAlloc` with
/// `DEVICEMAP`): its host address and the device address kernels use. A drain at every
/// synchronization then costs no copy back (a 16-byte `cuMemcpyDtoH` is some 10 µs, paid
/// at every `cudaDeviceSynchronize` of a program that synchronizes after each kernel).
/// Errors are rare, so the kernels' writes over the bus cost nothing in the common case.
unsafe fn call_host_alloc(bytes: usize) -> Option<(usize, u64)> {
    let (alloc, device) = (real::cuMemHostAlloc(), real::cuMemHostGetDevicePointer_v2());
    let (Some(alloc), Some(device)) = (alloc, device) else { return None };
    const PORTABLE: u32 = 1;
    const DEVICEMAP: u32 = 2;
    let mut host: *mut c_void = std::ptr::null_mut();
    if capture::relaxed(|| alloc(&mut host, bytes, PORTABLE | DEVICEMAP)) != CUDA_SUCCESS || host.is_null() {
        return None;
    }
    let mut dev = 0u64;
    // Not freed when this fails: a few hundred KiB, once per context.
    (capture::relaxed(|| device(&mut dev, host, 0)) == CUDA_SUCCESS && dev != 0).then_some((host as usize, dev))
}

/// Points one module's ABI variables at the buffers.
unsafe fn point(abi: &Abi, m: &AbiModule) {
    let loaded = match m.target {
        Target::Variables(loaded) => loaded,
        Target::Params { block, .. } => {
            // Table and error buffer only: the kernel number and start never change, and
            // the count of untracked accesses is the kernels'.
            let values = [abi.memory.table(), abi.errors_ptr];
            htod(block, values.as_ptr() as *const c_void, std::mem::size_of_val(&values));
            return;
        }
    };
    for RuntimeVar { name, bytes, .. } in RUNTIME_VARS {
        let value = match name {
            TABLE_SYMBOL => abi.memory.table(),
            ERRORS_SYMBOL => abi.errors_ptr,
            MODULE_SYMBOL => u64::from(m.id),
            _ => continue,
        };
        let width = bytes as usize;
        if let Some((addr, size)) = global_of(loaded, name) {
            if size >= width {
                // Little-endian: the low `width` bytes of the value are the variable's.
                htod(addr, &value as *const u64 as *const c_void, width);
            }
        }
    }
}

/// Uploads what changed in the table, after making room for it; when that moved the table
/// (its first placement, or the fallback's growth), every module is pointed at the new
/// address and the whole table uploaded.
unsafe fn upload(ctx: &Ctx, abi: &mut Abi) {
    let Some(range) = abi.table.update(&state().registry) else { return };
    let Some(placed) = abi.memory.fit(table_bytes(abi.table.entries().len() as u64)) else {
        abi.behind = true;
        return;
    };
    if placed.moved {
        for m in &abi.modules {
            point(abi, m);
        }
    }
    // First launches read it without the lock (`patched_kernel`); a block they write with
    // an older address is pointed again when it joins the modules (`lock_abi`).
    ctx.table.store(abi.memory.table(), Ordering::Release);
    let header = abi.table.header().to_bytes();
    let behind = std::mem::take(&mut abi.behind);
    let range = if placed.moved || behind { 0..abi.table.entries().len() } else { range };
    // The header and the changed entries in one copy when what lies between them is small:
    // each synchronous copy is some 10 µs in the launch that waits for it, and programs that
    // allocate before every launch (PolyBench's timed regions) pay it at each.
    if range.start <= ONE_COPY_ENTRIES {
        let mut bytes = Vec::with_capacity(table_bytes(range.end as u64) as usize);
        bytes.extend_from_slice(&header);
        bytes.extend_from_slice(abi.table.entry_bytes(0..range.end));
        htod(placed.table, bytes.as_ptr() as *const c_void, bytes.len());
        return;
    }
    htod(placed.table, header.as_ptr() as *const c_void, header.len());
    let bytes = abi.table.entry_bytes(range.clone());
    htod(placed.table + table::entry_offset(range.start as u64), bytes.as_ptr() as *const c_void, bytes.len());
}

/// Unchanged entries an upload may resend to save its second copy (64 KiB).
const ONE_COPY_ENTRIES: usize = 2048;

/// After a module loaded: if it declares the ABI, give it its number and the buffers.
/// `meta` says what its records' function numbers and PTX lines name; asked only then.
pub fn on_module_loaded(loaded: Loaded, meta: impl FnOnce() -> Option<ModuleMeta>) -> bool {
    if global_of(loaded, ERRORS_SYMBOL).is_none() {
        return false;
    }
    let ModuleMeta { functions: names, files, lines } = meta().unwrap_or_default();
    let lines = SourceLines::new(files, lines.iter().map(|e| (e.ptx_line, e.file, e.line)).collect());
    let Some(abi) = context_entry() else { return false };
    let id = next_module_number();
    let info = Arc::new(ModuleInfo { names, sass: false, lines, label: format!("module {id}") });
    add(&abi, AbiModule { target: Target::Variables(loaded), id, info: info.clone() });
    // Published after it joined this context's modules, so that this context, launching
    // meanwhile, does not point it twice.
    if let Loaded::Library(_) = loaded {
        let mut guard = lock();
        let libraries = &mut guard.get_or_insert_with(Contexts::default).libraries;
        libraries.push((loaded, id, info));
        LIBRARIES.get().store(libraries.len(), Ordering::Release);
    }
    true
}

/// Points the ABI libraries loaded since the context's last launch at its buffers (the
/// context current; its table placed). One already among its modules (loaded in it) is
/// skipped; one the driver cannot load here (unloaded since) is left.
unsafe fn point_libraries(abi: &mut Abi) {
    let known = LIBRARIES.get().load(Ordering::Acquire);
    if abi.libraries >= known {
        return;
    }
    let new: Vec<(Loaded, u32, Arc<ModuleInfo>)> =
        lock().as_ref().map(|c| c.libraries[abi.libraries.min(c.libraries.len())..].to_vec()).unwrap_or_default();
    abi.libraries += new.len();
    for (loaded, id, info) in new {
        if abi.modules.iter().any(|m| m.id == id) || global_of(loaded, ERRORS_SYMBOL).is_none() {
            continue;
        }
        let m = AbiModule { target: Target::Variables(loaded), id, info };
        point(abi, &m);
        abi.modules.push(m);
    }
}

/// The current context's entry, set up at its first module.
fn context_entry() -> Option<Arc<Ctx>> {
    let (context, device) = current_context();
    if let Some(abi) = entry(context) {
        return Some(abi);
    }
    // Set up with no lock held (driver calls); two threads setting up one context at once
    // keep the first entry (the other's buffers, some KiB, stay unused).
    let new = unsafe { set_up(device) }?;
    let mut guard = lock();
    let contexts = guard.get_or_insert_with(Contexts::default);
    Some(contexts.by_context.entry(context).or_insert_with(|| Arc::new(Ctx::new(new))).clone())
}

fn next_module_number() -> u32 {
    let mut guard = lock();
    let contexts = guard.get_or_insert_with(Contexts::default);
    contexts.modules_numbered += 1;
    contexts.modules_numbered
}

/// Points a new module at the buffers (the table brought up to date first) and keeps it.
fn add(ctx: &Ctx, m: AbiModule) {
    let mut abi = lock_abi(ctx);
    unsafe {
        if !capture::any() {
            upload(ctx, &mut abi);
        }
        point(&abi, &m);
    }
    abi.modules.push(m);
    ACTIVE.get().store(true, Ordering::Release);
}

/// A kernel the binary route patched, at its first launch in `context`: a module number of
/// its own (its records name it as function 0), and a params block (`gpusan_abi::binary`)
/// pointed at the context's table and error buffer. Called inside the Compute Sanitizer's
/// launch callback, where no driver call may be made: the context was set up before the
/// launch ([`before_launch`]), and `memory` allocates the block and writes it (ordered
/// before the launch) with the API's own calls. Returns the block's device address.
pub fn patched_kernel(context: u64, name: &str, function_pc: u32, memory: &dyn ParamsMemory) -> Option<u64> {
    use gpusan_abi::binary::{PARAMS_BYTES, PARAMS_ERRORS, PARAMS_FUNCTION_PC, PARAMS_KERNEL, PARAMS_TABLE};
    let ctx = entry(context)?;
    // Inside the driver's launch, which holds the driver's locks: another thread may hold
    // this context's lock across a synchronous table upload that waits for one of them
    // (seen on the H100: four PyTorch threads launching, pool blocks changing the table
    // before every launch). So the lock is not taken here: the block gets the addresses the
    // last upload left, and joins the modules the next time the lock is taken.
    let table = ctx.table.load(Ordering::Acquire);
    if table == 0 {
        return None;
    }
    let id = next_module_number();
    let block = memory.alloc(PARAMS_BYTES)?;
    let mut params = [0u8; PARAMS_BYTES];
    let mut put = |f: gpusan_abi::Field, bytes: &[u8]| params[f.offset..f.end()].copy_from_slice(bytes);
    put(PARAMS_TABLE, &table.to_le_bytes());
    put(PARAMS_ERRORS, &ctx.errors.to_le_bytes());
    put(PARAMS_KERNEL, &record::kernel(id, 0).to_le_bytes());
    put(PARAMS_FUNCTION_PC, &function_pc.to_le_bytes());
    if !memory.write(block, &params) {
        return None;
    }
    let names = vec![name.to_string()];
    let info = Arc::new(ModuleInfo { names, sass: true, lines: SourceLines::default(), label: format!("module {id}") });
    let m = AbiModule { target: Target::Params { block, untracked: 0 }, id, info };
    locks::lock(&ctx.pending).push((m, table));
    Some(block)
}

/// Device memory as the Compute Sanitizer's callbacks may use it (`sanitizerAlloc`,
/// `sanitizerMemcpyHostToDeviceAsync` on the launch's stream).
pub trait ParamsMemory {
    fn alloc(&self, bytes: usize) -> Option<u64>;
    /// Copies `bytes` to `dst` before the launch runs; the source may go at return.
    fn write(&self, dst: u64, bytes: &[u8]) -> bool;
    /// As [`ParamsMemory::write`], from bytes that live as long as the program (no copy of
    /// them need be kept for the asynchronous copy).
    fn write_static(&self, dst: u64, bytes: &'static [u8]) -> bool {
        self.write(dst, bytes)
    }
}

/// Accesses the binary route's patched kernels made to memory in no entry (counted, never
/// judged), all contexts: read back from their params blocks first when `read` (late at
/// exit and before a context goes; otherwise, and where a read fails, the last read).
pub fn untracked_accesses(read: bool) -> u64 {
    let offset = gpusan_abi::binary::PARAMS_UNTRACKED.offset as u64;
    let gone = lock().as_ref().map_or(0, |c| c.gone.3);
    gone + entries()
        .iter()
        .map(|a| {
            let mut a = lock_abi(a);
            let mut total = 0;
            for m in &mut a.modules {
                if let Target::Params { block, untracked } = &mut m.target {
                    let mut n = 0u64;
                    if read && unsafe { dtoh(&mut n as *mut u64 as *mut c_void, *block + offset, 8) } {
                        *untracked = n;
                    }
                    total += *untracked;
                }
            }
            total
        })
        .sum::<u64>()
}

/// A context's table and error buffer, allocated in it (current): its kernels find their
/// buffers on their device.
unsafe fn set_up(device: i32) -> Option<Abi> {
    // gpusan's stream in this context, made now: this is seldom during a capture.
    capture::own_stream();
    let bytes = record::buffer_bytes(ERROR_CAPACITY);
    let header = ErrorBufferHeader { count: 0, capacity: ERROR_CAPACITY, reserved: 0 };
    let (errors_ptr, errors_host) = match call_host_alloc(bytes) {
        Some((host, dev)) => {
            std::ptr::write_volatile(host as *mut ErrorBufferHeader, header);
            (dev, Some(host))
        }
        None => {
            let p = call_alloc(bytes)?;
            htod(p, &header as *const _ as *const c_void, record::HEADER_BYTES);
            (p, None)
        }
    };
    Some(Abi {
        device,
        table: DeviceTable::new(),
        memory: TableMemory::new(device),
        behind: false,
        errors_ptr,
        errors_host,
        drained: 0,
        not_stored: 0,
        modules: Vec::new(),
        libraries: 0,
    })
}

/// Some module declared the ABI: launches may have a table to upload.
pub fn active() -> bool {
    ACTIVE.get().load(Ordering::Acquire)
}

/// Before a launch: the kernel must see every allocation made so far.
/// `set_up`: the binary route may patch the launched kernel (its module may load only now,
/// lazily): the context's table and error buffer are made here, outside the Compute
/// Sanitizer's callbacks, where no driver call may be made. So are they at a context's
/// first launch where an ABI library was loaded in another (its kernels may run here).
pub fn before_launch(set_up: bool) {
    if !set_up && !ACTIVE.get().load(Ordering::Acquire) {
        return;
    }
    let abi = if set_up {
        let abi = context_entry();
        ACTIVE.get().store(true, Ordering::Release);
        abi
    } else {
        let context = current_context().0;
        entry(context).or_else(|| for_libraries(context))
    };
    if let Some(ctx) = abi {
        let mut abi = lock_abi(&ctx);
        unsafe {
            upload(&ctx, &mut abi);
            point_libraries(&mut abi);
        }
    }
}

/// A context with no entry yet, at a launch: set up if an ABI library was loaded (its kernels
/// may run here), unless that failed here before.
fn for_libraries(context: u64) -> Option<Arc<Ctx>> {
    if LIBRARIES.get().load(Ordering::Acquire) == 0 || lock().as_ref().is_some_and(|c| c.not_set_up.contains(&context))
    {
        return None;
    }
    let made = context_entry();
    if made.is_none() {
        lock().get_or_insert_with(Contexts::default).not_set_up.insert(context);
    }
    made
}

/// The contexts whose kernels report into an error buffer of gpusan's.
pub fn contexts() -> Vec<u64> {
    lock().as_ref().map(|c| c.by_context.keys().copied().collect()).unwrap_or_default()
}

/// After a synchronization: turn new error records into reports.
pub fn drain() {
    drain_with(Read::InPlace);
}

/// At exit: as [`drain`], but CUDA may have torn contexts down without a call gpusan saw,
/// unmapping their error buffers: each read is one that cannot fault.
pub fn drain_at_exit() {
    drain_with(Read::Checked);
}

/// How a drain reads an error buffer that is host memory.
#[derive(Clone, Copy)]
enum Read {
    /// Straight from the mapping: its context is known to exist.
    InPlace,
    /// Through [`crate::driver::peek`]: the mapping may be gone.
    Checked,
}

fn drain_with(how: Read) {
    if !ACTIVE.get().load(Ordering::Acquire) {
        return;
    }
    let mut records = Vec::new();
    let mut modules: Vec<(u32, Option<Loaded>, Arc<ModuleInfo>)> = Vec::new();
    for abi in entries() {
        let mut abi = lock_abi(&abi);
        let device = abi.device;
        records.extend(drain_one(&mut abi, how).into_iter().map(|r| (r, device)));
        // Reports name modules of any context: what they need, taken only when there is
        // something to report.
        if !records.is_empty() {
            modules.extend(abi.modules.iter().map(|m| (m.id, m.target.loaded(), m.info.clone())));
        }
    }
    if records.is_empty() {
        return;
    }
    // Modules of contexts drained before the first record was found.
    for abi in entries() {
        let abi = lock_abi(&abi);
        for m in &abi.modules {
            if !modules.iter().any(|(id, ..)| *id == m.id) {
                modules.push((m.id, m.target.loaded(), m.info.clone()));
            }
        }
    }
    let st = state();
    for (r, device) in records {
        let found = modules.iter().find(|(id, ..)| *id == r.module());
        let m = found.map(|(.., m)| m);
        let kernel = match m.and_then(|m| m.names.get(r.function() as usize)) {
            Some(name) => name.clone(),
            None => unnamed(found.and_then(|(_, loaded, _)| *loaded)),
        };
        let label = m.map(|m| m.label.as_str()).unwrap_or("<unknown module>");
        let none = SourceLines::default();
        let mut report = r.to_report(&kernel, label, m.map_or(&none, |m| &m.lines), &st.registry);
        if let gpusan_runtime::report::Details::Device(d) = &mut report.details {
            d.device = (device >= 0).then_some(device);
        }
        if let (gpusan_runtime::report::Details::Device(d), Some((_, Some(loaded), _))) = (&mut report.details, found) {
            // The stack of the kernel's first launch: records do not say which launch wrote them.
            d.launch_stack = super::coverage::launch_site(*loaded, &kernel).into();
        }
        if m.is_some_and(|m| m.sass) {
            if let gpusan_runtime::report::Details::Device(d) = &mut report.details {
                d.sass_offset = d.ptx.take().map(|p| p.line);
            }
        }
        st.report(report);
    }
}

/// The function of a record from a module whose functions gpusan cannot name (machine code
/// that declares the device ABI, built where gpusan kept no record of it): the kernels of
/// that module the program launched, one of which made the record. A Triton module has one.
fn unnamed(module: Option<Loaded>) -> String {
    let launched = module.map(super::coverage::launched_of).unwrap_or_default();
    match launched.as_slice() {
        [] => "<unknown kernel>".to_string(),
        [one] => one.clone(),
        many => {
            let names: Vec<String> = many.iter().map(|n| gpusan_runtime::coverage::demangle(n)).collect();
            format!("one of {}", names.join(", "))
        }
    }
}

/// A context went away (destroyed, its primary context released for the last time or
/// reset), and the driver freed its table, its error buffer and its modules with it: what
/// gpusan kept of them goes, drained before (see `routes::before_teardown`). A drain would
/// otherwise read the unmapped error buffer (a driver-API program that releases its
/// primary context before exit crashed there), and a new context the driver hands the
/// same handle would be taken for one already set up.
pub fn context_gone(context: u64) {
    // A new context may get its handle.
    if let Some(c) = lock().as_mut() {
        c.not_set_up.remove(&context);
    }
    let Some(abi) = lock().as_mut().and_then(|c| c.by_context.remove(&context)) else { return };
    let counts = {
        let abi = lock_abi(&abi);
        let untracked = abi.modules.iter().map(|m| match m.target {
            Target::Params { untracked, .. } => untracked,
            Target::Variables(_) => 0,
        });
        (abi.not_stored, abi.memory.held_bytes(), abi.memory.moves(), untracked.sum::<u64>(), abi.table.peak())
    };
    if let Some(contexts) = lock().as_mut() {
        if counts.4.entries >= contexts.gone_peak.entries {
            contexts.gone_peak = counts.4;
        }
        let (lost, bytes, moves, untracked) = &mut contexts.gone;
        *lost += counts.0;
        *bytes += counts.1;
        *moves += counts.2;
        *untracked += counts.3;
    }
}

/// New error records of one context's buffer (read through unified addressing, whatever
/// context is current).
fn drain_one(abi: &mut Abi, how: Read) -> Vec<ErrorRecord> {
    let mut header = ErrorBufferHeader::default();
    let read = |dst: *mut c_void, offset: u64, n: usize| match (abi.errors_host, how) {
        // Kernels that wrote it have completed (a drain follows a synchronization).
        (Some(host), Read::InPlace) => unsafe {
            std::sync::atomic::fence(Ordering::Acquire);
            for i in 0..n {
                let b = std::ptr::read_volatile((host as *const u8).add(offset as usize + i));
                *(dst as *mut u8).add(i) = b;
            }
            true
        },
        (Some(host), Read::Checked) => {
            std::sync::atomic::fence(Ordering::Acquire);
            // SAFETY: `dst` is a buffer of ours of `n` bytes; where peek cannot check, the
            // buffer is read as in place (its context known to exist, as `InPlace` assumes).
            unsafe {
                let dst = std::slice::from_raw_parts_mut(dst as *mut u8, n);
                crate::driver::peek::copy(dst, (host + offset as usize) as *const u8)
            }
        }
        (None, _) => unsafe { dtoh(dst, abi.errors_ptr + offset, n) },
    };
    if !read(&mut header as *mut _ as *mut c_void, 0, record::HEADER_BYTES) || header.count <= abi.drained {
        return Vec::new();
    }
    let stored = record::stored_between(abi.drained, header.count, ERROR_CAPACITY);
    abi.not_stored += u64::from(header.count - abi.drained) - u64::from(stored.end - stored.start);
    if header.count >= ERROR_CAPACITY {
        BUFFER_FILLED.get().store(true, Ordering::Relaxed);
    }
    abi.drained = header.count;
    if stored.is_empty() {
        return Vec::new();
    }
    let mut bytes = vec![0u8; stored.len() * record::RECORD_BYTES];
    let at = record::record_offset(stored.start);
    if !read(bytes.as_mut_ptr() as *mut c_void, at, bytes.len()) {
        return Vec::new();
    }
    ErrorRecord::parse_all(&bytes)
}

/// Some context's error buffer filled: kernels stop counting there (an atomic on mapped host
/// memory per erring thread would stall a kernel whose every thread errs), so errors past
/// it are neither stored nor counted.
static BUFFER_FILLED: PerProcess<AtomicBool> = PerProcess::new(|| AtomicBool::new(false));

/// Whether an error buffer filled ([`BUFFER_FILLED`]).
pub fn buffer_filled() -> bool {
    BUFFER_FILLED.get().load(Ordering::Relaxed)
}

/// Device errors counted by kernels but not stored (the buffer was full between drains).
pub fn not_stored() -> u64 {
    let gone = lock().as_ref().map_or(0, |c| c.gone.0);
    gone + entries().iter().map(|a| lock_abi(a).not_stored).sum::<u64>()
}

/// The largest allocation table of any context (those gone too): what its entries stood for.
pub fn table_peak() -> TableShape {
    let gone = lock().as_ref().map_or_else(TableShape::default, |c| c.gone_peak);
    entries().iter().map(|a| lock_abi(a).table.peak()).fold(gone, |p, t| if t.entries > p.entries { t } else { p })
}

/// Device memory held for allocation tables, all contexts (those gone too), and how often tables moved
/// (see [`super::table_memory`]).
pub fn table_memory() -> (u64, u64) {
    let gone = lock().as_ref().map_or((0, 0), |c| (c.gone.1, c.gone.2));
    entries().iter().fold(gone, |(b, m), a| {
        let a = lock_abi(a);
        (b + a.memory.held_bytes(), m + a.memory.moves())
    })
}
