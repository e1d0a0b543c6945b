//! The allocation registry: outcomes of every kind of free, quarantine budgets, reuse of
//! quarantined memory, neighbour lookups, threads, scale, a model-based property test, and the
//! device table's layout and search.

use std::collections::VecDeque;
use std::mem::{offset_of, size_of};
use std::sync::Arc;

use gpusan_runtime::registry::*;
use proptest::prelude::*;

const KB: u64 = 1024;

fn alloc(base: u64, size: u64, kind: AllocKind) -> NewAlloc {
    NewAlloc { base, size, kind, device: 0, context: 7, site: SiteId::from_raw(1) }
}

fn device(base: u64, size: u64) -> NewAlloc {
    alloc(base, size, AllocKind::Device)
}

fn big() -> Registry {
    Registry::new(Config { quarantine_bytes: u64::MAX, quarantine_count: usize::MAX })
}

fn freed_site(n: u32) -> SiteId {
    SiteId::from_raw(100 + n)
}

#[test]
fn insert_lookup_free() {
    let r = big();
    let a = r.insert(device(0x1000, KB)).unwrap();
    let b = r.insert(device(0x2000, 2 * KB)).unwrap();
    assert!(a.reused.is_empty() && a.overwritten.is_empty());
    let cases: &[(u64, Option<(u64, u64)>)] = &[
        (0x0fff, None),
        (0x1000, Some((a.id, 0))),
        (0x13ff, Some((a.id, 0x3ff))),
        (0x1400, None),
        (0x2000, Some((b.id, 0))),
        (0x27ff, Some((b.id, 0x7ff))),
        (0x2800, None),
    ];
    for &(addr, want) in cases {
        let got = match r.lookup(addr) {
            Lookup::Live { alloc, offset } => Some((alloc.id, offset)),
            Lookup::Outside { .. } => None,
            other => panic!("{addr:#x}: {other:?}"),
        };
        assert_eq!(got, want, "{addr:#x}");
    }
    let freed = r.free(0x1000, FreeApi::Free, freed_site(1));
    let FreeOutcome::Freed(f) = freed.outcome else { panic!("{freed:?}") };
    assert_eq!((f.id, f.state), (a.id, AllocState::Freed { site: freed_site(1) }));
    assert!(freed.evicted.is_empty());
    assert!(matches!(r.lookup(0x1010), Lookup::Freed { alloc, offset: 0x10 } if alloc.id == a.id));
    let s = r.stats();
    assert_eq!((s.live, s.live_bytes, s.quarantined, s.quarantined_bytes), (1, 2 * KB, 1, KB));
}

#[test]
fn insert_rejects_empty_null_and_wrapping() {
    let r = big();
    assert_eq!(r.insert(device(0, 16)), Err(InsertError::Null));
    assert_eq!(r.insert(device(0x1000, 0)), Err(InsertError::Empty));
    assert_eq!(r.insert(device(u64::MAX - 3, 16)), Err(InsertError::Wraps));
    assert!(r.insert(device(u64::MAX - 16, 16)).is_ok());
    assert_eq!(r.stats().live, 1);
}

