//! The manager on the fake driver of `crates/cli/tests/fake_cuda`, driven over its socket as
//! a tenant drives it: partitions apart, copies and handles confined to their tenant,
//! modules fenced before the driver sees them (and refused where the fence cannot be sure),
//! a vanished tenant cleaned up while the others go on, and `--status`'s view of all.

use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use gpusan_serve::driver::Driver;
use gpusan_serve::protocol::{read_frame, write_frame, Reply, Request, VERSION};
use gpusan_serve::server::{Config, Log, Server};
use gpusan_serve::tenant::{INVALID_HANDLE, INVALID_VALUE, NOT_FOUND, NOT_SUPPORTED};

fn fake_driver() -> &'static Path {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../cli/tests/fake_cuda/libcuda.c");
        let dir = std::env::temp_dir().join(format!("gpusan-serve-fake-s-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let lib = dir.join("libcuda.so.1");
        let out = Command::new("cc")
            .args(["-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o"])
            .arg(&lib)
            .arg(&src)
            .output()
            .expect("a C compiler (cc)");
        assert!(out.status.success(), "cc: {}", String::from_utf8_lossy(&out.stderr));
        lib
    })
}

/// The fake driver keeps process-wide state (the last module loaded): one test at a time.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn fake<T: Copy>(name: &[u8]) -> T {
    // SAFETY: a function of the fake driver's with the signature the caller names.
    unsafe {
        let lib = Box::leak(Box::new(libloading::Library::new(fake_driver()).unwrap()));
        *lib.get::<T>(name).unwrap()
    }
}

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A manager on a fresh socket, serving in a thread; its log.
fn manager() -> (PathBuf, Captured) {
    manager_with(Config::default())
}

fn manager_with(config: Config) -> (PathBuf, Captured) {
    static DRIVER: OnceLock<&'static Driver> = OnceLock::new();
    let driver = *DRIVER.get_or_init(|| Box::leak(Box::new(Driver::open(fake_driver(), 0).unwrap())));
    let dir = tempfile::tempdir().unwrap().keep();
    let socket = dir.join("serve.sock");
    let captured = Captured::default();
    let log: Log = Arc::new(Mutex::new(Box::new(captured.clone())));
    let server = Server::bind(&socket, driver, log).unwrap().with_config(config);
    std::thread::spawn(move || server.run());
    (socket, captured)
}

struct Tenant {
    conn: UnixStream,
    base: u64,
    size: u64,
}

impl Tenant {
    fn call(&mut self, r: Request) -> Reply {
        write_frame(&mut self.conn, &r).unwrap();
        if !r.answered() {
            return Reply::Done; // as the tenant's side: sent, not waited for
        }
        read_frame(&mut self.conn).unwrap()
    }
    fn alloc(&mut self, bytes: u64) -> u64 {
        match self.call(Request::MemAlloc { bytes }) {
            Reply::Pointer(p) => p,
            r => panic!("MemAlloc: {r:?}"),
        }
    }
}

fn connect(socket: &Path, name: &str, log2: u32) -> Tenant {
    let mut conn = UnixStream::connect(socket).unwrap();
    write_frame(&mut conn, &Request::Hello { version: VERSION, pid: 1, name: name.into(), memory_log2: log2 }).unwrap();
    match read_frame(&mut conn).unwrap() {
        Reply::Hello { partition_base, partition_size, .. } => {
            Tenant { conn, base: partition_base, size: partition_size }
        }
        r => panic!("Hello: {r:?}"),
    }
}

fn refused(r: Reply, code: i32, words: &str) {
    match r {
        Reply::Error { code: c, message } => {
            assert_eq!(c, code, "{message}");
            assert!(message.contains(words), "{message:?} should say {words:?}");
        }
        r => panic!("expected a refusal ({words}), got {r:?}"),
    }
}

fn status(socket: &Path) -> Vec<gpusan_serve::protocol::TenantStatus> {
    let mut conn = UnixStream::connect(socket).unwrap();
    write_frame(&mut conn, &Request::Status).unwrap();
    match read_frame(&mut conn).unwrap() {
        Reply::Status(s) => s,
        r => panic!("Status: {r:?}"),
    }
}

const PTX: &str = "
.version 8.0
.target sm_90
.address_size 64
.visible .entry store(.param .u64 p, .param .u32 v)
{
    .reg .b64 %rd<2>;
    .reg .b32 %r<2>;
    ld.param.u64 %rd1, [p];
    ld.param.u32 %r1, [v];
    st.global.u32 [%rd1], %r1;
    ret;
}
";

