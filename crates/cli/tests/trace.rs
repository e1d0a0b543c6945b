//! `gpusan trace` on the fake driver (issue 19): a program's allocations, pool blocks, frees
//! and launches reach its trace in order, `gpusan sim characterize` reads them back, and the
//! report says what the trace holds and what it does not.

use std::path::{Path, PathBuf};
use std::process::Command;

fn gpusan() -> Command {
    Command::new(env!("CARGO_BIN_EXE_gpusan"))
}

/// The fake driver and `bench/launch/launch_loop.c` built against it, in `dir`.
fn build(dir: &Path) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let lib = dir.join("libcuda.so.1");
    let cc = |args: &[&std::ffi::OsStr]| {
        let out = Command::new("cc").args(args).output().expect("a C compiler (cc)");
        assert!(out.status.success(), "cc: {}", String::from_utf8_lossy(&out.stderr));
    };
    let src = root.join("crates/cli/tests/fake_cuda/libcuda.c");
    cc(&[
        "-shared".as_ref(),
        "-fPIC".as_ref(),
        "-Wl,-soname,libcuda.so.1".as_ref(),
        "-o".as_ref(),
        lib.as_os_str(),
        src.as_os_str(),
    ]);
    std::os::unix::fs::symlink(&lib, dir.join("libcuda.so")).unwrap();
    let prog = dir.join("launch_loop");
    let src = root.join("bench/launch/launch_loop.c");
    let libdir = format!("-L{}", dir.display());
    let rpath = format!("-Wl,-rpath,{}", dir.display());
    cc(&[
        "-o".as_ref(),
        prog.as_os_str(),
        src.as_os_str(),
        libdir.as_ref(),
        "-lcuda".as_ref(),
        "-ldl".as_ref(),
        "-lpthread".as_ref(),
        rpath.as_ref(),
    ]);
    prog
}