#[test]
fn double_free_names_the_first_free() {
    let r = big();
    let a = r.insert(device(0x1000, 64)).unwrap();
    assert!(matches!(r.free(0x1000, FreeApi::Free, freed_site(1)).outcome, FreeOutcome::Freed(_)));
    let again = r.free(0x1000, FreeApi::Free, freed_site(2));
    match again.outcome {
        FreeOutcome::DoubleFree { alloc, first_free } => {
            assert_eq!(
                (alloc.id, first_free, alloc.state),
                (a.id, freed_site(1), AllocState::Freed { site: freed_site(1) })
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(r.stats().quarantined, 1);
}

#[test]
fn interior_free_of_live_and_freed_allocations() {
    let r = big();
    let a = r.insert(device(0x1000, 64)).unwrap();
    let b = r.insert(device(0x2000, 64)).unwrap();
    r.free(0x2000, FreeApi::Free, freed_site(1));
    for (ptr, id, offset, live) in [(0x1001, a.id, 1, true), (0x103f, a.id, 63, true), (0x2020, b.id, 0x20, false)] {
        match r.free(ptr, FreeApi::Free, freed_site(2)).outcome {
            FreeOutcome::InvalidFree { alloc, offset: o } => {
                assert_eq!((alloc.id, o, alloc.is_live()), (id, offset, live))
            }
            other => panic!("{ptr:#x}: {other:?}"),
        }
    }
    assert_eq!(r.stats().live, 1, "an invalid free changes nothing");
}

#[test]
fn unknown_and_null_frees() {
    let r = big();
    r.insert(device(0x1000, 64)).unwrap();
    for ptr in [0xfff, 0x1040, 0x9999_0000] {
        assert_eq!(r.free(ptr, FreeApi::Free, SiteId::UNKNOWN).outcome, FreeOutcome::UnknownPointer, "{ptr:#x}");
    }
    assert_eq!(r.free(0, FreeApi::Free, SiteId::UNKNOWN).outcome, FreeOutcome::Null);
    assert_eq!(r.stats().live, 1);
}

#[test]
fn free_calls_must_match_the_allocation_family() {
    use AllocKind::*;
    use FreeApi::*;
    let pitched = Pitched { pitch: 512, width_bytes: 500, height: 2 };
    let cases = [
        (Device, Free, true),
        (Device, FreeAsync, true),
        (Device, FreeHost, false),
        (Device, HostUnregister, false),
        (pitched, Free, true),
        (Async { stream: 1 }, Free, true),
        (Async { stream: 1 }, FreeAsync, true),
        (Pool { pool: 1, stream: 2 }, FreeAsync, true),
        (Managed, Free, true),
        (Managed, FreeHost, false),
        (HostPinned { mapped: true }, FreeHost, true),
        (HostPinned { mapped: false }, Free, false),
        (HostRegistered, HostUnregister, true),
        (HostRegistered, FreeHost, false),
        (Vmm, MemUnmap, true),
        (Vmm, Free, false),
        (GraphNode, GraphFree, true),
        (GraphNode, Free, true),
        (DeviceHeap, DeviceFree, true),
        (DeviceHeap, Free, false),
        (Array, FreeArray, true),
        (Array, Free, false),
        (Other, FreeHost, true),
    ];
    for (i, (kind, api, ok)) in cases.into_iter().enumerate() {
        assert_eq!(api.accepts(kind), ok, "{kind:?} {api:?}");
        let r = big();
        let base = 0x10_0000 + i as u64 * 0x1000;
        let id = r.insert(alloc(base, 256, kind)).unwrap().id;
        match r.free(base, api, freed_site(0)).outcome {
            FreeOutcome::Freed(a) => assert!(ok && a.id == id, "{kind:?} {api:?}"),
            FreeOutcome::MismatchedFree { alloc, api: a } => {
                assert!(!ok && alloc.id == id && alloc.is_live() && a == api, "{kind:?} {api:?}");
                assert_eq!(r.stats().live, 1, "a refused free leaves the allocation live");
            }
            other => panic!("{kind:?} {api:?}: {other:?}"),
        }
    }
}

#[test]
fn quarantine_evicts_oldest_first_by_bytes() {
    let r = Registry::new(Config { quarantine_bytes: 3 * KB, quarantine_count: 100 });
    let ids: Vec<u64> = (0..5).map(|i| r.insert(device(0x10_0000 * (i + 1), KB)).unwrap().id).collect();
    let mut evicted = vec![];
    for i in 0..3 {
        evicted.extend(r.free(0x10_0000 * (i + 1), FreeApi::Free, freed_site(0)).evicted);
    }
    assert!(evicted.is_empty(), "3 KiB fit");
    let out = r.free(0x40_0000, FreeApi::Free, freed_site(0)).evicted;
    assert_eq!(out.iter().map(|a| a.id).collect::<Vec<_>>(), [ids[0]]);
    assert!(matches!(r.lookup(0x10_0000), Lookup::Outside { .. }), "evicted entries are forgotten");
    assert!(matches!(r.lookup(0x20_0000), Lookup::Freed { .. }));
    // One large free pushes out everything older, and itself when over budget alone.
    let huge = r.insert(device(0x100_0000, 4 * KB)).unwrap().id;
    let out = r.free(0x100_0000, FreeApi::Free, freed_site(0)).evicted;
    assert_eq!(out.iter().map(|a| a.id).collect::<Vec<_>>(), [ids[1], ids[2], ids[3], huge]);
    let s = r.stats();
    assert_eq!((s.quarantined, s.quarantined_bytes, s.evicted), (0, 0, 5));
}

#[test]
fn quarantine_evicts_oldest_first_by_count() {
    let r = Registry::new(Config { quarantine_bytes: u64::MAX, quarantine_count: 2 });
    let ids: Vec<u64> = (0..4).map(|i| r.insert(device(0x1000 * (i + 1), 16)).unwrap().id).collect();
    // Free out of allocation order: eviction follows free order.
    let order = [3, 1, 4, 2];
    let mut evicted = vec![];
    for i in order {
        evicted.extend(r.free(0x1000 * i, FreeApi::Free, freed_site(0)).evicted.iter().map(|a| a.id));
    }
    assert_eq!(evicted, [ids[2], ids[0]]);
    assert_eq!(r.stats().quarantined, 2);
    let zero = Registry::new(Config { quarantine_bytes: 0, quarantine_count: 0 });
    let id = zero.insert(device(0x1000, 16)).unwrap().id;
    let freed = zero.free(0x1000, FreeApi::Free, freed_site(0));
    assert!(matches!(freed.outcome, FreeOutcome::Freed(a) if a.id == id));
    assert_eq!(freed.evicted.iter().map(|a| a.id).collect::<Vec<_>>(), [id], "no quarantine: released at once");
}

#[test]
fn evict_quarantine_and_remove_context() {
    let r = big();
    for i in 0..4u64 {
        let ctx = if i % 2 == 0 { 1 } else { 2 };
        r.insert(NewAlloc { context: ctx, ..device(0x1000 * (i + 1), 100) }).unwrap();
    }
    r.free(0x1000, FreeApi::Free, freed_site(0));
    r.free(0x2000, FreeApi::Free, freed_site(0));
    let gone = r.remove_context(1);
    assert_eq!(gone.iter().map(|a| a.base).collect::<Vec<_>>(), [0x1000, 0x3000]);
    assert_eq!(r.stats().live, 1);
    assert_eq!(r.stats().quarantined, 1);
    assert_eq!(r.evict_quarantine(0).iter().map(|a| a.base).collect::<Vec<_>>(), [0x2000]);
    assert_eq!(r.evict_quarantine(0), vec![]);
    assert_eq!(r.snapshot().iter().map(|a| a.base).collect::<Vec<_>>(), [0x4000]);
}

#[test]
fn reused_memory_displaces_quarantined_and_unseen_entries() {
    let r = big();
    let a = r.insert(device(0x1000, 0x100)).unwrap().id;
    let b = r.insert(device(0x1100, 0x100)).unwrap().id;
    let c = r.insert(device(0x1200, 0x100)).unwrap().id;
    r.free(0x1000, FreeApi::FreeAsync, freed_site(0));
    r.free(0x1100, FreeApi::FreeAsync, freed_site(0));
    // The stream-ordered pool reused [0x1080, 0x1280): two freed entries and a live one whose
    // free we never saw.
    let ins = r.insert(alloc(0x1080, 0x200, AllocKind::Async { stream: 3 })).unwrap();
    let mut reused: Vec<u64> = ins.reused.iter().map(|a| a.id).collect();
    reused.sort();
    assert_eq!(reused, [a, b]);
    assert_eq!(ins.overwritten.iter().map(|a| a.id).collect::<Vec<_>>(), [c]);
    let s = r.stats();
    assert_eq!((s.live, s.quarantined, s.reused, s.overwritten), (1, 0, 2, 1));
    assert!(matches!(r.lookup(0x1000), Lookup::Outside { .. }));
    assert!(matches!(r.lookup(0x1080), Lookup::Live { alloc, .. } if alloc.id == ins.id));
    // The stale quarantine slots must not evict the new allocation later.
    let tight = Registry::new(Config { quarantine_bytes: u64::MAX, quarantine_count: 1 });
    tight.insert(device(0x1000, 0x100)).unwrap();
    tight.free(0x1000, FreeApi::Free, freed_site(0));
    let new = tight.insert(device(0x1000, 0x100)).unwrap();
    assert_eq!(new.reused.len(), 1);
    tight.insert(device(0x2000, 0x100)).unwrap();
    assert!(tight.free(0x2000, FreeApi::Free, freed_site(0)).evicted.is_empty());
    assert!(matches!(tight.lookup(0x1000), Lookup::Live { alloc, .. } if alloc.id == new.id));
    let evicted = tight.free(0x1000, FreeApi::Free, freed_site(0)).evicted;
    assert_eq!(evicted.iter().map(|a| a.base).collect::<Vec<_>>(), [0x2000], "the stale slot is skipped");
}

#[test]
fn nearest_neighbours() {
    let r = big();
    let a = r.insert(device(0x1000, 0x100)).unwrap().id;
    let b = r.insert(device(0x2000, 0x100)).unwrap().id;
    r.free(0x2000, FreeApi::Free, freed_site(0));
    let ids = |l: Lookup| match l {
        Lookup::Outside { below, above } => (below.map(|a| a.id), above.map(|a| a.id)),
        other => panic!("{other:?}"),
    };
    assert_eq!(ids(r.lookup(0x10)), (None, Some(a)));
    assert_eq!(ids(r.lookup(0x1100)), (Some(a), Some(b)), "one past the end of a");
    assert_eq!(ids(r.lookup(0x1fff)), (Some(a), Some(b)));
    assert_eq!(ids(r.lookup(0x2100)), (Some(b), None), "freed entries are neighbours too");
    assert_eq!(ids(big().lookup(0x1000)), (None, None));
}

#[test]
fn ids_are_never_reused() {
    let r = Registry::new(Config { quarantine_bytes: 0, quarantine_count: 0 });
    let mut ids = vec![];
    for _ in 0..100 {
        ids.push(r.insert(device(0x1000, 64)).unwrap().id);
        r.free(0x1000, FreeApi::Free, freed_site(0));
    }
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    assert_eq!(ids[0], 1);
}

#[test]
fn many_live_allocations() {
    const N: u64 = 25_000;
    let r = big();
    let base = |i: u64| 0x7f00_0000_0000 + i * 0x1000;
    for i in 0..N {
        r.insert(device(base(i), 0x800 + (i % 7))).unwrap();
    }
    assert_eq!(r.stats().live, N);
    for i in (0..N).step_by(7) {
        let size = 0x800 + (i % 7);
        assert!(matches!(r.lookup(base(i)), Lookup::Live { alloc, offset: 0 } if alloc.base == base(i)));
        assert!(matches!(r.lookup(base(i) + size - 1), Lookup::Live { alloc, .. } if alloc.base == base(i)));
        match r.lookup(base(i) + size) {
            Lookup::Outside { below: Some(b), above } => {
                assert_eq!(b.base, base(i));
                assert_eq!(above.map(|a| a.base), (i + 1 < N).then(|| base(i + 1)));
            }
            other => panic!("{other:?}"),
        }
    }
    for i in 0..N {
        assert!(matches!(r.free(base(i), FreeApi::Free, freed_site(0)).outcome, FreeOutcome::Freed(_)));
    }
    let s = r.stats();
    assert_eq!((s.live, s.quarantined), (0, N));
    let table = DeviceTable::build(&r);
    assert_eq!(table.entries().len() as u64, N);
    assert!(table.entries().iter().all(DeviceEntry::is_freed));
}

#[test]
fn concurrent_threads_keep_the_registry_consistent() {
    const THREADS: u64 = 8;
    const PER_THREAD: u64 = 3_000;
    const SHARED: u64 = 500;
    let r = Arc::new(Registry::new(Config { quarantine_bytes: u64::MAX, quarantine_count: 2_000 }));
    let shared = |i: u64| 0x1_0000_0000 + i * 0x100;
    for i in 0..SHARED {
        r.insert(device(shared(i), 0x100)).unwrap();
    }
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let r = Arc::clone(&r);
            std::thread::spawn(move || {
                let own = |i: u64| ((t + 2) << 36) + i * 0x1000;
                let mut won = 0;
                for i in 0..PER_THREAD {
                    let id = r.insert(device(own(i), 0x800)).unwrap().id;
                    match r.lookup(own(i) + 0x7ff) {
                        Lookup::Live { alloc, .. } => assert_eq!(alloc.id, id),
                        other => panic!("{other:?}"),
                    }
                    if i % 3 == 2 {
                        assert!(matches!(
                            r.free(own(i - 1), FreeApi::Free, freed_site(0)).outcome,
                            FreeOutcome::Freed(_)
                        ));
                    }
                    // All threads race to free each shared allocation once.
                    if i < SHARED {
                        let p = shared((i + t * 61) % SHARED);
                        match r.free(p, FreeApi::Free, freed_site(t as u32)).outcome {
                            FreeOutcome::Freed(_) => won += 1,
                            FreeOutcome::DoubleFree { .. } | FreeOutcome::UnknownPointer => {}
                            other => panic!("{other:?}"),
                        }
                    }
                }
                won
            })
        })
        .collect();
    let won: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert_eq!(won, SHARED, "each shared allocation freed exactly once");
    let snapshot = r.snapshot();
    assert!(snapshot.windows(2).all(|w| w[0].end() <= w[1].base), "sorted and disjoint");
    let mut ids: Vec<u64> = snapshot.iter().map(|a| a.id).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), snapshot.len());
    let s = r.stats();
    let live = snapshot.iter().filter(|a| a.is_live()).count() as u64;
    assert_eq!(s.live, live);
    assert_eq!(s.live, THREADS * (PER_THREAD - PER_THREAD / 3));
    assert_eq!(s.live_bytes, s.live * 0x800);
    assert_eq!(s.quarantined, snapshot.len() as u64 - live);
    assert_eq!(s.quarantined, 2_000);
    assert_eq!(s.evicted + s.quarantined, THREADS * (PER_THREAD / 3) + SHARED);
}