#[test]
fn two_tenants_get_disjoint_partitions_and_copies_stay_in_their_own_allocations() {
    let _s = serial();
    let (socket, _log) = manager();
    let mut a = connect(&socket, "a", 24);
    let mut b = connect(&socket, "b", 24);
    assert!(a.base + a.size <= b.base || b.base + b.size <= a.base, "partitions overlap");
    let pa = a.alloc(1000);
    let pb = b.alloc(1000);
    assert!((a.base..a.base + a.size).contains(&pa));
    assert_eq!(a.call(Request::CopyHtoD { dst: pa, data: vec![7; 1000] }), Reply::Done);
    match a.call(Request::CopyDtoH { src: pa, bytes: 1000 }) {
        Reply::Bytes(b) => assert!(b.iter().all(|&x| x == 7)),
        r => panic!("{r:?}"),
    }
    // Into another tenant's allocation, past one's own, or into its unallocated partition.
    refused(a.call(Request::CopyHtoD { dst: pb, data: vec![1; 8] }), INVALID_VALUE, "outside the tenant's partition");
    refused(a.call(Request::CopyHtoD { dst: pa + 1000, data: vec![1; 100] }), INVALID_VALUE, "outside its allocations");
    refused(a.call(Request::MemsetD8 { dst: pa, value: 0, count: 4096 }), INVALID_VALUE, "outside its allocations");
    refused(a.call(Request::CopyDtoH { src: pb, bytes: 8 }), INVALID_VALUE, "outside the tenant's partition");
    // b's bytes are untouched.
    match b.call(Request::CopyDtoH { src: pb, bytes: 1000 }) {
        Reply::Bytes(bytes) => assert!(bytes.iter().all(|&x| x != 1)),
        r => panic!("{r:?}"),
    }
    refused(a.call(Request::MemFree { ptr: pb }), INVALID_VALUE, "not the base of a live allocation");
    assert_eq!(a.call(Request::MemFree { ptr: pa }), Reply::Done);
}

#[test]
fn a_module_is_fenced_with_the_tenants_base_and_mask_before_the_driver_loads_it() {
    let _s = serial();
    let (socket, _log) = manager();
    let mut a = connect(&socket, "a", 22);
    let loaded = tempfile::NamedTempFile::new().unwrap();
    std::env::set_var("FAKE_CUDA_LOADED", loaded.path());
    let module = a.call(Request::ModuleLoad { image: PTX.as_bytes().to_vec() });
    std::env::remove_var("FAKE_CUDA_LOADED");
    let Reply::Module(module) = module else { panic!("{module:?}") };
    let text = std::fs::read_to_string(loaded.path()).unwrap();
    assert!(text.contains("__gpusan_fence"), "the driver got the PTX as written:\n{text}");
    let constants: extern "C" fn() -> *const u64 = fake(b"fake_fence_constants\0");
    // SAFETY: the fake's three words.
    let c = unsafe { std::slice::from_raw_parts(constants(), 3) };
    assert_eq!((c[0], c[1]), (a.base, a.size - 1));
    assert!((a.base..a.base + a.size).contains(&c[2]), "the abort flag lies in the partition");
    let Reply::Function { handle, params } = a.call(Request::GetFunction { module, name: "store".into() }) else {
        panic!()
    };
    assert_eq!(params, vec![(0, 8), (8, 4)]);
    let p = a.alloc(64);
    let mut packed = p.to_le_bytes().to_vec();
    packed.extend_from_slice(&5u32.to_le_bytes());
    let launch =
        |params: Vec<u8>| Request::Launch { function: handle, grid: [1; 3], block: [32, 1, 1], shared: 0, params };
    assert_eq!(a.call(launch(packed.clone())), Reply::Done);
    assert_eq!(a.call(Request::Synchronize), Reply::Done);
    // A launch is not answered: its refusal fails the next synchronization, once.
    a.call(launch(packed[..8].to_vec()));
    a.call(launch(packed.clone()));
    refused(a.call(Request::Synchronize), INVALID_VALUE, "takes 12");
    assert_eq!(a.call(Request::Synchronize), Reply::Done);
    // Another tenant cannot launch it, nor unload the module.
    let mut b = connect(&socket, "b", 22);
    b.call(launch(packed));
    refused(b.call(Request::Synchronize), INVALID_HANDLE, "not a function of the tenant's");
    refused(b.call(Request::ModuleUnload { module }), INVALID_HANDLE, "not a module of the tenant's");
    assert_eq!(a.call(Request::ModuleUnload { module }), Reply::Done);
}

#[test]
fn modules_the_fence_cannot_make_safe_are_refused() {
    let _s = serial();
    let (socket, log) = manager();
    let mut a = connect(&socket, "a", 22);
    refused(a.call(Request::ModuleLoad { image: b"\x7fELF\x02\x01\x01".to_vec() }), NOT_SUPPORTED, "machine code");
    // A variable whose address is taken in another's initializer: not relocated yet.
    let in_init =
        PTX.replace(".visible .entry", ".visible .global .u32 g;\n.visible .global .u64 pg = g;\n.visible .entry");
    refused(a.call(Request::ModuleLoad { image: in_init.into_bytes() }), NOT_SUPPORTED, "cannot be fenced");
    // A 32-bit register used as an address: the fence counts it unfenced.
    let narrow = PTX.replace("st.global.u32 [%rd1], %r1;", "st.global.u32 [%r1], %r1;");
    refused(a.call(Request::ModuleLoad { image: narrow.into_bytes() }), NOT_SUPPORTED, "cannot be fenced");
    let text = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
    assert_eq!(text.matches("tenant 1: refused").count(), 3, "{text}");
}

