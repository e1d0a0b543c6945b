//! The binary route's judgement without a GPU: `patches/gpusan_judge.h`, the body of the
//! patch the Compute Sanitizer API calls at every global access, compiled for the host by
//! `patch_judgement/harness.cpp` and held to the rule `gpusan_abi::binary` states (its
//! reference below, on `registry::device_lookup`) over random tables, random accesses and
//! a lookup cache full of garbage. Its speed is held too: an access inside a live
//! allocation that the cache names costs five loads and no window query.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use gpusan_abi::binary::{SLACK_BYTES, SLACK_KINDS};
use gpusan_abi::table::{redzone_bytes, redzone_flags, KIND_SHIFT, STATE_FREED, STATE_LIVE, STATE_MASK};
use gpusan_abi::{CODE_OUT_OF_BOUNDS, CODE_USE_AFTER_FREE};
use gpusan_runtime::registry::{device_lookup, DeviceEntry};

const READ: u32 = 0x1;
const WRITE: u32 = 0x2;
const ATOMSYS: u32 = 0x4;
const PREFETCH: u32 = 0x8;

/// The CUDA headers (`sanitizer_patching.h`), where `build.rs` finds nvcc.
fn cuda_include() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let cuda = std::env::var_os("GPUSAN_CUDA")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("../.toolchain/nvidia/cu13"));
    cuda.join("include")
}

fn harness() -> &'static Path {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    EXE.get_or_init(|| {
        let here = Path::new(env!("CARGO_MANIFEST_DIR"));
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("patch_judgement");
        std::fs::create_dir_all(&dir).unwrap();
        let exe = dir.join("harness");
        let status = Command::new("c++")
            .args(["-std=c++17", "-O1", "-Wall", "-Werror", "-Wno-unused-function", "-o"])
            .arg(&exe)
            .arg(here.join("tests/patch_judgement/harness.cpp"))
            .arg("-I")
            .arg(here.join("patches"))
            .arg("-I")
            .arg(cuda_include())
            .status()
            .expect("c++ runs");
        assert!(status.success(), "the harness does not build");
        exe
    })
}

#[derive(Clone, Copy, Debug)]
struct Access {
    addr: u64,
    size: u32,
    flags: u32,
    pc: u64,
}

#[derive(Default)]
struct Case {
    seed: u64,
    window: (u64, u64),
    params_null: bool,
    table_null: bool,
    entries: Vec<DeviceEntry>,
    accesses: Vec<Access>,
}

/// What the harness printed for one access: the verdict, and its loads and window queries.
#[derive(Debug)]
struct Judged {
    verdict: String,
    loads: u32,
    windows: u32,
}

fn judge(case: &Case) -> Vec<Judged> {
    let mut input = format!(
        "{} {} {} {} {} {} {}\n",
        case.seed,
        case.window.0,
        case.window.1,
        case.params_null as u8,
        case.table_null as u8,
        case.entries.len(),
        case.accesses.len()
    );
    for e in &case.entries {
        input += &format!("{} {} {} {}\n", e.base, e.size, e.id, e.flags);
    }
    for a in &case.accesses {
        input += &format!("{} {} {} {}\n", a.addr, a.size, a.flags, a.pc);
    }
    let mut child = Command::new(harness()).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "harness failed: {:?}", out.status);
    let text = String::from_utf8(out.stdout).unwrap();
    let judged: Vec<Judged> = text
        .lines()
        .map(|l| {
            let (verdict, counts) = l.split_once(" loads=").unwrap();
            let (loads, windows) = counts.split_once(" windows=").unwrap();
            Judged { verdict: verdict.to_string(), loads: loads.parse().unwrap(), windows: windows.parse().unwrap() }
        })
        .collect();
    assert_eq!(judged.len(), case.accesses.len());
    judged
}

/// The rule (`gpusan_abi::binary`): inside a live entry fine, unless the access runs past
/// its end; inside a freed one a use after free; in the tail after an entry of a slack kind,
/// over its red zone and up to the next 256-byte boundary, an overflow of it (a use after
/// free if freed); anywhere else untracked. The
/// shared and local windows, and prefetches, are never judged.
fn rule(case: &Case, a: &Access) -> String {
    if case.params_null || case.table_null || a.flags & PREFETCH != 0 {
        return "fine".into();
    }
    if (case.window.0..case.window.1).contains(&a.addr) {
        return "fine".into();
    }
    let report = |code: u32, e: &DeviceEntry| format!("report {code} {} {} {} {}", e.id, a.pc as u32, a.size, a.flags);
    let freed = |e: &DeviceEntry| e.flags & STATE_MASK == STATE_FREED;
    if let Some(e) = device_lookup(&case.entries, a.addr) {
        return if freed(e) {
            report(CODE_USE_AFTER_FREE, e)
        } else if u64::from(a.size) > e.size - (a.addr - e.base) {
            report(CODE_OUT_OF_BOUNDS, e)
        } else {
            "fine".into()
        };
    }
    let before = case.entries.partition_point(|e| e.base <= a.addr);
    let Some(e) = before.checked_sub(1).map(|i| &case.entries[i]) else { return "untracked".into() };
    let slack_end = (e.base + e.size + redzone_bytes(e.flags)).next_multiple_of(SLACK_BYTES);
    let kind = (e.flags >> KIND_SHIFT) & 0xff;
    if a.addr < slack_end && kind < 32 && (SLACK_KINDS >> kind) & 1 == 1 {
        report(if freed(e) { CODE_USE_AFTER_FREE } else { CODE_OUT_OF_BOUNDS }, e)
    } else {
        "untracked".into()
    }
}