// --- Model-based property test -------------------------------------------------------------

/// The registry's contract, written the slow and obvious way.
struct Model {
    config: Config,
    entries: Vec<Allocation>,
    quarantine: VecDeque<u64>,
    next_id: u64,
}

impl Model {
    fn containing(&self, addr: u64) -> Option<usize> {
        self.entries.iter().position(|a| a.base <= addr && addr < a.base + a.size)
    }

    fn insert(&mut self, new: NewAlloc) -> Inserted {
        let (mut reused, mut overwritten) = (vec![], vec![]);
        self.entries.retain(|a| {
            let overlaps = a.base < new.base + new.size && new.base < a.base + a.size;
            if overlaps {
                if a.is_live() { &mut overwritten } else { &mut reused }.push(*a);
            }
            !overlaps
        });
        let id = self.next_id;
        self.next_id += 1;
        let alloc = Allocation {
            id,
            base: new.base,
            size: new.size,
            kind: new.kind,
            device: new.device,
            context: new.context,
            site: new.site,
            state: AllocState::Live,
            redzone: 0,
        };
        self.entries.push(alloc);
        Inserted { id, reused, overwritten }
    }

    fn free(&mut self, ptr: u64, api: FreeApi, site: SiteId) -> Freed {
        let mut evicted = vec![];
        let outcome = match self.containing(ptr) {
            _ if ptr == 0 => FreeOutcome::Null,
            None => FreeOutcome::UnknownPointer,
            Some(i) => {
                let a = self.entries[i];
                match a.state {
                    _ if a.base != ptr => FreeOutcome::InvalidFree { alloc: a, offset: ptr - a.base },
                    AllocState::Freed { site: first_free } => FreeOutcome::DoubleFree { alloc: a, first_free },
                    AllocState::Live if !api.accepts(a.kind) => FreeOutcome::MismatchedFree { alloc: a, api },
                    AllocState::Live => {
                        self.entries[i].state = AllocState::Freed { site };
                        self.quarantine.push_back(a.id);
                        loop {
                            let freed = self.entries.iter().filter(|a| !a.is_live());
                            let (count, bytes) = freed.fold((0, 0), |(c, b), a| (c + 1, b + a.size));
                            if count <= self.config.quarantine_count && bytes <= self.config.quarantine_bytes {
                                break;
                            }
                            let id = self.quarantine.pop_front().unwrap();
                            if let Some(j) = self.entries.iter().position(|a| a.id == id && !a.is_live()) {
                                evicted.push(self.entries.remove(j));
                            }
                        }
                        FreeOutcome::Freed(
                            self.entries
                                .iter()
                                .find(|e| e.id == a.id)
                                .copied()
                                .unwrap_or(Allocation { state: AllocState::Freed { site }, ..a }),
                        )
                    }
                }
            }
        };
        Freed { outcome, evicted }
    }