#[test]
fn a_tenant_that_vanishes_is_cleaned_up_and_the_others_go_on() {
    let _s = serial();
    let (socket, log) = manager();
    let mut a = connect(&socket, "a", 24);
    let mut b = connect(&socket, "b", 24);
    let pb = b.alloc(4096);
    b.call(Request::CopyHtoD { dst: pb, data: vec![9; 4096] });
    a.alloc(3 << 20);
    assert_eq!(status(&socket).len(), 2);
    // As a SIGKILL leaves it: the socket closes mid-session, nothing said.
    drop(a);
    let deadline = Instant::now() + Duration::from_secs(10);
    while status(&socket).len() != 1 {
        assert!(Instant::now() < deadline, "the vanished tenant was never cleaned up");
        std::thread::sleep(Duration::from_millis(10));
    }
    let s = status(&socket);
    assert_eq!(s[0].name, "b");
    assert_eq!(s[0].used, 4096 + 512, "b's allocation and its abort flag");
    match b.call(Request::CopyDtoH { src: pb, bytes: 4096 }) {
        Reply::Bytes(bytes) => assert!(bytes.iter().all(|&x| x == 9)),
        r => panic!("{r:?}"),
    }
    let text = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
    assert!(text.contains("tenant 1 left (disconnected)"), "{text}");
}

#[test]
fn a_hello_of_another_version_or_an_impossible_partition_is_refused() {
    let _s = serial();
    let (socket, _log) = manager();
    for (version, log2, words) in [(VERSION + 1, 24, "protocol version"), (VERSION, 12, "between 2^21")] {
        let mut conn = UnixStream::connect(&socket).unwrap();
        write_frame(&mut conn, &Request::Hello { version, pid: 1, name: "x".into(), memory_log2: log2 }).unwrap();
        let r: Reply = read_frame(&mut conn).unwrap();
        let Reply::Error { message, .. } = r else { panic!("{r:?}") };
        assert!(message.contains(words), "{message}");
    }
}

