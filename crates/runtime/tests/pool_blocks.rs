//! Pool blocks nested inside registered allocations (segments): the device table kernels
//! search, built with blocks, judges every address as a plain model of pools does (random
//! segments, blocks, block frees and segment frees), and stays sorted and disjoint with one
//! entry per block; reports name a block, its segment, and where an address past it fell.

use gpusan_runtime::device_abi::{ErrorRecord, SourceLines};
use gpusan_runtime::pool_blocks::{BlockFree, PoolSource};
use gpusan_runtime::registry::blocks::{NewBlock, PoolPlace, Show};
use gpusan_runtime::registry::{device_lookup, AllocKind, Config, DeviceTable, FreeApi, NewAlloc, Registry, SiteId};
use proptest::prelude::*;

const SEGMENTS: u64 = 4;
const SEG_STRIDE: u64 = 0x1000;
const SEG_BASE: u64 = 0x10_0000;

fn segment(i: u64) -> NewAlloc {
    NewAlloc {
        base: SEG_BASE + i * SEG_STRIDE,
        size: 0x800 + 0x100 * i,
        kind: AllocKind::Device,
        device: 0,
        context: 7,
        site: SiteId::UNKNOWN,
    }
}

fn block(base: u64, size: u64) -> NewBlock {
    NewBlock { base, size, source: PoolSource::Torch, stream: 0, device: 0, site: SiteId::UNKNOWN }
}

#[derive(Clone, Debug)]
enum Op {
    /// A block in segment `seg` (or past every segment when `seg == SEGMENTS`).
    Alloc { seg: u64, offset: u64, size: u64 },
    /// Frees the `n`th block the model knows (live or not: a second free changes nothing).
    Free { n: usize },
    /// Frees segment `seg` (`cudaFree`).
    FreeSegment { seg: u64 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (0..=SEGMENTS, 0u64..0xa00, 1u64..0x300).prop_map(|(seg, offset, size)| Op::Alloc { seg, offset, size }),
        // A pool's churn: blocks handed out again where blocks were.
        3 => (0..=SEGMENTS, 0u64..8, 1u64..0x300).prop_map(|(seg, slot, size)| Op::Alloc { seg, offset: slot * 0x100, size }),
        3 => (0usize..64).prop_map(|n| Op::Free { n }),
        1 => (0..SEGMENTS).prop_map(|seg| Op::FreeSegment { seg }),
    ]
}

/// The model: what a pool's memory is, written as plainly as possible.
#[derive(Default)]
struct Model {
    /// (id, base, size, freed) of each segment.
    segments: Vec<(u64, u64, u64, bool)>,
    /// (id, base, size, freed) of each block, disjoint.
    blocks: Vec<(u64, u64, u64, bool)>,
}

#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    Live(u64),
    Freed(u64),
    Miss,
}

impl Model {
    fn judge(&self, x: u64) -> Verdict {
        let inside = |&&(_, b, s, _): &&(u64, u64, u64, bool)| x >= b && x < b + s;
        let state =
            |&(id, _, _, freed): &(u64, u64, u64, bool)| if freed { Verdict::Freed(id) } else { Verdict::Live(id) };
        if let Some(b) = self.blocks.iter().find(inside) {
            return state(b);
        }
        match self.segments.iter().find(inside) {
            Some(&(_, base, size, _)) if self.blocks.iter().any(|&(_, b, s, _)| b < base + size && b + s > base) => {
                Verdict::Miss
            }
            Some(seg) => state(seg),
            None => Verdict::Miss,
        }
    }
}

