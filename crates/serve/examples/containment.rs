//! Fence containment on a real GPU (issue 18's first measurement): a manager in this
//! process, on the machine's driver, with two tenants on its socket. Tenant B fills a buffer
//! with a pattern; tenant A launches kernels that write at B's buffer (plain, atomic and
//! generic stores), far outside any partition, and a `trap`; it reads B's buffer (loads and
//! `cp.async`, bulk copies) into its own; it writes at B's buffer with bulk copies, and asks
//! for tensor maps (TMA) on B's buffer and launches a tensor copy with one it made up.
//! Every kernel is fenced by the manager; after each, B's buffer is checksummed and the
//! manager must still serve B.
//! Also the round trip of a launch through the socket (the forwarding cost, before any
//! batching). Prints one JSON document.
//!
//!   cargo run --release -p gpusan-serve --example containment [-- libcuda.so.1]

use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use gpusan_serve::driver::Driver;
use gpusan_serve::protocol::{read_frame, write_frame, Reply, Request, VERSION};
use gpusan_serve::server::{Log, Server};

const PTX: &str = r#"
.version 8.0
.target sm_90
.address_size 64
.visible .entry wild_store(.param .u64 p, .param .u32 v)
{
    .reg .b64 %rd<4>;
    .reg .b32 %r<4>;
    ld.param.u64 %rd1, [p];
    ld.param.u32 %r1, [v];
    mov.u32 %r2, %tid.x;
    mul.wide.u32 %rd2, %r2, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r1;
    ret;
}
.visible .entry wild_atomic(.param .u64 p, .param .u32 v)
{
    .reg .b64 %rd<4>;
    .reg .b32 %r<4>;
    ld.param.u64 %rd1, [p];
    ld.param.u32 %r1, [v];
    mov.u32 %r2, %tid.x;
    mul.wide.u32 %rd2, %r2, 4;
    add.s64 %rd3, %rd1, %rd2;
    atom.global.add.u32 %r3, [%rd3], %r1;
    ret;
}
.visible .entry wild_generic(.param .u64 p, .param .u32 v)
{
    .reg .b64 %rd<4>;
    .reg .b32 %r<4>;
    ld.param.u64 %rd1, [p];
    ld.param.u32 %r1, [v];
    mov.u32 %r2, %tid.x;
    mul.wide.u32 %rd2, %r2, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.u32 [%rd3], %r1;
    ret;
}
.visible .entry trapper(.param .u64 p, .param .u32 v)
{
    trap;
    ret;
}
.visible .entry empty(.param .u64 p, .param .u32 v)
{
    ret;
}
.visible .entry wild_load(.param .u64 p, .param .u64 out)
{
    .reg .b64 %rd<6>;
    .reg .b32 %r<4>;
    ld.param.u64 %rd1, [p];
    ld.param.u64 %rd4, [out];
    mov.u32 %r2, %tid.x;
    mul.wide.u32 %rd2, %r2, 4;
    add.s64 %rd3, %rd1, %rd2;
    ld.global.u32 %r1, [%rd3];
    add.s64 %rd5, %rd4, %rd2;
    st.global.u32 [%rd5], %r1;
    ret;
}
.visible .entry wild_cp_async(.param .u64 p, .param .u64 out)
{
    .shared .align 16 .b32 buf[256];
    .reg .b64 %rd<8>;
    .reg .b32 %r<6>;
    ld.param.u64 %rd1, [p];
    ld.param.u64 %rd4, [out];
    mov.u32 %r2, %tid.x;
    mul.wide.u32 %rd2, %r2, 4;
    add.s64 %rd3, %rd1, %rd2;
    mov.u32 %r3, buf;
    shl.b32 %r4, %r2, 2;
    add.u32 %r3, %r3, %r4;
    cp.async.ca.shared.global [%r3], [%rd3], 4;
    cp.async.wait_all;
    ld.shared.u32 %r1, [%r3];
    add.s64 %rd5, %rd4, %rd2;
    st.global.u32 [%rd5], %r1;
    ret;
}
"#;

/// Bulk copies (the TMA engine, run-time sizes) at a global address: the fence clamps the
/// copy into the partition. `wild_bulk` writes 1 KiB of `v` words at `p`;
/// `wild_bulk_read` copies 1 KiB from `p` into shared memory and stores it at `out`. Its
/// wait on the mbarrier gives up after a bound, so a copy that never lands cannot hang
/// the run.
const BULK_PTX: &str = include_str!("../tests/ptx/containment_bulk.ptx");

