//! One tenant as the manager serves it (`docs/fence-design.md` §2, §3, §6): its partition,
//! its own stream, the modules it loaded and their functions. Handles are accepted only
//! from the tenant they were given to; host copies and sets must lie inside one of its live
//! allocations; every module is fenced into its partition before the driver sees it, and
//! one the fence cannot make safe is refused. A refusal is a CUDA error for the tenant's
//! caller and a line in the tenant's log, never a fault of the shared context.

use std::collections::{HashMap, HashSet};
use std::ffi::{c_void, CString};

use gpusan_passes::fence;
use gpusan_ptx::ast::{Function, FunctionKind, Item};

use crate::driver::{Driver, DriverError, Raw};
use crate::memory::{MemoryError, TenantMemory};
use crate::protocol::{Reply, Request, MAX_CHUNK, VERSION};

/// The CUDA error codes a refusal answers with (cuda.h).
pub const INVALID_VALUE: i32 = 1;
pub const OUT_OF_MEMORY: i32 = 2;
pub const INVALID_IMAGE: i32 = 200;
pub const INVALID_HANDLE: i32 = 400;
pub const NOT_FOUND: i32 = 500;
pub const NOT_READY: i32 = 600;
pub const NOT_SUPPORTED: i32 = 801;
pub const UNKNOWN: i32 = 999;

/// The smallest and largest partitions a tenant may ask for: 2 MiB (one chunk) to 1 TiB.
pub const MIN_LOG2: u32 = 21;
pub const MAX_LOG2: u32 = 40;

/// The largest bulk segment a tenant may give: 1 GiB.
pub const MAX_SEGMENT: u64 = 1 << 30;

/// Host memory the manager mapped and pinned: a tenant's bulk segment, or the page its
/// abort flag is copied into.
struct Segment {
    at: *mut u8,
    len: usize,
}

impl Segment {
    /// Maps `len` bytes, the tenant's file `fd` shared or (with `None`) a fresh private
    /// mapping of the manager's, and pins them for the GPU's copies; `call` names what asked
    /// in an error. A copy from the GPU into pinned memory is one DMA, where a copy into
    /// pageable memory is staged and waited for apart.
    fn map(driver: &Driver, len: usize, fd: Option<std::os::fd::RawFd>, call: &str) -> Result<Segment, Reply> {
        let (flags, fd) = match fd {
            Some(fd) => (libc::MAP_SHARED, fd),
            None => (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1),
        };
        // SAFETY: a fresh mapping; unmapped in `release`.
        let at = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, flags, fd, 0) };
        if at == libc::MAP_FAILED {
            return Err(error(OUT_OF_MEMORY, format!("{call}: mmap: {}", std::io::Error::last_os_error())));
        }
        let at = at.cast::<u8>();
        // SAFETY: mapped above, until `release` unregisters then unmaps it.
        if let Err(e) = unsafe { driver.host_register(at, len) } {
            // SAFETY: our mapping.
            unsafe { libc::munmap(at.cast(), len) };
            return Err(driver_error(e));
        }
        Ok(Segment { at, len })
    }

    /// Unpins and unmaps it; no copy may use it any more (the tenant's stream is done).
    fn release(self, driver: &Driver) {
        let _ = driver.host_unregister(self.at);
        // SAFETY: our mapping, no longer used.
        unsafe { libc::munmap(self.at.cast(), self.len) };
    }
}

/// A function of the tenant's: its parameters' (offset, size) in the packed buffer.
#[derive(Clone)]
struct FunctionInfo {
    params: Vec<(u32, u32)>,
    buffer: u32,
    /// The parameters its tensor copies read their map from (`fence::FenceReport::maps`):
    /// at each launch they must hold a map of `Tenant::maps`.
    maps: Vec<usize>,
}

/// Tensor maps a tenant may have made and kept at once: each is 128 bytes of the
/// manager's memory.
const MAX_MAPS: usize = 1 << 16;

/// A module of the tenant's: its kernels' parameter layouts (from its PTX) and the
/// function handles given out of it.
struct ModuleInfo {
    kernels: Vec<(String, FunctionInfo)>,
    functions: Vec<Raw>,
    /// Its `.global` variables' copies in the partition: (name, address, size).
    variables: Vec<(String, u64, u64)>,
}

/// What the tenant did, for `gpusan serve --status` and the tenant's report.
#[derive(Debug, Default, Clone)]
pub struct Stats {
    pub launches: u64,
    pub modules: u64,
    pub refused: u64,
}

