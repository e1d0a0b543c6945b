//! The binary route's judgements beyond global memory without a GPU:
//! `patches/gpusan_kinds.h` (the shared window's bound, the device heap's table), the code
//! the device patches run, compiled for the host by `patch_kinds/harness.cpp` and held to
//! their rules: a shared access past the window and no other is reported; over random
//! programs of device-side mallocs and frees (bases that collide in the hash table among
//! them), every free is judged as a plain map of blocks says.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use gpusan_abi::binary::{HEAP_ALIGN, HEAP_PROBES, HEAP_SEARCH_STEPS, SHARED_OFFSET_BITS};
use gpusan_abi::heap::{BITS, BLOCK_TAG};
use gpusan_abi::table::LOOKUP_CACHE_HASH;
use gpusan_abi::{CODE_DOUBLE_FREE, CODE_INVALID_FREE};

fn harness() -> &'static Path {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    EXE.get_or_init(|| {
        let here = Path::new(env!("CARGO_MANIFEST_DIR"));
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("patch_kinds");
        std::fs::create_dir_all(&dir).unwrap();
        let exe = dir.join("harness");
        let status = Command::new("c++")
            .args(["-std=c++17", "-O1", "-Wall", "-Werror", "-Wno-unused-function", "-o"])
            .arg(&exe)
            .arg(here.join("tests/patch_kinds/harness.cpp"))
            .arg("-I")
            .arg(here.join("patches"))
            .status()
            .expect("c++ runs");
        assert!(status.success(), "the harness does not build");
        exe
    })
}

/// Runs `ops` (one a line, `harness.cpp`'s language) and returns its answers.
fn play(ops: &[String]) -> Vec<String> {
    let mut child = Command::new(harness()).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(ops.join("\n").as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "harness failed: {:?}", out.status);
    let answers: Vec<String> = String::from_utf8(out.stdout).unwrap().lines().map(str::to_string).collect();
    assert_eq!(answers.len(), ops.len());
    answers
}

#[test]
fn a_shared_access_is_past_the_window_only_when_it_ends_past_it() {
    let rank = 1u64 << SHARED_OFFSET_BITS;
    let cases = [
        (0u64, 4u32, 1024u32, "inside"),
        (1020, 4, 1024, "inside"),
        (1021, 4, 1024, "past"),
        (1024, 1, 1024, "past"),
        (1008, 16, 1024, "inside"),
        (0x1_0000, 4, 1024, "past"),
        // The block's rank in its cluster above the offset is no offset.
        (3 * rank + 1020, 4, 1024, "inside"),
        (3 * rank + 1024, 4, 1024, "past"),
        (0, 1, 0, "past"),
    ];
    let ops: Vec<String> = cases.iter().map(|(a, s, w, _)| format!("w {a} {s} {w}")).collect();
    for (c, got) in cases.iter().zip(play(&ops)) {
        assert_eq!(got, c.3, "{c:?}");
    }
}

/// xorshift64*: random programs without a dependency.
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

/// The heap table's first slot of a base (the header's hash).
fn slot(base: u64) -> u64 {
    (base >> 4).wrapping_mul(LOOKUP_CACHE_HASH) >> (64 - BITS)
}

/// The rule of a device-side free, on a plain map of the blocks mallocs returned (base →
/// size, live): a freed block's base again is a double free; a pointer inside a live block
/// (found within the search's reach below it) or not 16-byte aligned an invalid free;
/// anything else, and null, fine.
fn rule(blocks: &mut HashMap<u64, (u64, bool)>, ptr: u64, pc: u64) -> String {
    if ptr == 0 {
        return "fine".into();
    }
    if let Some((_, live)) = blocks.get_mut(&ptr) {
        if *live {
            *live = false;
            return "fine".into();
        }
        return format!("report {CODE_DOUBLE_FREE} {} {pc}", ptr | BLOCK_TAG);
    }
    let mut v = ptr & !(HEAP_ALIGN - 1);
    for _ in 0..HEAP_SEARCH_STEPS {
        if v == 0 {
            break;
        }
        if let Some(&(size, true)) = blocks.get(&v) {
            if ptr - v < size {
                return format!("report {CODE_INVALID_FREE} {} {pc}", v | BLOCK_TAG);
            }
        }
        v -= HEAP_ALIGN;
    }
    if !ptr.is_multiple_of(HEAP_ALIGN) {
        format!("report {CODE_INVALID_FREE} 0 {pc}")
    } else {
        "fine".into()
    }
}