/// A tensor copy (TMA) through a `__grid_constant__` map parameter: 32 words of `v` from
/// shared memory into the tensor the map declares, at element `x`. The fence makes the
/// copy read the map from its parameter; the manager makes maps only on the tenant's own
/// memory and launches only with such a map there.
const TMA_PTX: &str = include_str!("../tests/ptx/containment_tma.ptx");

struct Tenant {
    conn: UnixStream,
    base: u64,
    size: u64,
}

impl Tenant {
    fn connect(socket: &std::path::Path, name: &str) -> Tenant {
        let mut conn = UnixStream::connect(socket).expect("the manager's socket");
        let hello = Request::Hello { version: VERSION, pid: std::process::id(), name: name.into(), memory_log2: 28 };
        write_frame(&mut conn, &hello).unwrap();
        match read_frame(&mut conn).unwrap() {
            Reply::Hello { partition_base, partition_size, .. } => {
                Tenant { conn, base: partition_base, size: partition_size }
            }
            r => panic!("Hello refused: {r:?}"),
        }
    }
    fn call(&mut self, r: Request) -> Reply {
        write_frame(&mut self.conn, &r).unwrap();
        if !r.answered() {
            return Reply::Done;
        }
        read_frame(&mut self.conn).unwrap()
    }
    fn bytes(&mut self, src: u64, bytes: u64) -> Vec<u8> {
        match self.call(Request::CopyDtoH { src, bytes }) {
            Reply::Bytes(b) => b,
            r => panic!("CopyDtoH: {r:?}"),
        }
    }
}

fn checksum(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf29ce484222325u64, |h, &x| (h ^ u64::from(x)).wrapping_mul(0x100000001b3))
}