    fn lookup(&self, addr: u64) -> Lookup {
        match self.containing(addr) {
            Some(i) => {
                let alloc = self.entries[i];
                let offset = addr - alloc.base;
                if alloc.is_live() {
                    Lookup::Live { alloc, offset }
                } else {
                    Lookup::Freed { alloc, offset }
                }
            }
            None => Lookup::Outside {
                below: self.entries.iter().filter(|a| a.base <= addr).max_by_key(|a| a.base).copied(),
                above: self.entries.iter().filter(|a| a.base > addr).min_by_key(|a| a.base).copied(),
            },
        }
    }
}

#[derive(Clone, Debug)]
enum Op {
    Alloc { slot: u64, size: u64, kind: usize },
    Free { pick: usize, interior: bool, api: usize },
    FreeAt { addr: u64 },
    Lookup { addr: u64 },
}

const ARENA: u64 = 0x10000;
const KINDS: [AllocKind; 3] = [AllocKind::Device, AllocKind::Managed, AllocKind::HostPinned { mapped: true }];
const APIS: [FreeApi; 3] = [FreeApi::Free, FreeApi::FreeAsync, FreeApi::FreeHost];

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..16u64, 1..300u64, 0..3usize).prop_map(|(slot, size, kind)| Op::Alloc { slot, size, kind }),
        3 => (any::<usize>(), prop::bool::weighted(0.15), 0..3usize)
            .prop_map(|(pick, interior, api)| Op::Free { pick, interior, api }),
        1 => (0..ARENA + 0x900).prop_map(|addr| Op::FreeAt { addr }),
        3 => (ARENA - 0x40..ARENA + 0x900).prop_map(|addr| Op::Lookup { addr }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn registry_matches_model(ops in prop::collection::vec(op(), 1..120)) {
        let config = Config { quarantine_bytes: 600, quarantine_count: 3 };
        let r = Registry::new(config);
        let mut m = Model { config, entries: vec![], quarantine: VecDeque::new(), next_id: 1 };
        for (step, op) in ops.iter().enumerate() {
            let site = SiteId::from_raw(step as u32);
            match *op {
                Op::Alloc { slot, size, kind } => {
                    let new = NewAlloc { site, ..alloc(ARENA + slot * 128, size, KINDS[kind]) };
                    let mut got = r.insert(new).unwrap();
                    let mut want = m.insert(new);
                    for v in [&mut got.reused, &mut got.overwritten, &mut want.reused, &mut want.overwritten] {
                        v.sort_by_key(|a| a.id);
                    }
                    prop_assert_eq!(got, want, "step {}: {:?}", step, op);
                }
                Op::Free { pick, interior, api } => {
                    let ptr = match m.entries.get(pick % m.entries.len().max(1)) {
                        Some(a) => a.base + u64::from(interior && a.size > 1),
                        None => 0,
                    };
                    let got = r.free(ptr, APIS[api], site);
                    prop_assert_eq!(got, m.free(ptr, APIS[api], site), "step {}: {:?}", step, op);
                }
                Op::FreeAt { addr } => {
                    prop_assert_eq!(r.free(addr, FreeApi::Free, site), m.free(addr, FreeApi::Free, site));
                }
                Op::Lookup { addr } => prop_assert_eq!(r.lookup(addr), m.lookup(addr), "step {}", step),
            }
        }
        let mut want = m.entries.clone();
        want.sort_by_key(|a| a.base);
        prop_assert_eq!(r.snapshot(), want.clone());
        let s = r.stats();
        let live: Vec<_> = want.iter().filter(|a| a.is_live()).collect();
        prop_assert_eq!(s.live, live.len() as u64);
        prop_assert_eq!(s.live_bytes, live.iter().map(|a| a.size).sum::<u64>());
        prop_assert_eq!(s.quarantined + s.live, want.len() as u64);
        prop_assert!(s.quarantined <= 3 && s.quarantined_bytes <= 600);
    }

    #[test]
    fn device_lookup_agrees_with_registry(
        allocs in prop::collection::vec((0..64u64, 1..200u64), 0..40),
        frees in prop::collection::vec(any::<prop::sample::Index>(), 0..20),
        probes in prop::collection::vec(0..0x3000u64, 0..50),
    ) {
        let r = big();
        for &(slot, size) in &allocs {
            r.insert(device(0x1000 + slot * 96, size)).unwrap();
        }
        let snapshot = r.snapshot();
        for i in frees.iter().filter(|_| !snapshot.is_empty()) {
            r.free(snapshot[i.index(snapshot.len())].base, FreeApi::Free, freed_site(0));
        }
        let table = DeviceTable::build(&r);
        let edges = r.snapshot().iter().flat_map(|a| [a.base - 1, a.base, a.end() - 1, a.end()]).collect::<Vec<_>>();
        for addr in probes.into_iter().chain(edges).chain([0, u64::MAX]) {
            let want = match r.lookup(addr) {
                Lookup::Live { alloc, .. } => Some((alloc.id, false)),
                Lookup::Freed { alloc, .. } => Some((alloc.id, true)),
                Lookup::Outside { .. } => None,
            };
            let got = device_lookup(table.entries(), addr).map(|e| (e.id, e.is_freed()));
            prop_assert_eq!(got, want, "{:#x}", addr);
        }
    }
}