pub struct Tenant<'d> {
    pub id: u32,
    pub name: String,
    pub pid: u32,
    driver: &'d Driver,
    memory: TenantMemory<'d>,
    stream: Raw,
    /// The word a fenced kernel sets before it exits at a `trap` (the fence's third constant):
    /// the first 8 bytes of the tenant's partition, allocated at the start.
    abort: u64,
    modules: HashMap<Raw, ModuleInfo>,
    functions: HashMap<Raw, FunctionInfo>,
    events: HashSet<Raw>,
    /// Loaded unfenced machine code (`--allow-native`): it must stay the GPU's only tenant.
    native: bool,
    /// The tenant's shared bulk segment, mapped here and pinned.
    segment: Option<Segment>,
    /// Where a synchronization copies the abort flag (pinned, the manager's own).
    flag_page: Option<Segment>,
    pub stats: Stats,
    /// The first refusal of an unanswered request (a launch) since the last
    /// synchronization: what the next one reports.
    pending: Option<Reply>,
    /// Every refusal, in words.
    pub log: Vec<String>,
    /// The tensor maps the manager made for the tenant, each on a tensor inside its
    /// partition: what its kernels' map parameters may hold.
    maps: HashSet<[u8; 128]>,
}

fn error(code: i32, message: impl Into<String>) -> Reply {
    Reply::Error { code, message: message.into() }
}

fn driver_error(e: DriverError) -> Reply {
    match e {
        DriverError::Call { code, .. } => error(code, e.to_string()),
        DriverError::Load { .. } => error(UNKNOWN, e.to_string()),
    }
}

impl<'d> Tenant<'d> {
    /// The tenant a `Hello` announces, with its partition made, or the reply refusing it.
    pub fn start(driver: &'d Driver, id: u32, hello: Request) -> Result<(Tenant<'d>, Reply), Reply> {
        let Request::Hello { version, pid, name, memory_log2 } = hello else {
            return Err(error(INVALID_VALUE, "the first message must be Hello"));
        };
        if version != VERSION {
            return Err(error(NOT_SUPPORTED, format!("protocol version {version}; this manager speaks {VERSION}")));
        }
        if !(MIN_LOG2..=MAX_LOG2).contains(&memory_log2) {
            return Err(error(
                INVALID_VALUE,
                format!("a partition of 2^{memory_log2} bytes: between 2^{MIN_LOG2} and 2^{MAX_LOG2} only"),
            ));
        }
        let mut memory = TenantMemory::new(driver, memory_log2).map_err(|e| error(OUT_OF_MEMORY, e.to_string()))?;
        let abort = memory.alloc(8).map_err(|e| error(OUT_OF_MEMORY, e.to_string()))?;
        let flag_page = Segment::map(driver, 4096, None, "the abort flag's page")?;
        let stream = match driver.stream_create() {
            Ok(s) => s,
            Err(e) => {
                flag_page.release(driver);
                return Err(driver_error(e));
            }
        };
        if let Err(e) = driver.memset_d8(abort, 0, 8, stream).and_then(|()| driver.stream_synchronize(stream)) {
            let _ = driver.stream_destroy(stream);
            flag_page.release(driver);
            return Err(driver_error(e));
        }
        let reply = Reply::Hello {
            tenant: id,
            partition_base: memory.partition().base(),
            partition_size: memory.partition().size(),
        };
        let tenant = Tenant {
            id,
            name,
            pid,
            driver,
            memory,
            stream,
            abort,
            modules: HashMap::new(),
            functions: HashMap::new(),
            events: HashSet::new(),
            native: false,
            segment: None,
            flag_page: Some(flag_page),
            stats: Stats::default(),
            pending: None,
            log: Vec::new(),
            maps: HashSet::new(),
        };
        Ok((tenant, reply))
    }