/// A tenant killed by SIGKILL stops wherever it is: between two calls, after sending a
/// request whose reply it never reads, or in the middle of a frame (its header or its
/// body). The manager sees only what reached the socket. Here every such cut of a session
/// that allocates, copies, loads, launches and synchronizes: the manager lives on, each cut
/// tenant is cleaned up, the driver's physical memory is all given back, and a new tenant
/// is served as before.
#[test]
fn tenants_cut_off_at_any_byte_of_any_call_leave_nothing_behind() {
    let _s = serial();
    let (socket, log) = manager();
    let physical: extern "C" fn() -> u64 = fake(b"fake_vmm_physical_bytes\0");
    // The other tests' managers still clean up the tenants they dropped at their end.
    let deadline = Instant::now() + Duration::from_secs(20);
    while physical() != 0 {
        assert!(Instant::now() < deadline, "the earlier tests' tenants keep {} bytes", physical());
        std::thread::sleep(Duration::from_millis(10));
    }
    const STEPS: usize = 8;
    let mut cuts = 0;
    for step in 0..STEPS {
        for partial in [0usize, 1, 3, 4, 5, usize::MAX / 2, usize::MAX] {
            let mut conn = UnixStream::connect(&socket).unwrap();
            let session = |n: usize, conn: &mut UnixStream| -> Vec<Request> {
                // The session's requests, each made from the replies before it.
                let mut reqs = Vec::new();
                let mut p = 0;
                let mut module = 0;
                let mut function = 0;
                for i in 0..=n {
                    let r = match i {
                        0 => Request::Hello { version: VERSION, pid: 7, name: format!("cut{step}"), memory_log2: 23 },
                        1 => Request::MemAlloc { bytes: 3 << 20 },
                        2 => Request::CopyHtoD { dst: p, data: vec![1; 4096] },
                        3 => Request::ModuleLoad { image: PTX.as_bytes().to_vec() },
                        4 => Request::GetFunction { module, name: "store".into() },
                        5 => {
                            let mut params = p.to_le_bytes().to_vec();
                            params.extend_from_slice(&5u32.to_le_bytes());
                            Request::Launch { function, grid: [1; 3], block: [32, 1, 1], shared: 0, params }
                        }
                        6 => Request::MemAlloc { bytes: 1 << 20 },
                        _ => Request::Synchronize,
                    };
                    if i == n {
                        reqs.push(r);
                        break;
                    }
                    write_frame(conn, &r).unwrap();
                    if !r.answered() {
                        continue;
                    }
                    match read_frame(conn).unwrap() {
                        Reply::Pointer(x) if i == 1 => p = x,
                        Reply::Module(m) => module = m,
                        Reply::Function { handle, .. } => function = handle,
                        Reply::Error { code, message } => panic!("step {i}: refused {code}: {message}"),
                        _ => {}
                    }
                }
                reqs
            };
            let last = session(step, &mut conn).pop().unwrap();
            let mut bytes = Vec::new();
            write_frame(&mut bytes, &last).unwrap();
            let cut = match partial {
                usize::MAX => bytes.len(),
                x if x == usize::MAX / 2 => bytes.len() / 2,
                x => x.min(bytes.len()),
            };
            std::io::Write::write_all(&mut conn, &bytes[..cut]).unwrap();
            drop(conn); // as SIGKILL leaves it
            cuts += 1;
        }
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while !status(&socket).is_empty() {
        assert!(Instant::now() < deadline, "cut tenants never cleaned up: {:?}", status(&socket));
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(physical(), 0, "the driver's physical memory was not all given back");
    let text = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
    // A cut inside the Hello makes no tenant; every other cut is a tenant that left.
    let tenants = cuts - text.matches("ended before Hello").count();
    assert_eq!(tenants, cuts - 6, "{text}");
    assert_eq!(text.matches(" left (").count(), tenants, "{text}");
    assert!(!text.contains("panick"), "{text}");
    let mut fresh = connect(&socket, "after", 22);
    let q = fresh.alloc(4096);
    assert_eq!(fresh.call(Request::CopyHtoD { dst: q, data: vec![3; 4096] }), Reply::Done);
    match fresh.call(Request::CopyDtoH { src: q, bytes: 4096 }) {
        Reply::Bytes(b) => assert!(b.iter().all(|&x| x == 3)),
        r => panic!("{r:?}"),
    }
}

/// The tenant's program made its copies and sets on its legacy stream, after its kernels;
/// in the manager they must go on the tenant's own stream, behind its launches (the
/// manager's legacy stream would not wait for them).
#[test]
fn a_tenants_copies_sets_and_launches_all_go_on_its_stream_in_order() {
    let _s = serial();
    let (socket, _log) = manager();
    let mut a = connect(&socket, "a", 22);
    let Reply::Module(module) = a.call(Request::ModuleLoad { image: PTX.as_bytes().to_vec() }) else { panic!() };
    let Reply::Function { handle, .. } = a.call(Request::GetFunction { module, name: "store".into() }) else {
        panic!()
    };
    let p = a.alloc(4096);
    let trail = tempfile::NamedTempFile::new().unwrap();
    std::env::set_var("FAKE_CUDA_STREAM_LOG", trail.path());
    let mut params = p.to_le_bytes().to_vec();
    params.extend_from_slice(&5u32.to_le_bytes());
    let launch = Request::Launch { function: handle, grid: [1; 3], block: [32, 1, 1], shared: 0, params };
    let calls = [
        launch.clone(),
        Request::CopyHtoD { dst: p, data: vec![1; 64] },
        launch.clone(),
        Request::MemsetD8 { dst: p, value: 2, count: 64 },
        launch,
        Request::CopyDtoH { src: p, bytes: 64 },
    ];
    for c in calls {
        assert!(matches!(a.call(c), Reply::Done | Reply::Bytes(_)));
    }
    std::env::remove_var("FAKE_CUDA_STREAM_LOG");
    let text = std::fs::read_to_string(trail.path()).unwrap();
    let lines: Vec<(&str, &str)> = text.lines().filter_map(|l| l.split_once(' ')).collect();
    let names: Vec<&str> = lines.iter().map(|(c, _)| *c).collect();
    assert_eq!(
        names,
        [
            "cuLaunchKernel",
            "cuMemcpyHtoDAsync",
            "cuLaunchKernel",
            "cuMemsetD8Async",
            "cuLaunchKernel",
            "cuMemcpyDtoHAsync"
        ],
        "{text}"
    );
    let stream = lines[0].1;
    assert_ne!(stream, "0", "the tenant's work went on the legacy stream");
    assert!(lines.iter().all(|(_, s)| *s == stream), "not all on the tenant's one stream:\n{text}");
}

/// Events are the tenant's own, like its other handles; a 32-bit set must lie inside one of
/// its allocations and be aligned; the memory a tenant is told of is its partition's.
#[test]
fn events_word_sets_and_memory_info_stay_the_tenants_own() {
    let _s = serial();
    let (socket, _log) = manager();
    let mut a = connect(&socket, "a", 22);
    let mut b = connect(&socket, "b", 22);
    let Reply::Event(e) = a.call(Request::EventCreate { flags: 0 }) else { panic!() };
    assert_eq!(a.call(Request::EventRecord { event: e }), Reply::Done);
    assert_eq!(a.call(Request::EventSynchronize { event: e }), Reply::Done);
    assert_eq!(a.call(Request::EventQuery { event: e }), Reply::Done);
    assert!(matches!(a.call(Request::EventElapsed { start: e, end: e }), Reply::Float(_)));
    refused(b.call(Request::EventRecord { event: e }), INVALID_HANDLE, "not an event of the tenant's");
    refused(b.call(Request::EventDestroy { event: e }), INVALID_HANDLE, "not an event of the tenant's");
    assert_eq!(a.call(Request::EventDestroy { event: e }), Reply::Done);
    refused(a.call(Request::EventQuery { event: e }), INVALID_HANDLE, "not an event of the tenant's");

    let p = a.alloc(4096);
    assert_eq!(a.call(Request::MemsetD32 { dst: p, value: 0x01020304, count: 1024 }), Reply::Done);
    match a.call(Request::CopyDtoH { src: p + 4092, bytes: 4 }) {
        Reply::Bytes(w) => assert_eq!(w, 0x01020304u32.to_le_bytes()),
        r => panic!("{r:?}"),
    }
    refused(a.call(Request::MemsetD32 { dst: p, value: 0, count: 1025 }), INVALID_VALUE, "not inside");
    refused(a.call(Request::MemsetD32 { dst: p + 2, value: 0, count: 4 }), INVALID_VALUE, "not 4-byte aligned");
    let pb = b.alloc(4096);
    refused(a.call(Request::MemsetD32 { dst: pb, value: 0, count: 4 }), INVALID_VALUE, "not inside");

    match a.call(Request::MemInfo) {
        Reply::MemInfo { free, total } => {
            assert_eq!(total, a.size);
            assert_eq!(free, a.size - 4096 - 512, "its allocation and its abort flag are used");
        }
        r => panic!("{r:?}"),
    }
    assert_eq!(a.call(Request::Query), Reply::Done);
    assert!(matches!(a.call(Request::DeviceAttribute { attribute: 75 }), Reply::Value(9)));
}

/// nvcc's fatbins carry `compute_90` PTX beside their cubins: the manager fences that PTX
/// and loads it (the kernels' layouts from it); a fatbin of machine code only is refused.
#[test]
fn a_fatbins_ptx_is_fenced_and_machine_code_alone_refused() {
    let _s = serial();
    let (socket, _log) = manager();
    let mut a = connect(&socket, "a", 22);
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fatbin/tests/fixtures");
    let plain = std::fs::read(fixtures.join("plain.fatbin")).unwrap();
    let loaded = tempfile::NamedTempFile::new().unwrap();
    std::env::set_var("FAKE_CUDA_LOADED", loaded.path());
    let module = a.call(Request::ModuleLoad { image: plain });
    std::env::remove_var("FAKE_CUDA_LOADED");
    let Reply::Module(module) = module else { panic!("{module:?}") };
    let text = std::fs::read_to_string(loaded.path()).unwrap();
    assert!(text.contains("__gpusan_fence") && text.contains(".entry"), "the driver got no fenced PTX:\n{text}");
    let Reply::Function { params, .. } = a.call(Request::GetFunction { module, name: "_Z5scalePfidc".into() }) else {
        panic!()
    };
    assert_eq!(params, vec![(0, 8), (8, 4), (16, 8), (24, 1)], "scale(float*, int, double, char)");
    // Compressed PTX (nvcc's default) is decompressed first.
    let sm90 = std::fs::read(fixtures.join("sm90.fatbin")).unwrap();
    assert!(matches!(a.call(Request::ModuleLoad { image: sm90.clone() }), Reply::Module(_)));
    // The same fatbin with its cubin alone.
    let fatbin = gpusan_fatbin::Fatbin::parse(&sm90).unwrap();
    let elf = fatbin.entries.iter().find(|e| e.kind == gpusan_fatbin::EntryKind::Elf).unwrap();
    let at = elf.offset as usize - fatbin.offset as usize;
    let entry = &fatbin.data[at..at + elf.header_size as usize + elf.payload.len()];
    let mut only_elf = Vec::new();
    only_elf.extend_from_slice(&gpusan_fatbin::FATBIN_MAGIC.to_le_bytes());
    only_elf.extend_from_slice(&1u16.to_le_bytes());
    only_elf.extend_from_slice(&16u16.to_le_bytes());
    only_elf.extend_from_slice(&(entry.len() as u64).to_le_bytes());
    only_elf.extend_from_slice(entry);
    assert_eq!(gpusan_fatbin::Fatbin::parse(&only_elf).unwrap().entries.len(), 1);
    refused(a.call(Request::ModuleLoad { image: only_elf }), NOT_SUPPORTED, "no PTX for this GPU");
}

/// A cubin (no PTX): the fence cannot take it. With `--allow-native` a tenant alone on the
/// GPU may load it unfenced (its kernels' layouts from the cubin), and holds the GPU alone
/// until it leaves; without it, or with another tenant present, it is refused.
#[test]
fn machine_code_runs_unfenced_only_for_a_tenant_alone_that_the_operator_allows() {
    let _s = serial();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fatbin/tests/fixtures");
    let plain = std::fs::read(fixtures.join("plain.fatbin")).unwrap();
    let fatbin = gpusan_fatbin::Fatbin::parse(&plain).unwrap();
    let cubin = fatbin.entries.iter().find(|e| e.kind == gpusan_fatbin::EntryKind::Elf).unwrap().contents().unwrap();
    let cubin = cubin.into_owned();

    let (socket, _log) = manager();
    let mut a = connect(&socket, "a", 22);
    refused(a.call(Request::ModuleLoad { image: cubin.clone() }), NOT_SUPPORTED, "--allow-native");

    let (socket, log) = manager_with(Config { allow_native: true, ..Config::default() });
    let mut a = connect(&socket, "a", 22);
    let b = connect(&socket, "b", 22);
    refused(a.call(Request::ModuleLoad { image: cubin.clone() }), NOT_SUPPORTED, "1 other tenant(s) are here");
    drop(b);
    let deadline = Instant::now() + Duration::from_secs(10);
    while status(&socket).len() != 1 {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(10));
    }
    let Reply::Module(module) = a.call(Request::ModuleLoad { image: cubin.clone() }) else { panic!() };
    let Reply::Function { params, .. } = a.call(Request::GetFunction { module, name: "_Z5scalePfidc".into() }) else {
        panic!()
    };
    assert_eq!(params, vec![(0, 8), (8, 4), (16, 8), (24, 1)], "from the cubin's .nv.info");
    assert!(status(&socket)[0].native);
    // Nobody joins while it holds the GPU.
    let mut conn = UnixStream::connect(&socket).unwrap();
    write_frame(&mut conn, &Request::Hello { version: VERSION, pid: 2, name: "c".into(), memory_log2: 22 }).unwrap();
    refused(read_frame(&mut conn).unwrap(), NOT_SUPPORTED, "held by tenant");
    drop(a);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut conn = UnixStream::connect(&socket).unwrap();
        write_frame(&mut conn, &Request::Hello { version: VERSION, pid: 3, name: "d".into(), memory_log2: 22 })
            .unwrap();
        if matches!(read_frame(&mut conn).unwrap(), Reply::Hello { .. }) {
            break;
        }
        assert!(Instant::now() < deadline, "the GPU was never given back");
        std::thread::sleep(Duration::from_millis(10));
    }
    let text = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
    assert!(text.contains("loaded unfenced machine code"), "{text}");
}