// --- Device table -------------------------------------------------------------------------

#[test]
fn device_table_layout() {
    assert_eq!(size_of::<DeviceEntry>(), 32);
    assert_eq!(std::mem::align_of::<DeviceEntry>(), 32);
    assert_eq!(
        [
            offset_of!(DeviceEntry, base),
            offset_of!(DeviceEntry, size),
            offset_of!(DeviceEntry, id),
            offset_of!(DeviceEntry, flags),
            offset_of!(DeviceEntry, device)
        ],
        [0, 8, 16, 24, 28]
    );
    assert_eq!(size_of::<DeviceTableHeader>(), 32);
    assert_eq!(
        [
            offset_of!(DeviceTableHeader, magic),
            offset_of!(DeviceTableHeader, layout),
            offset_of!(DeviceTableHeader, len),
            offset_of!(DeviceTableHeader, version),
            offset_of!(DeviceTableHeader, reserved)
        ],
        [0, 4, 8, 16, 24]
    );
}

#[test]
fn device_table_bytes_and_flags() {
    let r = big();
    r.insert(NewAlloc { device: 3, ..alloc(0x7f00_0000_1000, 0x40, AllocKind::Managed) }).unwrap();
    r.insert(device(0x7f00_0000_2000, 0x10)).unwrap();
    r.free(0x7f00_0000_2000, FreeApi::Free, freed_site(0));
    let table = DeviceTable::build(&r);
    let e = table.entries();
    assert!(e[0].is_live() && !e[0].is_freed() && e[0].kind_code() == AllocKind::Managed.code());
    assert!(e[1].is_freed() && e[1].kind_code() == AllocKind::Device.code());
    let mut want = vec![];
    for (base, size, id, flags, device) in
        [(0x7f00_0000_1000u64, 0x40u64, 1u64, 0x0501u32, 3i32), (0x7f00_0000_2000, 0x10, 2, 0x0102, 0)]
    {
        want.extend(base.to_le_bytes());
        want.extend(size.to_le_bytes());
        want.extend(id.to_le_bytes());
        want.extend(flags.to_le_bytes());
        want.extend(device.to_le_bytes());
    }
    assert_eq!(table.entry_bytes(0..2), &want[..]);
    assert_eq!(table.entry_bytes(1..2), &want[32..]);
    assert_eq!(table.entry_bytes(1..9), b"");
    let h = table.header().to_bytes();
    assert_eq!(&h[0..4], b"GSAT");
    assert_eq!(u32::from_le_bytes(h[4..8].try_into().unwrap()), DeviceTableHeader::LAYOUT);
    assert_eq!(u64::from_le_bytes(h[8..16].try_into().unwrap()), 2);
    assert_eq!(u64::from_le_bytes(h[16..24].try_into().unwrap()), r.version());
    assert_eq!(table.device_bytes(), 96);
}