    pub fn memory(&self) -> &TenantMemory<'d> {
        &self.memory
    }

    pub fn status(&self) -> crate::protocol::TenantStatus {
        let p = self.memory.partition();
        crate::protocol::TenantStatus {
            tenant: self.id,
            name: self.name.clone(),
            pid: self.pid,
            partition_base: p.base(),
            partition_size: p.size(),
            used: p.used(),
            real_chunks: self.memory.real_chunks() as u64,
            modules: self.stats.modules,
            launches: self.stats.launches,
            refused: self.stats.refused,
            native: self.native,
        }
    }

    /// Maps the tenant's bulk segment (`fd`, `bytes` long) and pins it for the GPU's copies.
    pub fn attach_segment(&mut self, fd: Option<std::os::fd::OwnedFd>, bytes: u64) -> Reply {
        use std::os::fd::AsRawFd;
        let Some(fd) = fd else { return error(INVALID_VALUE, "Segment: no descriptor came with it") };
        if self.segment.is_some() {
            return error(INVALID_VALUE, "Segment: the tenant has one already");
        }
        if bytes == 0 || bytes > MAX_SEGMENT {
            return error(INVALID_VALUE, format!("Segment of {bytes} bytes: 1 to {MAX_SEGMENT} only"));
        }
        // The tenant's file must be as long as it says, and stay so: a read of the mapping
        // past a file the tenant shrank later would kill the manager (SIGBUS). A memfd
        // sealed against shrinking is the only kind taken.
        // SAFETY: fcntl and fstat on a descriptor of ours, into a buffer of ours.
        let seals = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GET_SEALS) };
        if seals < 0 || seals & libc::F_SEAL_SHRINK == 0 {
            return error(INVALID_VALUE, "Segment: the descriptor is not a memfd sealed against shrinking");
        }
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 || (st.st_size as u64) < bytes {
            return error(INVALID_VALUE, "Segment: the descriptor is not a file that long");
        }
        let segment = match Segment::map(self.driver, bytes as usize, Some(fd.as_raw_fd()), "Segment") {
            Ok(s) => s,
            Err(refusal) => return refusal,
        };
        self.segment = Some(segment);
        Reply::Done
    }

    /// The segment's range `offset..offset + bytes`, if it lies inside.
    fn in_segment(&self, call: &str, offset: u64, bytes: u64) -> Result<*mut u8, Reply> {
        let Some(s) = &self.segment else {
            return Err(error(INVALID_VALUE, format!("{call}: the tenant gave no segment")));
        };
        match offset.checked_add(bytes) {
            // SAFETY: inside the mapping.
            Some(end) if end <= s.len as u64 => Ok(unsafe { s.at.add(offset as usize) }),
            _ => {
                Err(error(INVALID_VALUE, format!("{call}: {bytes} bytes at {offset} run past the segment's {}", s.len)))
            }
        }
    }

    /// Counts and logs a refusal made for the tenant outside [`Tenant::handle`].
    pub fn note_refusal(&mut self, reply: &Reply) {
        if let Reply::Error { message, .. } = reply {
            self.stats.refused += 1;
            self.log.push(message.clone());
        }
    }

    /// Serves `request`. The reply of an unanswered request (a launch) is not sent: a
    /// refusal of one is kept for the next synchronization.
    pub fn handle(&mut self, request: Request) -> Reply {
        let answered = request.answered();
        let reply = self.serve(request);
        if let Reply::Error { message, .. } = &reply {
            self.stats.refused += 1;
            self.log.push(message.clone());
            if !answered && self.pending.is_none() {
                self.pending = Some(reply.clone());
            }
        }
        reply
    }

    fn serve(&mut self, request: Request) -> Reply {
        match request {
            Request::Hello { .. } | Request::Status => error(INVALID_VALUE, "Hello or Status after Hello"),
            Request::MemAlloc { bytes } => match self.memory.alloc(bytes) {
                Ok(p) => Reply::Pointer(p),
                Err(MemoryError::Partition(e)) => error(OUT_OF_MEMORY, format!("cuMemAlloc of {bytes} bytes: {e}")),
                Err(e) => error(OUT_OF_MEMORY, e.to_string()),
            },
            Request::MemFree { ptr } if ptr == self.abort => {
                error(INVALID_VALUE, format!("cuMemFree({ptr:#x}): not an allocation of the tenant's"))
            }
            Request::MemFree { ptr } => {
                // Kernels still queued may use it: the free waits for them, as the driver's does.
                if let Err(e) = self.driver.stream_synchronize(self.stream) {
                    return driver_error(e);
                }
                match self.memory.free(ptr) {
                    Ok(_) => Reply::Done,
                    Err(e) => error(INVALID_VALUE, format!("cuMemFree({ptr:#x}): {e}")),
                }
            }
            Request::CopyHtoD { dst, data } => match self.in_live("cuMemcpyHtoD", dst, data.len() as u64) {
                Err(r) => r,
                Ok(()) => self.done(self.driver.copy_htod(dst, &data, self.stream)),
            },
            Request::CopyDtoH { src, bytes } => {
                if bytes > MAX_CHUNK {
                    return error(INVALID_VALUE, format!("a copy of {bytes} bytes in one request"));
                }
                if let Err(r) = self.in_live("cuMemcpyDtoH", src, bytes) {
                    return r;
                }
                let mut out = vec![0u8; bytes as usize];
                match self.driver.copy_dtoh(&mut out, src, self.stream) {
                    Ok(()) => Reply::Bytes(out),
                    Err(e) => driver_error(e),
                }
            }
            Request::Segment { .. } => error(INVALID_VALUE, "Segment: only with its descriptor, from the socket"),
            Request::CopyHtoDShared { dst, offset, bytes } => {
                match self
                    .in_live("cuMemcpyHtoD", dst, bytes)
                    .and_then(|()| self.in_segment("cuMemcpyHtoD", offset, bytes))
                {
                    Err(r) => r,
                    // SAFETY: inside the pinned segment.
                    Ok(src) => self.done(unsafe { self.driver.copy_htod_from(dst, src, bytes as usize, self.stream) }),
                }
            }
            Request::CopyDtoHShared { src, offset, bytes } => {
                match self
                    .in_live("cuMemcpyDtoH", src, bytes)
                    .and_then(|()| self.in_segment("cuMemcpyDtoH", offset, bytes))
                {
                    Err(r) => r,
                    // SAFETY: inside the pinned segment.
                    Ok(out) => self.done(unsafe { self.driver.copy_dtoh_into(out, src, bytes as usize, self.stream) }),
                }
            }
            Request::MemsetD8 { dst, value, count } => match self.in_live("cuMemsetD8", dst, count) {
                Err(r) => r,
                Ok(()) => self.done(self.driver.memset_d8(dst, value, count, self.stream)),
            },
            Request::ModuleLoad { image } => self.load(image),
            Request::ModuleUnload { module } => match self.modules.remove(&module) {
                None => error(INVALID_HANDLE, format!("cuModuleUnload({module:#x}): not a module of the tenant's")),
                Some(info) => {
                    for f in info.functions {
                        self.functions.remove(&f);
                    }
                    if let Err(e) = self.driver.stream_synchronize(self.stream) {
                        return driver_error(e);
                    }
                    for (_, at, _) in &info.variables {
                        let _ = self.memory.free(*at);
                    }
                    self.done(self.driver.module_unload(module))
                }
            },
            Request::GetFunction { module, name } => self.function(module, &name),
            Request::GetGlobal { module, name } => match self.modules.get(&module) {
                None => error(INVALID_HANDLE, format!("cuModuleGetGlobal({module:#x}): not a module of the tenant's")),
                Some(info) => match info.variables.iter().find(|(n, _, _)| *n == name) {
                    Some(&(_, ptr, bytes)) => Reply::Global { ptr, bytes },
                    None => error(NOT_FOUND, format!("cuModuleGetGlobal: no variable {name} in the module")),
                },
            },
            Request::Launch { function, grid, block, shared, params } => {
                self.launch(function, grid, block, shared, params)
            }
            Request::Synchronize => self.synchronize(),
            Request::MemsetD32 { dst, value, count } => {
                match count.checked_mul(4).ok_or(()).and_then(|b| self.in_live("cuMemsetD32", dst, b).map_err(|_| ())) {
                    Err(()) => error(
                        INVALID_VALUE,
                        format!("cuMemsetD32 of {count} words at {dst:#x}: not inside one of the tenant's allocations"),
                    ),
                    Ok(()) if dst % 4 != 0 => {
                        error(INVALID_VALUE, format!("cuMemsetD32 at {dst:#x}: not 4-byte aligned"))
                    }
                    Ok(()) => self.done(self.driver.memset_d32(dst, value, count, self.stream)),
                }
            }
            Request::TensorMapEncodeTiled(m) => {
                self.encode_map("cuTensorMapEncodeTiled", m.data_type, &m.dims, &m.strides, m.address, |d| {
                    d.tensor_map_encode_tiled(&m)
                })
            }
            Request::TensorMapEncodeIm2col(m) => {
                self.encode_map("cuTensorMapEncodeIm2col", m.data_type, &m.dims, &m.strides, m.address, |d| {
                    d.tensor_map_encode_im2col(&m)
                })
            }
            request @ (Request::Query
            | Request::EventCreate { .. }
            | Request::EventRecord { .. }
            | Request::EventSynchronize { .. }
            | Request::EventQuery { .. }
            | Request::EventElapsed { .. }
            | Request::EventDestroy { .. }
            | Request::DeviceAttribute { .. }
            | Request::DeviceName
            | Request::DriverVersion
            | Request::MemInfo) => self.serve_query(request),
        }
    }

    /// Events, queries of the tenant's work and of the device.
    fn serve_query(&mut self, request: Request) -> Reply {
        match request {
            Request::Query => match self.driver.stream_query(self.stream) {
                Ok(true) => Reply::Done,
                Ok(false) => error(NOT_READY, "the tenant's work is still running"),
                Err(e) => driver_error(e),
            },
            Request::EventCreate { flags } => match self.driver.event_create(flags) {
                Ok(e) => {
                    self.events.insert(e);
                    Reply::Event(e)
                }
                Err(e) => driver_error(e),
            },
            Request::EventRecord { event } => match self.event("cuEventRecord", event) {
                Err(r) => r,
                Ok(e) => self.done(self.driver.event_record(e, self.stream)),
            },
            Request::EventSynchronize { event } => match self.event("cuEventSynchronize", event) {
                Err(r) => r,
                Ok(e) => self.done(self.driver.event_synchronize(e)),
            },
            Request::EventQuery { event } => {
                match self.event("cuEventQuery", event).map(|e| self.driver.event_query(e)) {
                    Err(r) => r,
                    Ok(Ok(true)) => Reply::Done,
                    Ok(Ok(false)) => error(NOT_READY, "the work before the event's record is still running"),
                    Ok(Err(e)) => driver_error(e),
                }
            }
            Request::EventElapsed { start, end } => {
                match self
                    .event("cuEventElapsedTime", start)
                    .and_then(|s| self.event("cuEventElapsedTime", end).map(|e| (s, e)))
                {
                    Err(r) => r,
                    Ok((s, e)) => match self.driver.event_elapsed(s, e) {
                        Ok(ms) => Reply::Float(ms),
                        Err(e) => driver_error(e),
                    },
                }
            }
            Request::EventDestroy { event } => match self.event("cuEventDestroy", event) {
                Err(r) => r,
                Ok(e) => {
                    self.events.remove(&e);
                    self.done(self.driver.event_destroy(e))
                }
            },
            Request::DeviceAttribute { attribute } => match self.driver.device_attribute(attribute) {
                Ok(v) => Reply::Value(v),
                Err(e) => driver_error(e),
            },
            Request::DeviceName => match self.driver.device_name() {
                Ok(n) => Reply::Text(n),
                Err(e) => driver_error(e),
            },
            Request::DriverVersion => match self.driver.driver_version() {
                Ok(v) => Reply::Value(v),
                Err(e) => driver_error(e),
            },
            Request::MemInfo => {
                let p = self.memory.partition();
                Reply::MemInfo { free: p.size() - p.used(), total: p.size() }
            }
            _ => error(INVALID_VALUE, "not a query"),
        }
    }

    fn done(&self, r: Result<(), DriverError>) -> Reply {
        match r {
            Ok(()) => Reply::Done,
            Err(e) => driver_error(e),
        }
    }

    /// `event`, if it is one of the tenant's.
    fn event(&self, call: &str, event: Raw) -> Result<Raw, Reply> {
        if self.events.contains(&event) {
            Ok(event)
        } else {
            Err(error(INVALID_HANDLE, format!("{call}({event:#x}): not an event of the tenant's")))
        }
    }

    /// A host copy or set of `bytes` at `at` must lie inside one live allocation.
    fn in_live(&self, call: &str, at: u64, bytes: u64) -> Result<(), Reply> {
        let p = self.memory.partition();
        let abort = at < self.abort + 8 && self.abort < at.saturating_add(bytes.max(1));
        if bytes == 0 || (p.in_live(at, bytes) && !abort) {
            return Ok(());
        }
        let whose = if p.contains(at, bytes) {
            "the tenant's partition, outside its allocations"
        } else {
            "outside the tenant's partition"
        };
        Err(error(INVALID_VALUE, format!("{call} of {bytes} bytes at {at:#x}: {whose}")))
    }

    /// The PTX to fence of a module image: PTX text as given, or a fatbin's PTX entry (the
    /// newest for an architecture the GPU runs: nvcc's fatbins carry `compute_XX` PTX beside
    /// their cubins). Machine code alone cannot be fenced yet.
    fn ptx_of(&self, image: &[u8]) -> Result<String, Reply> {
        if image.get(..4) == Some(&gpusan_fatbin::FATBIN_MAGIC.to_le_bytes()[..]) {
            let fatbin = gpusan_fatbin::Fatbin::parse(image)
                .map_err(|e| error(INVALID_IMAGE, format!("cuModuleLoadData: the fatbin does not parse: {e}")))?;
            let sm = self.device_sm();
            let ptx = fatbin
                .entries
                .iter()
                .filter(|e| e.kind == gpusan_fatbin::EntryKind::Ptx && sm.is_none_or(|sm| e.arch <= sm))
                .max_by_key(|e| e.arch);
            let Some(entry) = ptx else {
                return Err(error(
                    NOT_SUPPORTED,
                    "cuModuleLoadData: a fatbin of machine code only (no PTX for this GPU) cannot be fenced yet",
                ));
            };
            return entry
                .ptx_text()
                .map(|t| t.into_owned())
                .map_err(|e| error(INVALID_IMAGE, format!("cuModuleLoadData: the fatbin's PTX: {e}")));
        }
        match std::str::from_utf8(image.strip_suffix(&[0]).unwrap_or(image)) {
            Ok(t) if t.contains(".version") => Ok(t.to_string()),
            _ => Err(error(
                NOT_SUPPORTED,
                "cuModuleLoadData: machine code (no PTX) cannot be fenced yet; only PTX modules and fatbins with PTX are loaded",
            )),
        }
    }

    /// Whether `image` is machine code the fence cannot take (a cubin, or a fatbin with no
    /// PTX for this GPU): what only `--allow-native` loads, unfenced.
    pub fn is_machine_code(&self, image: &[u8]) -> bool {
        image.starts_with(b"\x7fELF")
            || matches!(self.ptx_of(image), Err(Reply::Error { code, .. }) if code == NOT_SUPPORTED)
                && image.get(..4) == Some(&gpusan_fatbin::FATBIN_MAGIC.to_le_bytes()[..])
    }

    /// Loads machine code unfenced (`--allow-native`, for the GPU's only tenant: the manager
    /// checked), its kernels' parameter layouts from the cubin's `.nv.info`.
    pub fn load_native(&mut self, image: Vec<u8>) -> Reply {
        let cubin_bytes: std::borrow::Cow<[u8]> = if image.starts_with(b"\x7fELF") {
            std::borrow::Cow::Borrowed(&image)
        } else {
            let parsed = gpusan_fatbin::Fatbin::parse(&image).and_then(|f| {
                let elf = f.entries.iter().find(|e| e.kind == gpusan_fatbin::EntryKind::Elf).cloned();
                elf.map(|e| e.contents().map(|c| c.into_owned())).transpose()
            });
            match parsed {
                Ok(Some(c)) => std::borrow::Cow::Owned(c),
                Ok(None) => return error(INVALID_IMAGE, "cuModuleLoadData: a fatbin with no cubin and no PTX"),
                Err(e) => return error(INVALID_IMAGE, format!("cuModuleLoadData: the fatbin does not parse: {e}")),
            }
        };
        let kernels: Vec<(String, FunctionInfo)> = match gpusan_fatbin::Cubin::parse(&cubin_bytes) {
            Ok(c) => c
                .functions
                .iter()
                .filter(|f| f.is_entry)
                .map(|f| {
                    let mut params = f.params.clone();
                    params.sort_by_key(|p| p.ordinal);
                    let layout: Vec<(u32, u32)> = params.iter().map(|p| (u32::from(p.offset), p.size)).collect();
                    let end = layout.iter().map(|&(o, s)| o + s).max().unwrap_or(0);
                    (
                        f.name.to_string(),
                        FunctionInfo { params: layout, buffer: f.param_size.unwrap_or(end).max(end), maps: Vec::new() },
                    )
                })
                .collect(),
            Err(e) => return error(INVALID_IMAGE, format!("cuModuleLoadData: the cubin does not parse: {e}")),
        };
        let handle = match self.driver.module_load(&image) {
            Ok(m) => m,
            Err(e) => return driver_error(e),
        };
        self.native = true;
        self.stats.modules += 1;
        self.modules.insert(handle, ModuleInfo { kernels, functions: Vec::new(), variables: Vec::new() });
        Reply::Module(handle)
    }

    /// The GPU's SM (90 for sm_90), if the driver says.
    fn device_sm(&self) -> Option<u32> {
        // 75, 76: CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, _MINOR.
        let major = self.driver.device_attribute(75).ok()?;
        let minor = self.driver.device_attribute(76).ok()?;
        u32::try_from(major * 10 + minor).ok()
    }

    fn load(&mut self, image: Vec<u8>) -> Reply {
        let text = match self.ptx_of(&image) {
            Ok(t) => t,
            Err(r) => return r,
        };
        let mut module = match gpusan_ptx::parse(&text) {
            Ok(m) => m,
            Err(e) => return error(INVALID_IMAGE, format!("cuModuleLoadData: the PTX does not parse: {e}")),
        };
        let variables: Vec<String> = fence::relocated_variables(&module).iter().map(|v| v.to_string()).collect();
        let report = match fence::run(&mut module) {
            Ok(r) => r,
            Err(e) => return error(INVALID_IMAGE, format!("cuModuleLoadData: the fence pass failed: {e}")),
        };
        if report.unfenced > 0 {
            return error(
                NOT_SUPPORTED,
                format!("cuModuleLoadData: {} accesses of the module cannot be fenced (tensor maps not from a kernel parameter, textures or surfaces, 32-bit addresses, variables' addresses in initializers)", report.unfenced),
            );
        }
        let layouts: Vec<(String, FunctionInfo)> = module
            .items
            .iter()
            .filter_map(|i| match i {
                Item::Function(f) if f.kind == FunctionKind::Entry && f.body.is_some() => {
                    let maps = report
                        .maps
                        .iter()
                        .filter(|(k, _)| *k == f.name)
                        .flat_map(|(_, params)| params)
                        .filter_map(|n| f.params.as_deref().unwrap_or_default().iter().position(|p| p.name == *n))
                        .collect();
                    param_layout(f).map(|(params, buffer)| (f.name.to_string(), FunctionInfo { params, buffer, maps }))
                }
                _ => None,
            })
            .collect();
        let mut fenced = gpusan_ptx::print(&module).into_bytes();
        fenced.push(0);
        let handle = match self.driver.module_load(&fenced) {
            Ok(m) => m,
            Err(e) => return driver_error(e),
        };
        let set = self.driver.global(handle, c"__gpusan_fence").and_then(|(at, size)| {
            let p = self.memory.partition();
            let words = [p.base(), p.mask(), self.abort];
            let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
            if size < bytes.len() as u64 {
                return Err(DriverError::Call { call: "cuModuleGetGlobal(__gpusan_fence)", code: NOT_FOUND });
            }
            self.driver.copy_htod(at, &bytes, self.stream)
        });
        if let Err(e) = set {
            let _ = self.driver.module_unload(handle);
            return driver_error(e);
        }
        let variables = match self.relocate(handle, &variables) {
            Ok(v) => v,
            Err(r) => {
                let _ = self.driver.module_unload(handle);
                return r;
            }
        };
        self.stats.modules += 1;
        self.modules.insert(handle, ModuleInfo { kernels: layouts, functions: Vec::new(), variables });
        Reply::Module(handle)
    }

    /// The module's `.global` variables moved into the partition: each gets an allocation
    /// there with the driver's copy's initial bytes, and `__gpusan_vars` (which the fenced
    /// code reads their addresses from) the allocations' addresses. Undone on failure.
    fn relocate(&mut self, handle: Raw, names: &[String]) -> Result<Vec<(String, u64, u64)>, Reply> {
        if names.is_empty() {
            return Ok(Vec::new());
        }
        let mut placed: Vec<(String, u64, u64)> = Vec::new();
        let result = (|| {
            for name in names {
                let c = CString::new(name.as_str()).map_err(|_| error(INVALID_IMAGE, "a variable's name has a NUL"))?;
                let (original, size) = self.driver.global(handle, &c).map_err(driver_error)?;
                let at = self.memory.alloc(size.max(1)).map_err(|e| {
                    error(OUT_OF_MEMORY, format!("cuModuleLoadData: variable {name} ({size} bytes): {e}"))
                })?;
                placed.push((name.clone(), at, size));
                self.driver.copy_dtod(at, original, size, self.stream).map_err(driver_error)?;
            }
            let (table, size) = self.driver.global(handle, c"__gpusan_vars").map_err(driver_error)?;
            if size < 8 * names.len() as u64 {
                return Err(error(INVALID_IMAGE, "cuModuleLoadData: __gpusan_vars is shorter than its variables"));
            }
            let bytes: Vec<u8> = placed.iter().flat_map(|(_, at, _)| at.to_le_bytes()).collect();
            self.driver.copy_htod(table, &bytes, self.stream).map_err(driver_error)
        })();
        match result {
            Ok(()) => Ok(placed),
            Err(r) => {
                let _ = self.driver.stream_synchronize(self.stream);
                for (_, at, _) in placed {
                    let _ = self.memory.free(at);
                }
                Err(r)
            }
        }
    }

    fn function(&mut self, module: Raw, name: &str) -> Reply {
        let Some(m) = self.modules.get_mut(&module) else {
            return error(INVALID_HANDLE, format!("cuModuleGetFunction({module:#x}): not a module of the tenant's"));
        };
        let Some((_, info)) = m.kernels.iter().find(|(n, _)| n == name) else {
            return error(NOT_FOUND, format!("cuModuleGetFunction: no kernel `{name}` in the module"));
        };
        let info = info.clone();
        let Ok(c) = CString::new(name) else { return error(INVALID_VALUE, "a kernel name with a NUL byte") };
        match self.driver.function(module, &c) {
            Ok(f) => {
                m.functions.push(f);
                let params = info.params.clone();
                self.functions.insert(f, info);
                Reply::Function { handle: f, params }
            }
            Err(e) => driver_error(e),
        }
    }

    /// A tensor map, made by the manager's driver if the whole tensor it declares (every
    /// byte a copy through it can reach: the hardware clips boxes to the tensor) lies in
    /// the tenant's partition.
    fn encode_map(
        &mut self,
        call: &str,
        data_type: u32,
        dims: &[u64],
        strides: &[u64],
        address: u64,
        make: impl FnOnce(&Driver) -> Result<[u8; 128], DriverError>,
    ) -> Reply {
        use gpusan_runtime::tensormap::{reach, Layout};
        let Some(bytes) = reach(&Layout { data_type, dims, strides }) else {
            return error(
                INVALID_VALUE,
                format!(
                    "{call}: a tensor of {} dimension(s), data type {data_type}, that gpusan cannot bound",
                    dims.len()
                ),
            );
        };
        if !self.memory.partition().contains(address, bytes) {
            return error(
                INVALID_VALUE,
                format!("{call}: the tensor at {address:#x} ({bytes} bytes) does not lie in the tenant's partition"),
            );
        }
        if self.maps.len() >= MAX_MAPS {
            return error(OUT_OF_MEMORY, format!("{call}: the tenant has made {MAX_MAPS} tensor maps already"));
        }
        match make(self.driver) {
            Ok(map) => {
                self.maps.insert(map);
                Reply::Bytes(map.to_vec())
            }
            Err(e) => driver_error(e),
        }
    }

    fn launch(&mut self, function: Raw, grid: [u32; 3], block: [u32; 3], shared: u32, mut params: Vec<u8>) -> Reply {
        let Some(info) = self.functions.get(&function) else {
            return error(INVALID_HANDLE, format!("cuLaunchKernel({function:#x}): not a function of the tenant's"));
        };
        if params.len() != info.buffer as usize {
            return error(
                INVALID_VALUE,
                format!("cuLaunchKernel: {} bytes of parameters for a kernel that takes {}", params.len(), info.buffer),
            );
        }
        for &i in &info.maps {
            let bound = info.params.get(i).and_then(|&(offset, size)| {
                let map: &[u8; 128] = params.get(offset as usize..(offset + size) as usize)?.try_into().ok()?;
                self.maps.contains(map).then_some(())
            });
            if bound.is_none() {
                return error(
                    INVALID_VALUE,
                    format!(
                        "cuLaunchKernel: parameter {i} is the tensor map of the kernel's tensor copies, and it holds no \
                         map the manager made for the tenant (cuTensorMapEncodeTiled)"
                    ),
                );
            }
        }
        let base = params.as_mut_ptr();
        // SAFETY: every (offset, size) lies inside the buffer (`param_layout` made them so,
        // and its length was checked).
        let mut pointers: Vec<*mut c_void> =
            info.params.iter().map(|&(offset, _)| unsafe { base.add(offset as usize) }.cast()).collect();
        let r = self.driver.launch(function, grid, block, shared, self.stream, &mut pointers);
        if r.is_ok() {
            self.stats.launches += 1;
        }
        self.done(r)
    }

    fn synchronize(&mut self) -> Reply {
        // The flag's copy is queued behind the tenant's work, into pinned memory, and waited
        // for: one wait for both (a synchronization, then a copy, would be two round trips
        // to the GPU).
        let Some(page) = &self.flag_page else { return error(UNKNOWN, "the tenant's flag page is gone") };
        // SAFETY: our pinned page holds 8 bytes; the copy is waited for before it is read.
        if let Err(e) = unsafe { self.driver.copy_dtoh_into(page.at, self.abort, 8, self.stream) } {
            return driver_error(e);
        }
        // SAFETY: as above, the copy is done.
        let flag = unsafe { std::ptr::read_volatile(page.at.cast::<[u8; 8]>()) };
        if let Some(refused) = self.pending.take() {
            return refused;
        }
        if flag != [0; 8] {
            // 710: CUDA_ERROR_ASSERT, what a trap or a failed assert gives natively.
            return error(
                710,
                "a kernel of the tenant's trapped or failed an assertion (its fence's abort flag is set)",
            );
        }
        Reply::Done
    }
}