/// A program of mallocs and frees as a heap would see them: fresh 16-byte aligned blocks
/// (a few of them hashing to one small run of slots, so probes pass over each other), freed
/// blocks handed out again at the same base; frees of live blocks, of freed ones, of
/// interior and misaligned pointers, of memory no malloc returned, of null.
fn program(seed: u64) -> (Vec<String>, Vec<String>) {
    let mut r = Rng(seed | 1);
    let mut blocks: HashMap<u64, (u64, bool)> = HashMap::new();
    let (mut ops, mut want) = (Vec::new(), Vec::new());
    let mut next = 0x7000_0000_0000u64 + r.below(1 << 20) * 16;
    let mut colliding = 0;
    for _ in 0..1500 {
        let bases: Vec<u64> = blocks.keys().copied().collect();
        let live: Vec<u64> = blocks.iter().filter(|(_, b)| b.1).map(|(k, _)| *k).collect();
        let freed: Vec<u64> = blocks.iter().filter(|(_, b)| !b.1).map(|(k, _)| *k).collect();
        match r.below(10) {
            0..=2 => {
                let size = [1, 16, 100, 4096, 1 + r.below(20_000)][r.below(5) as usize];
                let base = if !freed.is_empty() && r.below(4) == 0 {
                    freed[r.below(freed.len() as u64) as usize]
                } else if colliding < 24 && r.below(4) == 0 {
                    // A fresh base whose probe starts in slots 0..8 of the table.
                    colliding += 1;
                    loop {
                        next += 16 * (1 + r.below(64));
                        if slot(next) < 8 {
                            break next;
                        }
                    }
                } else {
                    next += 16 * (1 + r.below(64));
                    next
                };
                next = next.max(base + size.next_multiple_of(HEAP_ALIGN));
                blocks.insert(base, (size, true));
                ops.push(format!("m {base} {size}"));
                want.push("ok".to_string());
            }
            k => {
                let pc = r.below(1 << 20);
                let pick = |r: &mut Rng, from: &[u64]| from.get(r.below(from.len().max(1) as u64) as usize).copied();
                let ptr = match k {
                    3..=5 => pick(&mut r, &live),
                    6 => pick(&mut r, &freed),
                    7 => pick(&mut r, &live).map(|b| b + 1 + r.below(blocks[&b].0.max(2) - 1)),
                    8 => pick(&mut r, &bases).map(|b| b + [1, 3, 8, 15, 17, 2048][r.below(6) as usize]),
                    _ => Some([0, next + 4096, 0x10][r.below(3) as usize]),
                }
                .unwrap_or(0);
                want.push(rule(&mut blocks, ptr, pc));
                ops.push(format!("f {ptr} {pc}"));
            }
        }
    }
    ops.push("o".to_string());
    want.push("overflow=0".to_string());
    (ops, want)
}

#[test]
fn every_device_side_free_is_judged_as_the_map_of_blocks_says() {
    let (mut reports, mut frees) = (0, 0);
    for seed in 1..=40u64 {
        let (ops, want) = program(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        for ((op, got), want) in ops.iter().zip(play(&ops)).zip(&want) {
            assert_eq!(&got, want, "seed {seed}: {op}");
            frees += op.starts_with('f') as usize;
            reports += want.starts_with("report") as usize;
        }
    }
    assert!(frees > 20_000 && reports > 5_000, "{frees} frees, {reports} reports");
}

#[test]
fn with_no_heap_table_no_free_is_judged() {
    let ops: Vec<String> = [0u64, 0x10, 0x7000_0000_0003].iter().map(|p| format!("n {p}")).collect();
    assert!(play(&ops).iter().all(|v| v == "fine"));
}

/// A base probes at most `HEAP_PROBES` slots: past them the table says it overflowed, and
/// the block stays unknown (a free of it is judged as of memory no malloc returned).
#[test]
fn a_full_probe_sets_the_overflow_word_and_leaves_the_block_unknown() {
    let mut bases = Vec::new();
    let mut b = 0x7000_0000_0000u64;
    while bases.len() < HEAP_PROBES as usize + 1 {
        b += 16;
        if slot(b) == 5 {
            bases.push(b);
        }
    }
    let mut ops: Vec<String> = bases.iter().map(|b| format!("m {b} 16")).collect();
    ops.push("o".into());
    let last = *bases.last().unwrap();
    ops.push(format!("f {last} 1"));
    ops.push(format!("f {last} 2"));
    let got = play(&ops);
    assert_eq!(got[bases.len()], "overflow=1");
    assert_eq!(&got[bases.len() + 1..], ["fine", "fine"], "an unknown block's second free is not judged");
}