#[test]
fn a_programs_allocations_blocks_frees_and_launches_are_traced_and_characterized() {
    let dir = tempfile::tempdir().unwrap();
    let prog = build(dir.path());
    let trace = dir.path().join("run.gstrace");
    let report = dir.path().join("report.json");
    // 100 pool blocks handed out over 8 slots of a segment: 92 taken back.
    let out = gpusan()
        .args(["run", "--mode", "api", "--report-json"])
        .arg(&report)
        .arg("--trace")
        .arg(&trace)
        .arg("--")
        .arg(&prog)
        .args(["blocks", "100", "8"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let json = gpusan().args(["sim", "characterize"]).arg(&trace).output().unwrap();
    assert!(json.status.success(), "{}", String::from_utf8_lossy(&json.stderr));
    let c: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    // The 64 MiB segment and the 100 blocks; the blocks' frees; 9 live at most (the
    // segment and 8 blocks).
    assert_eq!(c["allocations"], 101, "{c}");
    assert_eq!(c["frees"], 92, "{c}");
    assert_eq!(c["max_live"], 9, "{c}");
    assert_eq!(c["size_max"], 64 << 20, "{c}");
    assert_eq!(c["size_min"], 4000, "{c}");
    let report = std::fs::read_to_string(&report).unwrap();
    assert!(report.contains("trace: 193 events written to") && report.contains("no kernel's accesses"), "{report}");

    // `gpusan trace` is the same run, and a launch is traced with its name and shape.
    let trace2 = dir.path().join("launches.gstrace");
    let out = gpusan()
        .arg("trace")
        .arg("-o")
        .arg(&trace2)
        .arg("--")
        .arg(&prog)
        .args(["launches", "5", "1"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let json = gpusan().args(["sim", "characterize"]).arg(&trace2).output().unwrap();
    let c: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let kernels = c["kernels"].as_array().unwrap();
    // The loop's warm-up round, then the timed one: 10 launches, numbered in order.
    assert_eq!(kernels.len(), 10, "{c}");
    assert!(kernels.iter().enumerate().all(|(i, k)| k["name"] == "k" && k["kernel"] == i), "{c}");
}

#[test]
fn a_trace_cut_by_a_crash_is_read_up_to_its_cut_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cut.gstrace");
    // A synthetic trace, cut short as a crashed writer leaves it.
    let out = gpusan().args(["sim", "synth"]).arg(&path).args(["--kernels", "2", "--warps", "4096"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() * 2 / 3]).unwrap();
    let out = gpusan().args(["sim", "mlb"]).arg(&path).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cut.gstrace") && err.contains("trace byte") && err.contains("cut off"), "{err}");
}

/// `gpusan sim`'s answers to bad input: a missing file and a file that is no trace are named
/// with what is wrong; impossible options are refused before any work.
#[test]
fn bad_input_to_gpusan_sim_is_refused_with_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("none.gstrace");
    let not_a_trace = dir.path().join("text.gstrace");
    std::fs::write(&not_a_trace, "hello").unwrap();
    let gpu_trace = dir.path().join("gpu.gstrace");
    let out =
        gpusan().args(["sim", "synth"]).arg(&gpu_trace).args(["--kernels", "1", "--warps", "4"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let cases: Vec<(Vec<std::ffi::OsString>, &str)> = vec![
        (vec!["mlb".into(), missing.clone().into()], "none.gstrace"),
        (vec!["mlb".into(), not_a_trace.clone().into()], "cut off"),
        (vec!["characterize".into(), not_a_trace.clone().into()], "text.gstrace"),
        (vec!["mlb".into(), not_a_trace.clone().into(), "--entries".into(), "100000000".into()], "at most 65,536"),
        (vec!["bcache".into(), "--meshes".into(), "4by4".into()], "WIDTHxHEIGHT"),
        (vec!["bcache".into(), "--meshes".into(), "100x2".into()], "1 to 64"),
        (vec!["bcache-programs".into(), missing.clone().into()], "none.gstrace"),
        (vec!["bcache-programs".into(), gpu_trace.clone().into()], "not a CPU trace"),
    ];
    for (args, words) in cases {
        let out = gpusan().arg("sim").args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(err.contains(words) && !err.contains("panicked"), "{args:?}: {err}");
    }
}

/// `gpusan sim bcache-programs` on a CPU trace: every figure's table, its JSON (eight replays
/// a trace) and its charts.
#[test]
fn bcache_programs_gives_every_figure_of_a_cpu_trace() {
    use gpusan_trace::{Access, Event, Meta, Op, Space, Writer};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tiny.gstrace");
    let meta = Meta { source: "gpusan cputrace".into(), ..Meta::default() };
    let mut w = Writer::new(std::fs::File::create(&path).unwrap(), &meta, Default::default()).unwrap();
    let acc = |tid: u32, store: bool, addr: u64, size: u64, obj: u32, to: u32, ro: bool| {
        let a = if store { Access::Store } else { Access::Load };
        let mut e = Event::access(0, tid, u32::from(ro), Op::new(Space::Global, a, size as u32), addr, size, obj);
        e.epoch = to;
        e
    };
    w.push(&Event::alloc(1, 0x1000, 64)).unwrap();
    w.push(&Event::alloc(2, 0x2000, 64)).unwrap();
    w.push(&acc(0, true, 0x1000, 8, 1, 2, false)).unwrap();
    for i in 0..100 {
        for t in 1..4 {
            w.push(&acc(t, false, 0x1000, 8, 1, 2, false)).unwrap();
            w.push(&acc(t, false, 0x2000 + 4 * (i % 16), 4, 2, 0, true)).unwrap();
        }
    }
    w.finish().unwrap();
    let json = dir.path().join("p.json");
    let out = gpusan()
        .args(["sim", "bcache-programs"])
        .arg(&path)
        .arg("--json")
        .arg(&json)
        .arg("--svg-dir")
        .arg(dir.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for words in ["Fig. 9", "Fig. 10", "Fig. 11", "Table III", "Fig. 12", "tiny"] {
        assert!(text.contains(words), "{words} missing:\n{text}");
    }
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let results = doc["results"].as_array().unwrap();
    assert_eq!(results.len(), 8);
    // 300 dereferences of object 2 and 300 of object 1 (the pointer loads), one store.
    assert!(results.iter().all(|r| r["stats"]["checks"]["total"] == 601), "{doc}");
    for f in ["fig9.svg", "fig10.svg", "fig11.svg", "fig12.svg"] {
        assert!(std::fs::read_to_string(dir.path().join(f)).unwrap().starts_with("<svg"));
    }

    // One figure: only its replay (Fig. 12 comes from Fig. 11's with skipping), table and chart.
    let only = dir.path().join("only");
    std::fs::create_dir(&only).unwrap();
    let out = gpusan()
        .args(["sim", "bcache-programs"])
        .arg(&path)
        .args(["--figure", "12", "--json"])
        .arg(only.join("p.json"))
        .arg("--svg-dir")
        .arg(&only)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("Fig. 12") && !text.contains("Fig. 9") && !text.contains("Table III"), "{text}");
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(only.join("p.json")).unwrap()).unwrap();
    let results = doc["results"].as_array().unwrap();
    assert_eq!(results.len(), 1);
    assert_eq!((results[0]["figure"].as_str(), results[0]["series"].as_str()), (Some("fig11"), Some("bcache+skip")));
    let mut svgs: Vec<String> = std::fs::read_dir(&only)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".svg"))
        .collect();
    svgs.sort();
    assert_eq!(svgs, ["fig12.svg"]);
}