fn main() {
    let lib = std::env::args().nth(1).unwrap_or_else(|| "libcuda.so.1".into());
    let driver: &'static Driver = Box::leak(Box::new(Driver::open(lib.as_ref(), 0).expect("the driver")));
    let dir = std::env::temp_dir().join(format!("gpusan-containment-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let socket = dir.join("serve.sock");
    let log_bytes = Arc::new(Mutex::new(Vec::<u8>::new()));
    struct W(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for W {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let log: Log = Arc::new(Mutex::new(Box::new(W(log_bytes.clone()))));
    let server = Server::bind(&socket, driver, log).unwrap();
    std::thread::spawn(move || server.run());

    let mut a = Tenant::connect(&socket, "attacker");
    let mut b = Tenant::connect(&socket, "victim");
    const N: u64 = 1 << 20;
    let Reply::Pointer(victim) = b.call(Request::MemAlloc { bytes: N }) else { panic!() };
    let pattern: Vec<u8> = (0..N).map(|i| (i * 7 % 251) as u8).collect();
    assert_eq!(b.call(Request::CopyHtoD { dst: victim, data: pattern.clone() }), Reply::Done);
    let before = checksum(&pattern);
    let Reply::Pointer(own) = a.call(Request::MemAlloc { bytes: N }) else { panic!() };

    let Reply::Module(module) = a.call(Request::ModuleLoad { image: PTX.as_bytes().to_vec() }) else {
        panic!("the fenced module did not load")
    };
    let mut cases = Vec::new();
    let targets = [("victim's buffer", victim), ("far outside every partition", 0x7f00_dead_0000u64)];
    // Reads: A's fenced loads and cp.async of B's buffer, into A's own; what A got must not
    // be B's bytes (a fenced read lands in A's partition). Before the writes and the trap:
    // a trap stops the attacker (its abort flag stays set, its later synchronizations
    // answer 710), and a read that did not run would prove nothing.
    let victim_words: Vec<u8> = pattern[..1024].to_vec();
    for kernel in ["wild_load", "wild_cp_async"] {
        let Reply::Function { handle, .. } = a.call(Request::GetFunction { module, name: kernel.into() }) else {
            panic!("{kernel}")
        };
        assert_eq!(a.call(Request::CopyHtoD { dst: own, data: vec![0; 1024] }), Reply::Done);
        let mut params = victim.to_le_bytes().to_vec();
        params.extend_from_slice(&own.to_le_bytes());
        let launched =
            a.call(Request::Launch { function: handle, grid: [1, 1, 1], block: [256, 1, 1], shared: 0, params });
        let synced = a.call(Request::Synchronize);
        let got = a.bytes(own, 1024);
        cases.push(serde_json::json!({
            "kernel": kernel,
            "target": "victim's buffer (read into the attacker's own)",
            "target_address": format!("{victim:#x}"),
            "launch": format!("{launched:?}"),
            "attacker_sync": format!("{synced:?}"),
            "victim_bytes_leaked": got == victim_words,
            "matching_bytes": got.iter().zip(&victim_words).filter(|(x, y)| x == y).count(),
            "victim_intact": checksum(&b.bytes(victim, N)) == before,
        }));
    }
    // The writes' handles first: a driver may look a name up in the module loaded last.
    let writes: Vec<(&str, u64)> = ["wild_store", "wild_atomic", "wild_generic", "trapper", "empty"]
        .into_iter()
        .map(|kernel| match a.call(Request::GetFunction { module, name: kernel.into() }) {
            Reply::Function { handle, .. } => (kernel, handle),
            r => panic!("{kernel}: {r:?}"),
        })
        .collect();
    bulk_and_tma_cases(&mut a, &mut b, victim, own, before, &mut cases);
    for &(kernel, handle) in &writes[..4] {
        for (what, target) in targets {
            if kernel == "trapper" && what != targets[0].0 {
                continue;
            }
            let mut params = target.to_le_bytes().to_vec();
            params.extend_from_slice(&0xdeadu32.to_le_bytes());
            let launched =
                a.call(Request::Launch { function: handle, grid: [64, 1, 1], block: [256, 1, 1], shared: 0, params });
            let synced = a.call(Request::Synchronize);
            let after = checksum(&b.bytes(victim, N));
            let own_bytes = a.bytes(own, 64);
            cases.push(serde_json::json!({
                "kernel": kernel,
                "target": what,
                "target_address": format!("{target:#x}"),
                "launch": format!("{launched:?}"),
                "attacker_sync": format!("{synced:?}"),
                "victim_intact": after == before,
                "victim_served_after": true,
                "attacker_own_first_bytes": format!("{:02x?}", &own_bytes[..8]),
            }));
        }
    }
    // The forwarding cost: launches of an empty kernel, sent without waiting (as the tenant
    // side sends them), then one synchronization.
    let empty = writes[4].1;
    let mut params = own.to_le_bytes().to_vec();
    params.extend_from_slice(&0u32.to_le_bytes());
    let n = 20_000;
    let t = Instant::now();
    for _ in 0..n {
        a.call(Request::Launch { function: empty, grid: [1; 3], block: [32, 1, 1], shared: 0, params: params.clone() });
    }
    a.call(Request::Synchronize);
    let per_launch_us = t.elapsed().as_secs_f64() * 1e6 / f64::from(n);
    // The control: the same store kernel, unfenced, loaded straight into the manager's
    // context, writes B's buffer (mapped memory of the same context: nothing faults).
    let control = {
        let mut image = PTX.as_bytes().to_vec();
        image.push(0);
        driver.make_current().unwrap();
        let m = driver.module_load(&image).unwrap();
        let f = driver.function(m, c"wild_store").unwrap();
        let stream = driver.stream_create().unwrap();
        let (mut p, mut v) = (victim, 0xdeadu32);
        let mut ptrs: Vec<*mut std::ffi::c_void> = vec![(&mut p as *mut u64).cast(), (&mut v as *mut u32).cast()];
        driver.launch(f, [64, 1, 1], [256, 1, 1], 0, stream, &mut ptrs).unwrap();
        driver.stream_synchronize(stream).unwrap();
        checksum(&b.bytes(victim, N)) == before
    };
    let log = String::from_utf8_lossy(&log_bytes.lock().unwrap()).into_owned();
    let doc = serde_json::json!({
        "what": "fence containment: tenant A's fenced kernels write at tenant B's buffer, far away, and trap; \
                 B's buffer checksummed after each",
        "attacker_partition": format!("{:#x}+{:#x}", a.base, a.size),
        "victim_partition": format!("{:#x}+{:#x}", b.base, b.size),
        "cases": cases,
        "control_unfenced_store_left_victim_intact": control,
        "forwarded_launch_us": (per_launch_us * 100.0).round() / 100.0,
        "manager_log": log.lines().collect::<Vec<_>>(),
    });
    println!("{doc:#}");
}

/// Bulk copies and tensor copies (the TMA engine), before the trap sets A's abort flag (its
/// synchronizations answer 710 after that). Each write: B's buffer checksummed after it;
/// each read: whether B's bytes reached A's buffer.
fn bulk_and_tma_cases(
    a: &mut Tenant,
    b: &mut Tenant,
    victim: u64,
    own: u64,
    before: u64,
    cases: &mut Vec<serde_json::Value>,
) {
    const N: u64 = 1 << 20;
    let bulk = a.call(Request::ModuleLoad { image: BULK_PTX.as_bytes().to_vec() });
    let Reply::Module(bulk) = bulk else {
        cases.push(serde_json::json!({ "kernel": "wild_bulk", "module_load": format!("{bulk:?}") }));
        return;
    };
    let function =
        |a: &mut Tenant, module: u64, name: &str| match a.call(Request::GetFunction { module, name: name.into() }) {
            Reply::Function { handle, .. } => handle,
            r => panic!("{name}: {r:?}"),
        };
    let f = function(a, bulk, "wild_bulk");
    let mut params = victim.to_le_bytes().to_vec();
    params.extend_from_slice(&0xdeadu32.to_le_bytes());
    let launched = a.call(Request::Launch { function: f, grid: [1; 3], block: [256, 1, 1], shared: 0, params });
    let synced = a.call(Request::Synchronize);
    cases.push(serde_json::json!({
        "kernel": "wild_bulk (cp.async.bulk.global.shared::cta, 1 KiB)",
        "target": "victim's buffer",
        "target_address": format!("{victim:#x}"),
        "launch": format!("{launched:?}"),
        "attacker_sync": format!("{synced:?}"),
        "victim_intact": checksum(&b.bytes(victim, N)) == before,
    }));
    let f = function(a, bulk, "wild_bulk_read");
    assert_eq!(a.call(Request::CopyHtoD { dst: own, data: vec![0; 1024] }), Reply::Done);
    let mut params = victim.to_le_bytes().to_vec();
    params.extend_from_slice(&own.to_le_bytes());
    let launched = a.call(Request::Launch { function: f, grid: [1; 3], block: [256, 1, 1], shared: 0, params });
    let synced = a.call(Request::Synchronize);
    let got = a.bytes(own, 1024);
    let victim_words: Vec<u8> = (0..1024u64).map(|i| (i * 7 % 251) as u8).collect();
    cases.push(serde_json::json!({
        "kernel": "wild_bulk_read (cp.async.bulk.shared::cluster.global, 1 KiB)",
        "target": "victim's buffer (read into the attacker's own)",
        "launch": format!("{launched:?}"),
        "attacker_sync": format!("{synced:?}"),
        "victim_bytes_leaked": got == victim_words,
        "matching_bytes": got.iter().zip(&victim_words).filter(|(x, y)| x == y).count(),
    }));
    // TMA: a map on A's own buffer is made and its copy lands there; a map on B's buffer is
    // not made; a map A made up is not launched.
    let tma = a.call(Request::ModuleLoad { image: TMA_PTX.as_bytes().to_vec() });
    let Reply::Module(tma) = tma else {
        cases.push(serde_json::json!({ "kernel": "tma_put", "module_load": format!("{tma:?}") }));
        return;
    };
    let f = function(a, tma, "tma_put");
    let map_on = |address: u64| {
        Request::TensorMapEncodeTiled(gpusan_serve::protocol::TiledMap {
            data_type: 7, // FLOAT32
            address,
            dims: vec![1024],
            strides: vec![],
            box_dim: vec![32],
            element_strides: vec![1],
            interleave: 0,
            swizzle: 0,
            l2_promotion: 0,
            oob_fill: 0,
        })
    };
    let own_map = a.call(map_on(own));
    let victim_map = a.call(map_on(victim));
    let launch = |map: &[u8]| {
        let mut params = map.to_vec();
        params.extend_from_slice(&0x7a7au32.to_le_bytes());
        params.extend_from_slice(&0u32.to_le_bytes());
        Request::Launch { function: f, grid: [1; 3], block: [32, 1, 1], shared: 0, params }
    };
    let (own_ran, forged_sync) = match &own_map {
        Reply::Bytes(map) => {
            assert_eq!(a.call(Request::CopyHtoD { dst: own, data: vec![0; 128] }), Reply::Done);
            a.call(launch(map));
            let synced = a.call(Request::Synchronize);
            let got = a.bytes(own, 128);
            let ran = got.chunks(4).all(|w| w == 0x7a7au32.to_le_bytes());
            let mut forged = map.clone();
            for x in &mut forged[..16] {
                *x ^= 0x5a;
            }
            a.call(launch(&forged));
            (
                serde_json::json!({ "sync": format!("{synced:?}"), "tile_landed": ran }),
                format!("{:?}", a.call(Request::Synchronize)),
            )
        }
        r => (serde_json::json!(format!("{r:?}")), String::new()),
    };
    cases.push(serde_json::json!({
        "kernel": "tma_put (cp.async.bulk.tensor.1d through a __grid_constant__ map)",
        "own_map": own_ran,
        "victim_map_refused": matches!(victim_map, Reply::Error { .. }),
        "victim_map": format!("{victim_map:?}"),
        "forged_map_sync": forged_sync,
        "victim_intact": checksum(&b.bytes(victim, N)) == before,
    }));
}