/// A tenant's bulk segment: a memfd sent with its frame, mapped by the manager, copies
/// through it both ways; a piece past its end, or a segment without a descriptor, refused.
#[test]
fn copies_go_through_the_segment_a_tenant_gives() {
    use std::os::fd::{AsRawFd, FromRawFd};
    let _s = serial();
    let (socket, log) = manager();
    let mut a = connect(&socket, "a", 22);
    refused(a.call(Request::Segment { bytes: 4096 }), INVALID_VALUE, "no descriptor");
    // A plain file could shrink under the manager's mapping: refused.
    let plain = tempfile::tempfile().unwrap();
    plain.set_len(1 << 16).unwrap();
    let mut frame = Vec::new();
    write_frame(&mut frame, &Request::Segment { bytes: 1 << 16 }).unwrap();
    gpusan_serve::fdpass::send_with_fd(&a.conn, &frame, plain.as_raw_fd()).unwrap();
    refused(read_frame::<Reply>(&mut a.conn).unwrap(), INVALID_VALUE, "sealed against shrinking");
    // A memfd sealed at its size, as the tenant side makes it.
    // SAFETY: creating and sealing a memfd of ours.
    let mut file = unsafe {
        let fd = libc::memfd_create(c"segment".as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING);
        assert!(fd >= 0);
        let file = std::fs::File::from_raw_fd(fd);
        file.set_len(1 << 16).unwrap();
        assert_eq!(libc::fcntl(fd, libc::F_ADD_SEALS, libc::F_SEAL_SHRINK | libc::F_SEAL_GROW), 0);
        file
    };
    let mut frame = Vec::new();
    write_frame(&mut frame, &Request::Segment { bytes: 1 << 16 }).unwrap();
    gpusan_serve::fdpass::send_with_fd(&a.conn, &frame, file.as_raw_fd()).unwrap();
    assert_eq!(read_frame::<Reply>(&mut a.conn).unwrap(), Reply::Done);
    let p = a.alloc(8192);
    use std::io::{Read, Seek, SeekFrom, Write};
    file.seek(SeekFrom::Start(100)).unwrap();
    file.write_all(&[7u8; 4096]).unwrap();
    assert_eq!(a.call(Request::CopyHtoDShared { dst: p, offset: 100, bytes: 4096 }), Reply::Done);
    match a.call(Request::CopyDtoH { src: p, bytes: 4096 }) {
        Reply::Bytes(b) => assert!(b.iter().all(|&x| x == 7), "the device did not get the segment's bytes"),
        r => panic!("{r:?}"),
    }
    assert_eq!(a.call(Request::CopyHtoD { dst: p + 4096, data: vec![9; 4096] }), Reply::Done);
    assert_eq!(a.call(Request::CopyDtoHShared { src: p + 4096, offset: 0, bytes: 4096 }), Reply::Done);
    let mut back = vec![0u8; 4096];
    file.seek(SeekFrom::Start(0)).unwrap();
    file.read_exact(&mut back).unwrap();
    assert!(back.iter().all(|&x| x == 9), "the segment did not get the device's bytes");
    refused(
        a.call(Request::CopyHtoDShared { dst: p, offset: (1 << 16) - 10, bytes: 20 }),
        INVALID_VALUE,
        "past the segment",
    );
    refused(a.call(Request::CopyHtoDShared { dst: p + 8000, offset: 0, bytes: 4096 }), INVALID_VALUE, "outside");
    let text = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
    assert!(text.contains("gave a segment of 0 MiB"), "{text}");
}