fn run(ops: &[Op]) -> (Registry, Model) {
    let r = Registry::new(Config { quarantine_bytes: u64::MAX, quarantine_count: usize::MAX });
    let mut m = Model::default();
    for i in 0..SEGMENTS {
        let s = segment(i);
        let id = r.insert(s).unwrap().id;
        m.segments.push((id, s.base, s.size, false));
    }
    for op in ops {
        match *op {
            Op::Alloc { seg, offset, size } => {
                let base = SEG_BASE + seg * SEG_STRIDE + offset;
                let id = r.insert_block(block(base, size)).unwrap();
                m.blocks.retain(|&(_, b, s, _)| !(b < base + size && b + s > base));
                m.blocks.push((id, base, size, false));
            }
            Op::Free { n } => {
                let Some(&(id, base, _, freed)) = m.blocks.get(n % m.blocks.len().max(1)) else { continue };
                let outcome = r.free_block(base, SiteId::UNKNOWN, 0, Show::Later);
                // Shown at once here; `a_free_is_shown_only_when_published` holds the wait.
                r.publish_block_frees(|_| true);
                match outcome {
                    BlockFree::Freed(b) => assert!(!freed && b.id == id),
                    BlockFree::Again(b) => assert!(freed && b.id == id),
                    BlockFree::Unknown => panic!("block {id} unknown"),
                }
                m.blocks.iter_mut().filter(|b| b.0 == id).for_each(|b| b.3 = true);
            }
            Op::FreeSegment { seg } => {
                let (id, base, size, freed) = m.segments[seg as usize];
                r.free(base, FreeApi::Free, SiteId::UNKNOWN);
                if !freed {
                    m.segments[seg as usize].3 = true;
                    m.blocks.retain(|&(_, b, _, _)| !(b >= base && b < base + size));
                }
                let _ = id;
            }
        }
    }
    (r, m)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn the_table_judges_every_address_as_the_model(ops in proptest::collection::vec(op(), 0..40)) {
        let (r, m) = run(&ops);
        let t = DeviceTable::build(&r);
        let e = t.entries();
        for w in e.windows(2) {
            prop_assert!(w[0].base + w[0].size <= w[1].base, "sorted and disjoint: {:?}", w);
        }
        // One entry per block, the segments with no block one each: at most 32 bytes a tensor.
        let holding = m.segments.iter().filter(|&&(_, b, s, _)| m.blocks.iter().any(|&(_, bb, bs, _)| bb < b + s && bb + bs > b)).count();
        prop_assert_eq!(e.len(), m.blocks.len() + m.segments.len() - holding);
        let live = m.blocks.iter().filter(|b| !b.3).count() as u64;
        prop_assert_eq!(r.block_counts(), (m.blocks.len() as u64, live), "blocks kept and live");
        for x in (SEG_BASE - 0x10..SEG_BASE + (SEGMENTS + 1) * SEG_STRIDE).step_by(7) {
            let device = match device_lookup(e, x) {
                Some(d) if d.is_freed() => Verdict::Freed(d.id),
                Some(d) => Verdict::Live(d.id),
                None => Verdict::Miss,
            };
            prop_assert_eq!(device, m.judge(x), "address {:#x}", x);
        }
    }
}

#[test]
fn a_block_is_named_with_its_segment_and_where_the_address_fell() {
    let r = Registry::default();
    let seg = r.insert(NewAlloc { size: 2 << 20, ..segment(0) }).unwrap().id;
    let a = r.insert_block(block(SEG_BASE, 4000)).unwrap();
    let b = r.insert_block(block(SEG_BASE + 4096, 512)).unwrap();
    let record = |address, allocation| ErrorRecord { address, allocation, size: 4, ..ErrorRecord::default() };
    let text = |rec: ErrorRecord| rec.to_report("k", "m", &SourceLines::default(), &r).to_string();

    let slack = text(record(SEG_BASE + 4000, a));
    assert!(slack.contains("is 0 bytes past the end of a tensor block of 4000 B (torch caching allocator)"), "{slack}");
    assert!(slack.contains(&format!("inside a segment of 2 MiB at {SEG_BASE:#x} (id {seg})")), "{slack}");
    assert!(slack.contains("the pool's slack"), "{slack}");

    let neighbour = text(record(SEG_BASE + 4100, a));
    assert!(
        neighbour.contains(&format!("neighbouring block of 512 B at {:#x} (id {b})", SEG_BASE + 4096)),
        "{neighbour}"
    );

    // No root known (the binary route's records name the entry found, here none).
    assert!(matches!(r.pool_place(SEG_BASE + 4050), PoolPlace::Slack { nearest: Some(n), .. } if n.id == a));
    let unknown = text(record(SEG_BASE + 4050, 0));
    assert!(unknown.contains("tensor block of 4000 B"), "{unknown}");
}

#[test]
fn a_freed_block_stays_freed_until_reallocated_and_a_freed_segment_drops_its_blocks() {
    let r = Registry::default();
    r.insert(segment(0)).unwrap();
    let a = r.insert_block(block(SEG_BASE, 100)).unwrap();
    assert!(matches!(r.free_block(SEG_BASE, SiteId::UNKNOWN, 0, Show::Later), BlockFree::Freed(b) if b.id == a));
    r.publish_block_frees(|_| true);
    let t = DeviceTable::build(&r);
    assert!(device_lookup(t.entries(), SEG_BASE + 10).is_some_and(|e| e.is_freed() && e.id == a));
    let b = r.insert_block(block(SEG_BASE, 64)).unwrap();
    let t = DeviceTable::build(&r);
    assert!(device_lookup(t.entries(), SEG_BASE + 10).is_some_and(|e| e.is_live() && e.id == b));
    assert!(device_lookup(t.entries(), SEG_BASE + 70).is_none(), "the rest of the old block is slack now");
    r.free(SEG_BASE, FreeApi::Free, SiteId::UNKNOWN);
    assert_eq!(r.block_counts(), (0, 0));
    let t = DeviceTable::build(&r);
    assert!(device_lookup(t.entries(), SEG_BASE + 10).is_some_and(|e| e.is_freed() && e.kind_code() == 1));
}

