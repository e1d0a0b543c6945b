//! Reports: text and JSON renderings against fixed expectations, JSON round trip, device
//! headlines, and the collector's folding, cap and symbolization.

use gpusan_runtime::checks::{check_call, Call, Mem};
use gpusan_runtime::registry::*;
use gpusan_runtime::report::*;

const A: u64 = 0x7f00_0000_0000;

fn site(n: u32) -> SiteId {
    SiteId::from_raw(n)
}

fn alloc(id: u64, base: u64, size: u64, state: AllocState) -> Allocation {
    Allocation { id, base, size, kind: AllocKind::Device, device: 0, context: 1, site: site(1), state, redzone: 0 }
}

/// Frames a fake symbolizer gives: site n has n frames, the first always named.
fn frames(s: SiteId) -> Vec<Frame> {
    let n = s.raw();
    (0..n)
        .map(|i| Frame {
            function: Some(format!("fn_{n}_{i}")),
            file: (i == 0).then(|| format!("src/f{n}.cu")),
            line: (i == 0).then_some(10 * n),
            ..Frame::at(0x40_0000 + u64::from(n) * 0x100 + u64::from(i))
        })
        .collect()
}

fn device_details(kernel: &str, address: u64, nearest: Option<Nearest>) -> DeviceDetails {
    DeviceDetails {
        kernel: kernel.into(),
        mangled: None,
        block: [1, 0, 0],
        thread: [32, 0, 0],
        space: Space::Global,
        access: Access::Write,
        address,
        size: 4,
        nearest,
        ptx: Some(SourceLoc { file: "vec.ptx".into(), line: 88 }),
        source: Some(SourceLoc { file: "vec.cu".into(), line: 12 }),
        sass_offset: None,
        device: None,
        launch_stack: site(2).into(),
        heap_block: None,
        frame_object: None,
    }
}

fn fixture() -> Document {
    let r = Registry::default();
    r.insert(NewAlloc { base: A, size: 1024, kind: AllocKind::Device, device: 0, context: 1, site: site(1) }).unwrap();
    let mut c = Collector::new(CollectorConfig::default());
    let copy = Call::Copy { dst: Mem::Device(A), src: Mem::Host(0x5555_0000_0000), count: 1025 };
    for _ in 0..2 {
        c.push(check_call(&r, "cudaMemcpy", &copy)[0].to_report(site(3)));
    }
    let past = alloc(1, A, 1024, AllocState::Live);
    c.push(Report::device(
        ErrorKind::OutOfBoundsWrite,
        device_details("vecAdd", A + 1028, Some(Nearest::new(A + 1028, &past))),
    ));
    let freed = alloc(1, A, 1024, AllocState::Freed { site: site(4) });
    let mut uaf = device_details("vecAdd", A + 8, Some(Nearest::new(A + 8, &freed)));
    (uaf.access, uaf.source) = (Access::Read, None);
    c.push(Report::device(ErrorKind::UseAfterFree, uaf));
    let leaks = vec![Leak { count: 2, bytes: 3072, alloc_stack: site(1).into() }];
    c.finish("check", leaks, frames)
}