#[test]
fn device_table_updates_only_what_changed() {
    let r = big();
    for i in 0..10 {
        r.insert(device(0x1000 * (i + 1), 0x100)).unwrap();
    }
    let mut t = DeviceTable::new();
    assert_eq!(t.update(&r), Some(0..10));
    assert_eq!(t.update(&r), None, "unchanged registry: nothing to upload");
    r.free(0x5000, FreeApi::Free, freed_site(0));
    assert_eq!(t.update(&r), Some(4..5));
    assert!(t.entries()[4].is_freed());
    r.insert(device(0x1_0000, 0x100)).unwrap();
    assert_eq!(t.update(&r), Some(10..11), "appended at the end");
    r.insert(device(0x800, 0x100)).unwrap();
    assert_eq!(t.update(&r), Some(0..12), "inserted at the front: everything shifts");
    r.remove_context(7);
    assert_eq!(t.update(&r), Some(0..0), "emptied: only the header changes");
    assert_eq!(t.header().len, 0);
    assert_eq!(t.version(), r.version());
}

/// The binary route treats the tail of an allocation up to `SLACK_BYTES` as its own only for
/// kinds the driver aligns (`gpusan_abi::binary::SLACK_KINDS`, by `AllocKind::code`).
#[test]
fn the_binary_routes_aligned_kinds_are_the_drivers_allocations() {
    use gpusan_abi::binary::SLACK_KINDS;
    let aligned = [
        AllocKind::Device,
        AllocKind::Pitched { pitch: 512, width_bytes: 500, height: 2 },
        AllocKind::Async { stream: 0 },
        AllocKind::Pool { pool: 1, stream: 0 },
        AllocKind::Managed,
        AllocKind::HostPinned { mapped: true },
        AllocKind::Vmm,
        AllocKind::GraphNode,
        AllocKind::PoolBlock { source: gpusan_runtime::pool_blocks::PoolSource::Torch, stream: 0 },
    ];
    let anywhere = [
        AllocKind::HostRegistered,
        AllocKind::DeviceHeap,
        AllocKind::Array,
        AllocKind::ModuleVariable,
        AllocKind::Other,
    ];
    for k in aligned {
        assert_ne!(SLACK_KINDS & (1 << k.code()), 0, "{k:?}");
    }
    for k in anywhere {
        assert_eq!(SLACK_KINDS & (1 << k.code()), 0, "{k:?}");
    }
}