/// A block's free reaches kernels only when the runtime shows it (once no kernel launched
/// before the free can still run on its stream): until then the table shows it live.
#[test]
fn a_free_is_shown_only_when_published() {
    let r = Registry::default();
    r.insert(segment(0)).unwrap();
    let a = r.insert_block(block(SEG_BASE, 100)).unwrap();
    let b = r.insert_block(block(SEG_BASE + 512, 100)).unwrap();
    let mut t = DeviceTable::build(&r);
    r.free_block(SEG_BASE, SiteId::UNKNOWN, 0x51, Show::Later);
    r.free_block(SEG_BASE + 512, SiteId::UNKNOWN, 0x52, Show::Later);
    assert!(r.has_pending_block_frees());
    assert_eq!(t.update(&r), None, "nothing a kernel sees changed yet");
    assert!(device_lookup(t.entries(), SEG_BASE + 10).is_some_and(|e| e.is_live()));
    assert_eq!(r.publish_block_frees(|p| p.stream == 0x51), 1);
    assert!(t.update(&r).is_some());
    assert!(device_lookup(t.entries(), SEG_BASE + 10).is_some_and(|e| e.is_freed() && e.id == a));
    assert!(device_lookup(t.entries(), SEG_BASE + 520).is_some_and(|e| e.is_live() && e.id == b));
    assert!(r.has_pending_block_frees());
    assert_eq!(r.pending_block_frees().len(), 1);
    assert_eq!(r.publish_block_frees(|_| true), 1);
    assert!(!r.has_pending_block_frees());
    let t = DeviceTable::build(&r);
    assert!(device_lookup(t.entries(), SEG_BASE + 520).is_some_and(|e| e.is_freed() && e.id == b));
}

/// Host copies and sets are judged against the tensor, not only its segment: a copy past a
/// block is out of bounds of the block (even though the segment goes on), a copy into a freed
/// block is a use after free, and copies inside a block or in a segment with no blocks stay
/// as before.
#[test]
fn host_copies_are_judged_against_the_block_they_start_in() {
    use gpusan_runtime::checks::{check_call, Call, Mem};
    use gpusan_runtime::report::ErrorKind;
    let r = Registry::default();
    r.insert(NewAlloc { size: 2 << 20, ..segment(0) }).unwrap();
    let plain = SEG_BASE + (4 << 20);
    r.insert(NewAlloc { base: plain, ..segment(1) }).unwrap();
    r.insert_block(block(SEG_BASE, 4000)).unwrap();
    r.insert_block(block(SEG_BASE + 4096, 512)).unwrap();
    let kinds = |call: Call| check_call(&r, "cudaMemcpy", &call).iter().map(|f| f.kind()).collect::<Vec<_>>();
    let copy = |dst, count| Call::Copy { dst: Mem::Device(dst), src: Mem::Host(0x9000_0000), count };

    assert_eq!(kinds(copy(SEG_BASE, 4000)), vec![]);
    assert_eq!(kinds(copy(SEG_BASE + 100, 4000)), vec![ErrorKind::MemcpyOutOfBounds]);
    let past = check_call(&r, "cudaMemcpy", &copy(SEG_BASE + 100, 4000));
    let text = past[0].to_report(SiteId::UNKNOWN).to_string();
    assert!(text.contains("tensor block of 4000 B"), "names the tensor: {text}");
    assert_eq!(kinds(Call::Set { dst: Mem::Device(SEG_BASE + 4096), count: 513 }), vec![ErrorKind::MemsetOutOfBounds]);

    r.free_block(SEG_BASE, SiteId::UNKNOWN, 0, Show::Now);
    assert_eq!(kinds(copy(SEG_BASE, 16)), vec![ErrorKind::UseAfterFreeHost]);

    // A segment holding no blocks is still one allocation.
    assert_eq!(kinds(copy(plain, 0x900)), vec![]);
    assert_eq!(kinds(copy(plain, 0x901)), vec![ErrorKind::MemcpyOutOfBounds]);
}