const TEXT: &str = "\
========= GPUSAN 0.1.0 (mode: check)
========= Out-of-bounds write of 1025 bytes by cudaMemcpy (dst)
=========     Address 0x7f0000000000 is at offset 0 of a 1024-byte device allocation at 0x7f0000000000 (id 1, device 0); the access of 1025 bytes runs 1 byte past its end
=========     Allocated at:
=========         Host Frame: fn_1_0 at src/f1.cu:10 [0x400100]
=========     Called at:
=========         Host Frame: fn_3_0 at src/f3.cu:30 [0x400300]
=========         Host Frame: fn_3_1 [0x400301]
=========         Host Frame: fn_3_2 [0x400302]
=========     Seen 2 times
=========
========= Out-of-bounds __global__ write of size 4 bytes
=========     at vecAdd in vec.cu:12
=========     by thread (32,0,0) in block (1,0,0)
=========     Address 0x7f0000000404 is 4 bytes past the end of a 1024-byte device allocation at 0x7f0000000000 (id 1, device 0)
=========     Allocated at:
=========         Host Frame: fn_1_0 at src/f1.cu:10 [0x400100]
=========     First launched at (a kernel's stack is taken at its first launch only):
=========         Host Frame: fn_2_0 at src/f2.cu:20 [0x400200]
=========         Host Frame: fn_2_1 [0x400201]
=========
========= Use-after-free __global__ read of size 4 bytes
=========     at vecAdd
=========     by thread (32,0,0) in block (1,0,0)
=========     Address 0x7f0000000008 is at offset 8 of a 1024-byte device allocation at 0x7f0000000000 (id 1, device 0, freed)
=========     Allocated at:
=========         Host Frame: fn_1_0 at src/f1.cu:10 [0x400100]
=========     Freed at:
=========         Host Frame: fn_4_0 at src/f4.cu:40 [0x400400]
=========         Host Frame: fn_4_1 [0x400401]
=========         Host Frame: fn_4_2 [0x400402]
=========         Host Frame: fn_4_3 [0x400403]
=========     First launched at (a kernel's stack is taken at its first launch only):
=========         Host Frame: fn_2_0 at src/f2.cu:20 [0x400200]
=========         Host Frame: fn_2_1 [0x400201]
=========
========= LEAK SUMMARY: 3072 bytes in 2 allocations leaked
=========     3072 bytes in 2 allocations, allocated at:
=========         Host Frame: fn_1_0 at src/f1.cu:10 [0x400100]
=========
========= ERROR SUMMARY: 6 errors
";

#[test]
fn text_rendering() {
    let text = fixture().to_text();
    assert_eq!(text, TEXT, "got:\n{text}");
}

/// A merged report of several processes says whose each finding is, and the kernel's device
/// where known; one process's names its process only where it has a rank (a distributed
/// job's).
#[test]
fn a_finding_of_a_run_of_several_processes_names_its_process_and_device() {
    let mut doc = fixture();
    doc.errors[0].process = Some(Process { pid: 42, rank: Some(1), local_rank: Some(1) });
    doc.errors[1].process = Some(Process { pid: 43, rank: None, local_rank: None });
    if let Details::Device(d) = &mut doc.errors[1].report.details {
        d.device = Some(3);
    }
    let one = doc.to_string();
    assert!(one.contains("=========     In process 42 (rank 1)\n"), "{one}");
    assert!(!one.contains("In process 43"), "{one}");
    assert!(one.contains("by thread (32,0,0) in block (1,0,0) on device 3\n"), "{one}");
    doc.cuda_processes = 2;
    let text = doc.to_string();
    assert!(text.contains("    Seen 2 times\n=========     In process 42 (rank 1)\n"), "{text}");
    assert!(text.contains("=========     In process 43\n"), "{text}");
    let json = doc.to_json();
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["errors"][0]["process"], serde_json::json!({"pid": 42, "rank": 1, "local_rank": 1}));
    assert_eq!(v["errors"][1]["process"], serde_json::json!({"pid": 43}));
    assert_eq!(v["errors"][1]["details"]["device"], 3);
    assert_eq!(Document::from_json(&json).unwrap(), doc);
}

/// The instrumented PTX and gpusan's counters are gpusan's own view: only the verbose text
/// shows them (the JSON always has them).
#[test]
fn verbose_text_adds_the_ptx_location_and_counters() {
    let mut doc = fixture();
    doc.counters.insert("device_table_bytes".into(), 4096);
    let plain = doc.to_text_with(TextConfig::default());
    assert_eq!(plain, TEXT, "got:\n{plain}");
    let verbose = doc.to_text_with(TextConfig { verbose: true, ..TextConfig::default() });
    assert!(verbose.contains("=========     at vecAdd in vec.cu:12 (PTX vec.ptx:88)\n"), "{verbose}");
    assert!(verbose.contains("=========     at vecAdd (PTX vec.ptx:88)\n"), "{verbose}");
    assert!(verbose.contains("========= COUNTER device_table_bytes: 4096\n"), "{verbose}");
    let json: serde_json::Value = serde_json::from_str(&doc.to_json()).unwrap();
    assert_eq!(json["errors"][1]["details"]["ptx"]["line"], 88);
    // `count` mode's counts are its result: shown without --verbose.
    doc.mode = "count".into();
    assert!(doc.to_text().contains("COUNTER device_table_bytes: 4096"));
}

/// The CUDA runtime's frames (its library, statically linked cudart's internal symbols,
/// the driver, gpusan, and `[0x0]`) fold into one line per run, and the unwinder's end marks
/// (`[0x0]` at the bottom) go; the program's frames show module and offset for `addr2line`;
/// verbose unfolds; JSON keeps every frame as it was.
#[test]
fn runtime_frames_fold_and_program_frames_name_their_module() {
    let at = |function: &str, module: &str, offset: u64, address: u64| Frame {
        function: Some(function.into()),
        module: (!module.is_empty()).then(|| module.into()),
        offset: (!module.is_empty()).then_some(offset),
        ..Frame::at(address)
    };
    let mut template = at("cudaMalloc<unsigned int>(unsigned int**, unsigned long)", "/w/app", 0x1200, 0x5555_1201);
    template.symbol = Some("_Z10cudaMallocIjE9cudaErrorPPT_m".into());
    (template.file, template.line) = (Some("/cuda/include/cuda_runtime.h".into()), Some(154));
    let mut main = at("main", "/w/app", 0x1300, 0x5555_1301);
    (main.file, main.line) = (Some("/w/app.cu".into()), Some(12));
    let frames = vec![
        at("cuMemAlloc_v2", "/usr/lib/libcuda.so.1", 0x10, 0x7000_0011),
        at("__cudart1022", "/w/app", 0x100, 0x5555_0101),
        at("cudart::driverHelper::mallocPtr(unsigned long, void**)", "/w/app", 0x110, 0x5555_0111),
        at("cudaMalloc", "/usr/local/cuda/lib64/libcudart.so.13", 0x20, 0x7100_0021),
        at("__device_stub__Z5scaleIfEvPT_iPfi(float*, int)", "/w/app", 0x120, 0x5555_0121),
        template,
        main,
        Frame::at(0),
        at("cuLaunchKernel", "/usr/lib/libcuda.so.1", 0x40, 0x7000_0041),
        at("__libc_start_main", "/lib/libc.so.6", 0x30, 0x7200_0031),
        Frame::at(0),
    ];
    let mut r = host("cudaMalloc", Operand::Dst, 3, 0x1000);
    if let Details::Host(h) = &mut r.details {
        h.call_stack = Stack { site: SiteId::UNKNOWN, frames };
    }
    let text = r.to_string();
    let called = &text[text.find("Called at:\n").expect(&text) + "Called at:\n".len()..];
    assert_eq!(
        called,
        "\
=========         (5 frames in the CUDA runtime)
=========         Host Frame: cudaMalloc<unsigned int>(unsigned int**, unsigned long) at /cuda/include/cuda_runtime.h:154 [0x1200] in /w/app
=========         Host Frame: main at /w/app.cu:12 [0x1300] in /w/app
=========         (2 frames in the CUDA runtime)
=========         Host Frame: __libc_start_main [0x30] in /lib/libc.so.6
"
    );
    let verbose = format!("{r:#}");
    assert!(verbose.contains("Host Frame: __cudart1022 [0x100] in /w/app\n"), "{verbose}");
    assert!(verbose.contains("Host Frame: [0x0]\n"), "{verbose}");
    let json = serde_json::to_value(&r).unwrap();
    let template = &json["details"]["call_stack"][5];
    assert_eq!(template["symbol"], "_Z10cudaMallocIjE9cudaErrorPPT_m");
    assert_eq!((&template["module"], &template["offset"]), (&"/w/app".into(), &"0x1200".into()));
    assert_eq!(serde_json::from_value::<Report>(json).unwrap(), r);
}

/// The launch stack of a program built without `-g` against static cudart, as the H100 gave
/// it (bench/results/h100-issue16): cudart's blob symbol, its public `cudaLaunchKernel`, and
/// nvcc's launch helpers (whose symbols are mangled) fold; the nvcc-written host function
/// `fill(float*, int)` and `main` stay.
#[test]
fn a_static_cudart_launch_stack_folds_to_the_programs_frames() {
    let at = |function: &str, symbol: Option<&str>, offset: u64| Frame {
        function: Some(function.into()),
        symbol: symbol.map(Into::into),
        module: Some("/tmp/prog".into()),
        offset: Some(offset),
        ..Frame::at(0x5555_0000 + offset)
    };
    let frames = vec![
        at("libcudart_static_4d8b33a106dceb3c07a56e26de61f2d53bb62a68", None, 0x120d3),
        at("cudaLaunchKernel", None, 0x74527),
        at(
            "__cudaLaunchKernel_helper(CUkern_st*, dim3, dim3, void**, unsigned long, CUstream_st*)",
            Some("_Z25__cudaLaunchKernel_helperP9CUkern_st4dim3S1_PPvmP11CUstream_st"),
            0x9c9d,
        ),
        at("__device_stub__Z4fillPfi(float*, int)", Some("_Z23__device_stub__Z4fillPfiPfi"), 0xa8c7),
        at("fill(float*, int)", Some("_Z4fillPfi"), 0xa948),
        at("main", None, 0xa41f),
    ];
    let mut r = host("cudaMalloc", Operand::Dst, 3, 0x1000);
    if let Details::Host(h) = &mut r.details {
        h.call_stack = Stack { site: SiteId::UNKNOWN, frames };
    }
    let text = r.to_string();
    let called = &text[text.find("Called at:\n").expect(&text) + "Called at:\n".len()..];
    assert_eq!(
        called,
        "\
=========         (4 frames in the CUDA runtime)
=========         Host Frame: fill(float*, int) [0xa948] in /tmp/prog
=========         Host Frame: main [0xa41f] in /tmp/prog
"
    );
}

#[test]
fn json_rendering_has_stable_field_names() {
    let json: serde_json::Value = serde_json::from_str(&fixture().to_json()).unwrap();
    let frame = |n: u32| serde_json::json!([{ "function": format!("fn_{n}_0"), "file": format!("src/f{n}.cu"), "line": 10 * n, "address": format!("{:#x}", 0x40_0000 + n * 0x100) }]);
    assert_eq!(json["tool"], "gpusan");
    assert_eq!(json["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(json["mode"], "check");
    assert_eq!(
        json["summary"],
        serde_json::json!({
            "total": 6, "unique": 3, "not_stored": 0, "leaked_bytes": 3072,
            "by_kind": { "memcpy_out_of_bounds": 2, "out_of_bounds_write": 1, "use_after_free": 1, "leak": 2 },
        })
    );
    assert_eq!(json["leaks"], serde_json::json!([{ "count": 2, "bytes": 3072, "alloc_stack": frame(1) }]));
    let host = &json["errors"][0];
    assert_eq!(host["count"], 2);
    assert_eq!(host["kind"], "memcpy_out_of_bounds");
    assert_eq!(host["message"], "Out-of-bounds write of 1025 bytes by cudaMemcpy (dst)");
    let mut details = host["details"].clone();
    assert_eq!(details["call_stack"].as_array().map(Vec::len), Some(3));
    details["call_stack"] = serde_json::Value::Null;
    assert_eq!(
        details,
        serde_json::json!({
            "origin": "host", "api": "cudaMemcpy", "operand": "dst", "address": "0x7f0000000000", "size": 1025,
            "nearest": {
                "allocation": {
                    "id": 1, "base": "0x7f0000000000", "size": 1024, "kind": "device", "device": 0, "freed": false,
                    "alloc_stack": frame(1),
                },
                "position": { "relation": "inside", "offset": 0 },
            },
            "call_stack": null,
        })
    );
    let device = &json["errors"][1];
    let mut details = device["details"].clone();
    details["launch_stack"] = serde_json::Value::Null;
    assert_eq!(
        details,
        serde_json::json!({
            "origin": "device", "kernel": "vecAdd", "block": [1, 0, 0], "thread": [32, 0, 0], "space": "global",
            "access": "write", "address": "0x7f0000000404", "size": 4,
            "nearest": {
                "allocation": {
                    "id": 1, "base": "0x7f0000000000", "size": 1024, "kind": "device", "device": 0, "freed": false,
                    "alloc_stack": frame(1),
                },
                "position": { "relation": "past_end", "bytes": 4 },
            },
            "ptx": { "file": "vec.ptx", "line": 88 }, "source": { "file": "vec.cu", "line": 12 },
            "launch_stack": null,
        })
    );
    assert_eq!(json["errors"][2]["details"]["nearest"]["allocation"]["free_stack"][0]["function"], "fn_4_0");
    let kinds = serde_json::json!([
        { "pitched": { "pitch": 512, "width_bytes": 500, "height": 2 } },
        { "host_pinned": { "mapped": true } },
        "managed",
    ]);
    let parsed: Vec<AllocKind> = serde_json::from_value(kinds.clone()).unwrap();
    assert_eq!(
        parsed,
        [
            AllocKind::Pitched { pitch: 512, width_bytes: 500, height: 2 },
            AllocKind::HostPinned { mapped: true },
            AllocKind::Managed
        ]
    );
    assert_eq!(serde_json::to_value(&parsed).unwrap(), kinds);
}

#[test]
fn json_round_trip() {
    let doc = fixture();
    let back = Document::from_json(&doc.to_json()).unwrap();
    assert_eq!(back, doc);
    assert_eq!(back.to_text(), TEXT);
    let bad = doc.to_json().replace("\"0x7f0000000404\"", "\"7f0000000404\"");
    assert!(Document::from_json(&bad).is_err(), "addresses must be 0x-prefixed");
}

#[test]
fn device_headlines() {
    use Access::*;
    use ErrorKind::*;
    use Space::*;
    let cases = [
        (OutOfBoundsRead, Global, Read, 4, "Out-of-bounds __global__ read of size 4 bytes"),
        (OutOfBoundsAtomic, Global, Atomic, 8, "Out-of-bounds __global__ atomic of size 8 bytes"),
        (SharedOutOfBounds, Shared, Write, 1, "Out-of-bounds __shared__ write of size 1 byte"),
        (LocalOutOfBounds, Local, Read, 16, "Out-of-bounds __local__ read of size 16 bytes"),
        (UseAfterScope, Local, Write, 4, "Use-after-scope __local__ write of size 4 bytes"),
        (MisalignedAccess, Generic, Read, 8, "Misaligned generic read of size 8 bytes"),
    ];
    for (kind, space, access, size, want) in cases {
        let report = Report::device(kind, DeviceDetails { space, access, size, ..device_details("k", A, None) });
        assert_eq!((report.kind, report.message.as_str()), (kind, want));
        // A dead frame's address is in no allocation by nature: the report says what it is.
        let where_ = if kind == UseAfterScope {
            "is local memory outside the kernel's frame: the frame of a function that has returned"
        } else {
            "is not in any known allocation"
        };
        assert!(report.to_string().contains(&format!("Address {A:#x} {where_}")), "{report}");
    }
}

#[test]
fn positions() {
    let a = alloc(1, 0x1000, 0x100, AllocState::Live);
    let cases = [
        (0xfff, Position::Before { bytes: 1 }),
        (0x1000, Position::Inside { offset: 0 }),
        (0x10ff, Position::Inside { offset: 0xff }),
        (0x1100, Position::PastEnd { bytes: 0 }),
        (0x1104, Position::PastEnd { bytes: 4 }),
    ];
    for (addr, want) in cases {
        assert_eq!(Position::of(addr, &a), want, "{addr:#x}");
    }
}

fn host(api: &str, operand: Operand, call_site: u32, address: u64) -> Report {
    Report {
        kind: ErrorKind::MemcpyOutOfBounds,
        message: "m".into(),
        details: Details::Host(HostDetails {
            api: api.into(),
            operand,
            address,
            size: 1,
            nearest: None,
            symbol: None,
            tensor: None,
            call_stack: site(call_site).into(),
        }),
        label: None,
    }
}

#[test]
fn collector_folds_identical_findings() {
    let mut c = Collector::new(CollectorConfig::default());
    assert!(c.push(host("cudaMemcpy", Operand::Dst, 5, 0x10)));
    assert!(!c.push(host("cudaMemcpy", Operand::Dst, 5, 0x20)), "same kind, site and API: a repeat");
    assert!(c.push(host("cudaMemcpy", Operand::Src, 5, 0x10)), "another operand");
    assert!(c.push(host("cudaMemcpy", Operand::Dst, 6, 0x10)), "another site");
    assert!(c.push(host("cudaMemcpyAsync", Operand::Dst, 5, 0x10)), "another API");
    let d = |ptx_line, thread| {
        let mut details = device_details("k", A + 4096, None);
        details.ptx = Some(SourceLoc { file: "k.ptx".into(), line: ptx_line });
        details.thread = [thread, 0, 0];
        Report::device(ErrorKind::OutOfBoundsWrite, details)
    };
    assert!(c.push(d(10, 0)));
    assert!(!c.push(d(10, 1)), "same PTX line, another thread");
    assert!(c.push(d(11, 0)));
    assert!(!c.push_n(d(11, 5), 40));
    let counts: Vec<u64> = c.errors().iter().map(|e| e.count).collect();
    assert_eq!(counts, [2, 1, 1, 1, 2, 41]);
    assert_eq!(c.total(), 48);
    let doc = c.finish("check", vec![], |_| vec![]);
    assert_eq!((doc.summary.total, doc.summary.unique, doc.summary.not_stored), (48, 6, 0));
    assert_eq!(doc.summary.by_kind.get(&ErrorKind::MemcpyOutOfBounds), Some(&5));
    assert_eq!(doc.summary.by_kind.get(&ErrorKind::OutOfBoundsWrite), Some(&43));
}

#[test]
fn collector_caps_what_it_stores_but_counts_everything() {
    let mut c = Collector::new(CollectorConfig { max_stored: 2 });
    for s in [1, 2, 3, 3, 1, 4] {
        c.push(host("cudaMemcpy", Operand::Dst, s, 0));
    }
    assert_eq!(
        c.errors()
            .iter()
            .map(|e| (e.report.details.clone(), e.count))
            .map(|(d, n)| match d {
                Details::Host(h) => (h.call_stack.site.raw(), n),
                Details::Device(_) | Details::Fault(_) | Details::Canary(_) => unreachable!(),
            })
            .collect::<Vec<_>>(),
        [(1, 2), (2, 1)]
    );
    let doc = c.finish("check", vec![], |_| vec![]);
    assert_eq!((doc.summary.total, doc.summary.unique, doc.summary.not_stored), (6, 2, 3));
    assert_eq!(doc.summary.by_kind.get(&ErrorKind::MemcpyOutOfBounds), Some(&6));
    assert!(doc.to_text().ends_with("========= ERROR SUMMARY: 6 errors (3 not shown)\n"), "{}", doc.to_text());
}

#[test]
fn finish_symbolizes_each_site_once() {
    let mut c = Collector::new(CollectorConfig::default());
    let a = alloc(1, A, 16, AllocState::Freed { site: site(3) });
    for (s, operand) in [(2, Operand::Dst), (2, Operand::Src), (0, Operand::Ptr)] {
        let mut r = host("cudaMemcpy", operand, s, A);
        if let Details::Host(h) = &mut r.details {
            h.nearest = Some(Nearest::new(A, &a));
        }
        c.push(r);
    }
    let mut calls = vec![];
    let doc = c.finish("check", vec![Leak { count: 1, bytes: 16, alloc_stack: site(1).into() }], |s| {
        calls.push(s.raw());
        frames(s)
    });
    calls.sort();
    assert_eq!(calls, [1, 2, 3], "sites 1 (alloc, leak), 2 (two calls) and 3 (free) once each; none for unknown");
    let Details::Host(h) = &doc.errors[2].report.details else { panic!() };
    assert!(h.call_stack.frames.is_empty());
    assert_eq!(h.nearest.as_ref().unwrap().allocation.free_stack.as_ref().unwrap().frames.len(), 3);
    assert_eq!(doc.leaks[0].alloc_stack.frames, frames(site(1)));
}

#[test]
fn check_counts_merge_render_and_round_trip() {
    let counts = |accesses, checks, group_checks| CheckCounts {
        accesses,
        checks,
        group_checks,
        span_entries: 1,
        static_accesses: 10,
        static_grouped: 6,
        static_in_bounds: 1,
        static_group_checks: 2,
        modules: 1,
    };
    let mut doc = fixture();
    assert!(!doc.to_json().contains("check_counts"), "absent unless counted");
    doc.check_counts = Some(counts(600, 30, 20));
    let mut other = fixture();
    other.check_counts = Some(counts(400, 20, 30));
    doc.merge(other);
    let c = doc.check_counts.clone().unwrap();
    assert_eq!((c.accesses, c.checks, c.group_checks, c.span_entries, c.modules), (1000, 50, 50, 2, 2));
    // 100 of 1000 naive checks ran; in the code 20 accesses keep 6 of their checks and add
    // 4 group checks: 10 of 20.
    assert_eq!(c.dynamic_fraction_removed(), Some(0.9));
    assert_eq!(c.static_fraction_removed(), Some(0.5));
    assert!(
        doc.to_text().contains("CHECK COUNTS: 1000 accesses, 50 checks, 50 group checks ran: 90.0% of the checks removed (50.0% in the code)"),
        "{}",
        doc.to_text()
    );
    let json: serde_json::Value = serde_json::from_str(&doc.to_json()).unwrap();
    assert_eq!(json["check_counts"]["accesses"], 1000);
    assert_eq!(json["check_counts"]["static_group_checks"], 4);
    assert_eq!(Document::from_json(&doc.to_json()).unwrap(), doc);
    assert_eq!(CheckCounts::default().dynamic_fraction_removed(), None);
}

/// Counts of processes add up when their documents merge; a rate per thing (`_per_` in its
/// name) is the worst process's, not a sum.
#[test]
fn merged_counters_add_up_but_rates_take_the_worst() {
    let mut doc = fixture();
    doc.counters.insert("device_table_peak_pool_blocks".into(), 300);
    doc.counters.insert("device_table_bytes_per_pool_block".into(), 31);
    let mut other = fixture();
    other.counters.insert("device_table_peak_pool_blocks".into(), 200);
    other.counters.insert("device_table_bytes_per_pool_block".into(), 32);
    doc.merge(other);
    assert_eq!(doc.counters["device_table_peak_pool_blocks"], 500);
    assert_eq!(doc.counters["device_table_bytes_per_pool_block"], 32);
}

fn named_stack(function: &str) -> Stack {
    let frame = Frame { function: Some(function.into()), ..Frame::at(0x10) };
    Stack { site: SiteId::UNKNOWN, frames: vec![frame] }
}

fn fault_launch(name: &str, launched_in: &str) -> FaultLaunch {
    FaultLaunch {
        kernel: name.into(),
        graph: None,
        grid: [2, 1, 1],
        block: [64, 1, 1],
        stream: 0,
        launch_stack: named_stack(launched_in),
    }
}

#[test]
fn a_fault_shows_each_kernel_with_where_it_was_first_launched_once_per_place() {
    let details = FaultDetails {
        error: "CUDA_ERROR_ILLEGAL_ADDRESS".into(),
        code: 700,
        api: "cuCtxSynchronize".into(),
        kernels: vec![
            fault_launch("a", "step"),
            fault_launch("b", "step"),
            fault_launch("c", "other"),
            FaultLaunch {
                kernel: String::new(),
                graph: Some(0x9000),
                grid: [0; 3],
                block: [0; 3],
                ..fault_launch("", "step")
            },
        ],
        launch_stack: named_stack("other"),
        call_stack: named_stack("wait"),
    };
    let text = Report::fault(details).to_string();
    assert!(
        text.contains("GPU fault: CUDA_ERROR_ILLEGAL_ADDRESS (700): a kernel accessed an illegal address"),
        "{text}"
    );
    assert!(text.contains("a with grid (2,1,1), block (64,1,1) on stream 0x0"), "{text}");
    assert!(text.contains("the kernels of CUDA graph 0x9000 (cuGraphLaunch) on stream 0x0"), "{text}");
    let title = "First launched at (a kernel's stack is taken at its first launch only)";
    assert_eq!(text.matches(title).count(), 2, "{text}");
    assert_eq!(text.matches("Host Frame: step").count(), 1, "b's stack is a's: {text}");
    assert_eq!(text.matches("Host Frame: other").count(), 1, "{text}");
    let seen = text.find("Seen at").expect("where the program learnt of it");
    assert!(text[seen..].contains("Host Frame: wait"), "{text}");
    let mut report = Report::fault(FaultDetails {
        error: "CUDA_ERROR_ASSERT".into(),
        code: 710,
        api: "cuCtxSynchronize".into(),
        kernels: vec![fault_launch("a", "step")],
        launch_stack: named_stack("step"),
        call_stack: named_stack("wait"),
    });
    assert_eq!(report.stacks_mut().len(), 3, "the kernels' stacks are symbolized with the others");
}

/// A run whose kernels all ran unchecked never reads as clean: its ERROR SUMMARY says no
/// launch was checked; one checked launch is enough to drop that, and a run without
/// kernels says nothing of them. The section survives the JSON and a merge.
#[test]
fn a_run_that_checked_no_launch_says_so_in_its_error_summary() {
    use gpusan_runtime::coverage::KernelCoverage;
    let mut doc = Collector::new(CollectorConfig::default()).finish("check", vec![], |_| vec![]);
    doc.cuda_processes = 1;
    assert!(doc.to_text().contains("ERROR SUMMARY: 0 errors\n"), "{}", doc.to_text());
    doc.coverage.add(KernelCoverage::new("_Z2mcPf", 2, Err("machine code only (cubin)")));
    doc.coverage.add(KernelCoverage::new("other", 1, Err("machine code only (cubin)")));
    let text = doc.to_text();
    assert!(text.contains("ERROR SUMMARY: 0 errors; no kernel launch was checked (2 kernels, 3 launches)\n"), "{text}");
    assert!(text.contains("COVERAGE: checked 0 of 2 kernels (launches: 0 of 3)"), "{text}");

    let mut merged = Document::from_json(&doc.to_json()).unwrap();
    let mut other = doc.clone();
    other.coverage = Default::default();
    other.coverage.add(KernelCoverage::new("_Z2mcPf", 5, Err("machine code only (cubin)")));
    other.coverage.add(KernelCoverage::new("k", 1, Ok("PTX at load")));
    merged.merge(other);
    let t = &merged.coverage.totals;
    assert_eq!((t.kernels, t.launches, t.checked_kernels, t.checked_launches), (3, 9, 1, 1));
    assert_eq!(merged.coverage.kernels.iter().find(|k| k.mangled == "_Z2mcPf").unwrap().launches, 7);
    assert!(merged.to_text().contains("ERROR SUMMARY: 0 errors\n"), "one launch was checked: {}", merged.to_text());
}

#[test]
fn one_bug_under_two_labels_is_a_finding_of_each_and_the_text_names_the_label() {
    let mut c = Collector::new(CollectorConfig::default());
    let labelled = |label: Option<&str>| {
        let mut r = host("cuMemcpyHtoD_v2", Operand::Dst, 3, 0x1000);
        r.label = label.map(str::to_string);
        r
    };
    assert!(c.push(labelled(Some("tests/test_a.py::test_one"))));
    assert!(!c.push(labelled(Some("tests/test_a.py::test_one"))));
    assert!(c.push(labelled(Some("tests/test_a.py::test_two"))));
    assert!(c.push(labelled(None)));
    let doc = c.finish("api", Vec::new(), |_| Vec::new());
    assert_eq!(doc.errors.len(), 3);
    assert_eq!(doc.errors[0].count, 2);
    let text = doc.to_text();
    assert!(text.contains("during: tests/test_a.py::test_one\n"), "{text}");
    assert!(text.contains("during: tests/test_a.py::test_two\n"), "{text}");
    let json: serde_json::Value = serde_json::from_str(&doc.to_json()).unwrap();
    assert_eq!(json["errors"][1]["label"], "tests/test_a.py::test_two");
    assert!(json["errors"][2].get("label").is_none(), "no label, no field");
}

#[test]
fn python_frames_print_as_python_frames_before_the_native_ones() {
    use gpusan_runtime::pyframes::{tag, PyFrame};
    let py = tag(PyFrame { file: "train.py".into(), function: "step".into(), line: 42 }).unwrap();
    let stack = Stack {
        site: SiteId::from_raw(1),
        frames: vec![
            Frame { function: Some("step".into()), file: Some("train.py".into()), line: Some(42), ..Frame::at(py) },
            Frame { function: Some("cuLaunchKernel".into()), ..Frame::at(0x4005d0) },
        ],
    };
    let mut r = host("cuMemcpyHtoD_v2", Operand::Dst, 3, 0x1000);
    if let Details::Host(h) = &mut r.details {
        h.call_stack = stack;
    }
    let text = r.to_string();
    let python = text.find("Python Frame: step at train.py:42\n").expect(&text);
    let native = text.find("Host Frame: cuLaunchKernel [0x4005d0]").expect(&text);
    assert!(python < native, "{text}");
}