/// A module's `.global` variable lives in the tenant's partition: the manager gives it an
/// allocation there with the driver's copy's initial bytes, fills `__gpusan_vars` (where the
/// fenced code reads its address), and answers `cuModuleGetGlobal` with it.
#[test]
fn a_modules_variables_are_moved_into_the_partition() {
    let _s = serial();
    let (socket, _log) = manager();
    let mut a = connect(&socket, "a", 22);
    // The fake driver's one module variable, `table` (64 bytes), with its initial bytes.
    let variable: extern "C" fn() -> u64 = fake(b"fake_variable_address\0");
    // SAFETY: the fake's variable is 64 bytes of its host memory.
    unsafe { std::ptr::write_bytes(variable() as *mut u8, 0x5a, 64) };
    let with_var = PTX
        .replace(".visible .entry", ".visible .global .align 8 .b8 table[64];\n.visible .entry")
        .replace("ld.param.u64 %rd1, [p];", "mov.u64 %rd1, table;");
    let Reply::Module(module) = a.call(Request::ModuleLoad { image: with_var.into_bytes() }) else { panic!() };
    let Reply::Global { ptr, bytes } = a.call(Request::GetGlobal { module, name: "table".into() }) else { panic!() };
    assert_eq!(bytes, 64);
    assert!((a.base..a.base + a.size).contains(&ptr), "{ptr:#x} outside the partition");
    let vars: extern "C" fn() -> *const u64 = fake(b"fake_fence_vars\0");
    // SAFETY: the fake's table of 16 words.
    assert_eq!(unsafe { *vars() }, ptr, "__gpusan_vars[0] is not the copy's address");
    match a.call(Request::CopyDtoH { src: ptr, bytes: 64 }) {
        Reply::Bytes(b) => assert!(b.iter().all(|&x| x == 0x5a), "the initial bytes were not copied"),
        r => panic!("{r:?}"),
    }
    refused(a.call(Request::GetGlobal { module, name: "nope".into() }), NOT_FOUND, "no variable nope");
    let used = status(&socket)[0].used;
    assert_eq!(a.call(Request::ModuleUnload { module }), Reply::Done);
    assert!(status(&socket)[0].used < used, "the variable's copy was not freed with its module");
}