/// xorshift64*: random cases without a dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Entries sorted by base, disjoint, with neighbours adjacent, a tail apart or far apart;
/// live and freed; every kind (slack kinds and not, and an out-of-range one); some with a red
/// zone, which the next entry starts after (as the runtime's padding guarantees).
fn random_case(seed: u64) -> Case {
    let mut r = Rng(seed | 1);
    let mut entries = Vec::new();
    let mut at = 0x7f00_0000_0000u64 + r.below(1 << 20) * 256;
    for id in 1..=r.below(40) {
        let size = match r.below(4) {
            0 => 1 + r.below(16),
            1 => 1 + r.below(1000),
            2 => 256 * (1 + r.below(8)),
            _ => 1 + r.below(1 << 22),
        };
        let state = if r.below(3) == 0 { STATE_FREED } else { STATE_LIVE };
        let kind = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 40][r.below(12) as usize];
        let redzone = [0, 0, 256, 1024, 256 * (1 + r.below(64))][r.below(5) as usize];
        let flags = state | kind << KIND_SHIFT | redzone_flags(redzone);
        entries.push(DeviceEntry { base: at, size, id: 1000 + id, flags, device: 0 });
        at += redzone;
        let gap = match r.below(3) {
            0 => 0,
            1 => SLACK_BYTES - (size % SLACK_BYTES),
            _ => r.below(1 << 16),
        };
        at += size + gap;
        if r.below(2) == 0 {
            at = at.next_multiple_of(SLACK_BYTES);
        }
    }
    let window = (0x7e00_0000_0000u64, 0x7e00_0100_0000u64);
    let mut accesses = Vec::new();
    for _ in 0..400 {
        let addr = match (r.below(8), entries.len() as u64) {
            (0, _) | (_, 0) => window.0 + r.below(0x2000),
            (1, _) => r.next(),
            (_, n) => {
                let e = &entries[r.below(n) as usize];
                let span = e.size + redzone_bytes(e.flags) + 2 * SLACK_BYTES;
                (e.base + r.below(span)).wrapping_sub(SLACK_BYTES / 2)
            }
        };
        let size = [1, 2, 4, 8, 16][r.below(5) as usize];
        let flags = [READ, WRITE, READ | WRITE, READ | WRITE | ATOMSYS, READ | PREFETCH][r.below(5) as usize];
        accesses.push(Access { addr, size, flags, pc: r.next() });
    }
    // Each access again, once the cache may name its entry.
    let again = accesses.clone();
    accesses.extend(again);
    Case { seed, window, entries, accesses, ..Case::default() }
}

#[test]
fn the_patch_judges_every_access_by_the_rule() {
    let mut judged = 0;
    let mut reports = 0;
    for seed in 1..=60u64 {
        let case = random_case(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        for (a, j) in case.accesses.iter().zip(judge(&case)) {
            let want = rule(&case, a);
            assert_eq!(j.verdict, want, "seed {seed}: {a:x?} in {:x?}", case.entries);
            judged += 1;
            reports += want.starts_with("report") as usize;
        }
    }
    assert!(judged > 40_000 && reports > 1_000, "{judged} accesses, {reports} reports");
}

#[test]
fn no_params_or_no_table_judges_nothing() {
    for (params_null, table_null) in [(true, false), (false, true)] {
        let mut case = random_case(7);
        (case.params_null, case.table_null) = (params_null, table_null);
        for j in judge(&case) {
            assert_eq!(j.verdict, "fine");
            assert!(j.loads <= 1 && j.windows == 0, "{j:?}");
        }
    }
}

/// The common case costs what `gpusan_judge.h` says: the params block, the table's length
/// and the cache slot, the entry's two halves; no window query. Anything else (the first
/// access of a page, a finding, memory in no entry) may cost more, never a wrong verdict.
#[test]
fn a_live_access_the_cache_names_costs_five_loads_and_no_window_query() {
    let entries = vec![
        DeviceEntry { base: 0x7f00_0000_0000, size: 1 << 20, id: 1, flags: STATE_LIVE | 1 << KIND_SHIFT, device: 0 },
        DeviceEntry { base: 0x7f00_0010_0000, size: 4096, id: 2, flags: STATE_FREED | 1 << KIND_SHIFT, device: 0 },
    ];
    let walk = |from: u64| (0..64).map(move |k| Access { addr: from + 16 * k, size: 16, flags: READ, pc: 0x40 });
    let mut accesses: Vec<Access> = walk(0x7f00_0000_0000).collect();
    accesses.extend(walk(0x7f00_0000_0000));
    // The freed buffer, twice: its verdict never comes from the fast path.
    accesses.extend(walk(0x7f00_0010_0000));
    accesses.extend(walk(0x7f00_0010_0000));
    let case = Case { seed: 3, window: (0x1000, 0x2000), entries, accesses, ..Case::default() };
    let judged = judge(&case);
    // The first access of the page searches (the cache holds garbage); then it is named.
    for j in &judged[1..128] {
        assert_eq!((j.verdict.as_str(), j.loads, j.windows), ("fine", 5, 0), "{j:?}");
    }
    for (a, j) in case.accesses[128..].iter().zip(&judged[128..]) {
        assert_eq!(j.verdict, rule(&case, a));
        assert!(j.verdict.starts_with(&format!("report {CODE_USE_AFTER_FREE} 2 ")), "{j:?}");
        assert_eq!(j.windows, 1, "{j:?}");
    }
}