/// An allocation padded with a red zone is registered at the size asked, its red zone kept
/// with it and recorded in its device entry's flags; an entry the red zone covers was
/// displaced (the driver handed that memory out with the rest).
#[test]
fn a_red_zone_is_kept_in_the_entry_and_displaces_what_it_covers() {
    use gpusan_abi::table::{redzone_bytes, STATE_LIVE};
    let r = big();
    r.insert(device(0x1400, 0x100)).unwrap();
    r.free(0x1400, FreeApi::Free, freed_site(0));
    let padded = r.insert_with_redzone(device(0x1000, 1000), 1024).unwrap();
    assert_eq!(padded.reused.len(), 1, "the stale entry in the red zone was displaced");
    match r.lookup(0x1000 + 999) {
        Lookup::Live { alloc, .. } => assert_eq!((alloc.size, alloc.redzone), (1000, 1024)),
        other => panic!("{other:?}"),
    }
    assert!(matches!(r.lookup(0x1000 + 1000), Lookup::Outside { .. }), "registered at the size asked");
    let table = DeviceTable::build(&r);
    let e = table.entries()[0];
    assert_eq!((e.size, e.flags & 0xff, redzone_bytes(e.flags)), (1000, STATE_LIVE, 1024));
    assert_eq!(e.kind_code(), AllocKind::Device.code());
    r.free(0x1000, FreeApi::Free, freed_site(1));
    let e = DeviceTable::build(&r).entries()[0];
    assert!(
        e.is_freed() && redzone_bytes(e.flags) == 1024,
        "a freed entry keeps its red zone: its tail is still its own"
    );
}