/// A fenced kernel that meets a `trap` sets its tenant's abort flag and exits: the next
/// synchronization reports 710 (as a trap does natively) to that tenant alone, read from
/// the flag after the tenant's work is done.
#[test]
fn a_set_abort_flag_fails_the_tenants_synchronization_alone() {
    let _s = serial();
    let (socket, _log) = manager();
    let mut a = connect(&socket, "a", 22);
    let mut b = connect(&socket, "b", 22);
    let Reply::Module(_) = a.call(Request::ModuleLoad { image: PTX.as_bytes().to_vec() }) else { panic!() };
    let constants: extern "C" fn() -> *const u64 = fake(b"fake_fence_constants\0");
    // SAFETY: the fake's three words.
    let flag = unsafe { std::slice::from_raw_parts(constants(), 3) }[2];
    assert_eq!(a.call(Request::Synchronize), Reply::Done, "the flag is clear at the start");
    // The fake driver's device memory is the manager's own: what a trapping kernel writes.
    // SAFETY: the flag's 8 bytes, in the partition the fake mapped.
    unsafe { std::ptr::write_volatile(flag as *mut u64, 1) };
    refused(a.call(Request::Synchronize), 710, "abort flag");
    assert_eq!(b.call(Request::Synchronize), Reply::Done, "the other tenant is not told");
}