impl Drop for Tenant<'_> {
    /// A tenant that leaves, or whose connection dies (killed with SIGKILL): its work is
    /// waited for (its kernels cannot touch others' memory), then its stream and modules go,
    /// then its partition (`TenantMemory`'s drop).
    fn drop(&mut self) {
        let _ = self.driver.stream_synchronize(self.stream);
        let _ = self.driver.stream_destroy(self.stream);
        // The stream is done: no copy uses them any more.
        for s in [self.segment.take(), self.flag_page.take()].into_iter().flatten() {
            s.release(self.driver);
        }
        for e in self.events.drain() {
            let _ = self.driver.event_destroy(e);
        }
        for (m, _) in self.modules.drain() {
            let _ = self.driver.module_unload(m);
        }
    }
}

/// An entry's parameters packed as the driver lays them out: each at its alignment (its
/// `.align`, else its element's width), the buffer's length; `None` for a parameter of no
/// known size.
pub fn param_layout(f: &Function) -> Option<(Vec<(u32, u32)>, u32)> {
    let mut at: u64 = 0;
    let mut out = Vec::new();
    for p in f.params.as_deref().unwrap_or_default() {
        let width = u64::from(gpusan_ptx::ast::type_width(&p.ty)?);
        let elem = width * u64::from(p.vector.unwrap_or(1));
        let mut size = elem;
        for d in &p.array {
            size = size.checked_mul((*d)?)?;
        }
        let align = u64::from(p.align.unwrap_or(0)).max(elem.min(16)).max(1);
        at = at.next_multiple_of(align);
        out.push((u32::try_from(at).ok()?, u32::try_from(size).ok()?));
        at += size;
    }
    Some((out, u32::try_from(at).ok()?))
}