/// A kernel whose tensor copies (TMA) read their map from a parameter: that copy is as
/// fenced as the map is, so the manager makes maps only on tensors inside the tenant's
/// partition, and launches the kernel only with such a map in that parameter.
#[test]
fn tensor_copies_run_only_with_maps_the_manager_made_on_the_partition() {
    use gpusan_serve::protocol::TiledMap;
    const TMA: &str = "
.version 8.0
.target sm_90
.address_size 64
.shared .align 128 .b8 tile[4096];
.visible .entry put(.param .align 64 .b8 put_map[128], .param .u32 put_x)
{
    .reg .b64 %rd<3>;
    .reg .b32 %r<3>;
    mov.b64 %rd1, put_map;
    ld.param.u32 %r1, [put_x];
    cvta.param.u64 %rd2, %rd1;
    mov.u32 %r2, tile;
    cp.async.bulk.tensor.1d.global.shared::cta.bulk_group [%rd2, {%r1}], [%r2];
    ret;
}
";
    let _s = serial();
    let (socket, log) = manager();
    let mut a = connect(&socket, "a", 22);
    let mut b = connect(&socket, "b", 22);
    let Reply::Module(module) = a.call(Request::ModuleLoad { image: TMA.as_bytes().to_vec() }) else { panic!() };
    let Reply::Function { handle, params } = a.call(Request::GetFunction { module, name: "put".into() }) else {
        panic!()
    };
    assert_eq!(params, vec![(0, 128), (128, 4)]);
    let floats = |address: u64, n: u64| TiledMap {
        data_type: 7, // CU_TENSOR_MAP_DATA_TYPE_FLOAT32
        address,
        dims: vec![n],
        strides: vec![],
        box_dim: vec![32],
        element_strides: vec![1],
        interleave: 0,
        swizzle: 0,
        l2_promotion: 0,
        oob_fill: 0,
    };
    let mine = a.alloc(4096);
    let theirs = b.alloc(4096);
    let map = match a.call(Request::TensorMapEncodeTiled(floats(mine, 1024))) {
        Reply::Bytes(m) => m,
        r => panic!("a map on the tenant's own memory: {r:?}"),
    };
    assert_eq!(map.len(), 128);
    // On another tenant's memory, or running past the partition's end: no map.
    refused(
        a.call(Request::TensorMapEncodeTiled(floats(theirs, 1024))),
        INVALID_VALUE,
        "does not lie in the tenant's partition",
    );
    let past_end = (a.base + a.size - 64) / 16 * 16;
    refused(
        a.call(Request::TensorMapEncodeTiled(floats(past_end, 1024))),
        INVALID_VALUE,
        "does not lie in the tenant's partition",
    );
    let launch = |map: &[u8]| {
        let mut params = map.to_vec();
        params.extend_from_slice(&0u32.to_le_bytes());
        Request::Launch { function: handle, grid: [1; 3], block: [32, 1, 1], shared: 0, params }
    };
    a.call(launch(&map));
    assert_eq!(a.call(Request::Synchronize), Reply::Done, "a map the manager made");
    // The same bytes with the address moved to the other tenant's memory: not a map made here.
    let mut forged = map.clone();
    forged[..8].copy_from_slice(&theirs.to_le_bytes());
    a.call(launch(&forged));
    refused(a.call(Request::Synchronize), INVALID_VALUE, "holds no map the manager made");
    // Maps are the tenant's own: b cannot launch with a's map either (nor a's function).
    let Reply::Module(bm) = b.call(Request::ModuleLoad { image: TMA.as_bytes().to_vec() }) else { panic!() };
    let Reply::Function { handle: bf, .. } = b.call(Request::GetFunction { module: bm, name: "put".into() }) else {
        panic!()
    };
    let mut params = map.clone();
    params.extend_from_slice(&0u32.to_le_bytes());
    b.call(Request::Launch { function: bf, grid: [1; 3], block: [32, 1, 1], shared: 0, params });
    refused(b.call(Request::Synchronize), INVALID_VALUE, "holds no map the manager made");
    // An im2col map (a 4-D NHWC tensor of floats) is made and bound the same way.
    use gpusan_serve::protocol::Im2colMap;
    let nhwc = |address: u64| Im2colMap {
        data_type: 7,
        address,
        dims: vec![8, 4, 4, 1],
        strides: vec![32, 128, 512],
        lower: vec![0, 0],
        upper: vec![0, 0],
        channels: 8,
        pixels: 16,
        element_strides: vec![1; 4],
        interleave: 0,
        swizzle: 0,
        l2_promotion: 0,
        oob_fill: 0,
    };
    let im2col = match a.call(Request::TensorMapEncodeIm2col(nhwc(mine))) {
        Reply::Bytes(m) => m,
        r => panic!("an im2col map on the tenant's own memory: {r:?}"),
    };
    refused(
        a.call(Request::TensorMapEncodeIm2col(nhwc(theirs))),
        INVALID_VALUE,
        "does not lie in the tenant's partition",
    );
    a.call(launch(&im2col));
    assert_eq!(a.call(Request::Synchronize), Reply::Done, "an im2col map the manager made");
    let text = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
    assert!(!text.contains("tenant 1: refused cuModuleLoadData"), "{text}");
}
