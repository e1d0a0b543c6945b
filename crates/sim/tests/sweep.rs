//! The sweep over a synthetic trace: its results are those of each configuration simulated
//! alone, whatever the number of threads; a larger buffer never hits less (LRU, fully
//! associative: its contents include a smaller one's); the oracle (one load a walk) never
//! walks more than the tree or the list.

use gpusan_sim::mlb::{Policy, Shape};
use gpusan_sim::run::{Config, Mode, Sim, Timing};
use gpusan_sim::synth;
use gpusan_sim::table::Organisation;
use gpusan_trace::{Chunk, Reader};
use proptest::prelude::*;

fn trace(shape: &synth::Shape) -> Vec<u8> {
    let mut out = Vec::new();
    synth::write(shape, &mut out).unwrap();
    out
}

fn configs(mode: Mode) -> Vec<Config> {
    let mut v = Vec::new();
    for org in [Organisation::List, Organisation::Bst, Organisation::Oracle] {
        for entries in [0, 1, 2, 4, 8, 16, 64] {
            v.push(Config {
                mlb: Shape { entries, ways: 0, policy: Policy::Lru },
                org,
                mode,
                timing: Timing::default(),
            });
        }
    }
    v
}

fn small(seed: u64) -> synth::Shape {
    synth::Shape {
        allocations: 60,
        kernels: 6,
        sms: 8,
        warps_per_kernel: 64,
        accesses_per_warp: 6,
        working_set: 5,
        churn: 4,
        seed,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    #[test]
    fn results_do_not_depend_on_threads(seed in 1u64..1000, threads in 2usize..9) {
        let bytes = trace(&small(seed));
        let configs = configs(Mode::Compiled);
        let (one, n1) = gpusan_sim::sweep(&mut Reader::new(&bytes[..]).unwrap(), &configs, 1).unwrap();
        let (many, n2) = gpusan_sim::sweep(&mut Reader::new(&bytes[..]).unwrap(), &configs, threads).unwrap();
        prop_assert_eq!(n1, n2);
        prop_assert_eq!(&one, &many);
        // And each is what the configuration gives alone.
        let mut alone = Sim::new(configs[10]);
        let mut r = Reader::new(&bytes[..]).unwrap();
        let mut chunk = Chunk::default();
        while r.next_chunk(&mut chunk).unwrap() {
            for e in &chunk.events {
                alone.event(e);
            }
        }
        prop_assert_eq!(alone.finish(), one[10].clone());
    }

    #[test]
    fn more_entries_never_hit_less_and_better_tables_never_walk_more(seed in 1u64..1000) {
        for mode in [Mode::Compiled, Mode::HwOnly] {
            let bytes = trace(&small(seed));
            let configs = configs(mode);
            let (s, _) = gpusan_sim::sweep(&mut Reader::new(&bytes[..]).unwrap(), &configs, 3).unwrap();
            for org in 0..3 {
                let row = &s[org * 7..org * 7 + 7];
                for w in row.windows(2) {
                    prop_assert!(w[1].loadmeta_hits + w[1].memcheck_hits >= w[0].loadmeta_hits + w[0].memcheck_hits);
                    prop_assert!(w[1].metadata_loads <= w[0].metadata_loads);
                }
            }
            for e in 0..7 {
                let (list, bst, oracle) = (&s[e], &s[7 + e], &s[14 + e]);
                prop_assert!(oracle.metadata_loads <= bst.metadata_loads && oracle.metadata_loads <= list.metadata_loads);
                prop_assert!(list.est_slowdown >= oracle.est_slowdown && bst.est_slowdown >= oracle.est_slowdown);
            }
        }
    }
}

/// A kernel's working set of 6 fits an 8-entry buffer: past 8 entries the hit rate hardly
/// moves (GPUArmor Fig. 11: "overheads saturate for an 8-entry MLB and beyond"); what a
/// larger one still gains is allocations kept from earlier kernels.
#[test]
fn past_the_working_set_a_larger_buffer_changes_nothing() {
    let shape = synth::Shape { working_set: 6, ..small(7) };
    let bytes = trace(&shape);
    let configs = configs(Mode::Compiled);
    let (s, _) = gpusan_sim::sweep(&mut Reader::new(&bytes[..]).unwrap(), &configs, 2).unwrap();
    // Entries 8, 16, 64 are indices 4, 5, 6 of each organisation's row.
    for org in 0..3 {
        let row: Vec<(f64, u64)> = s[org * 7..org * 7 + 7].iter().map(|x| (x.hit_rate, x.metadata_loads)).collect();
        let (h8, h64) = (s[org * 7 + 4].hit_rate, s[org * 7 + 6].hit_rate);
        assert!(h8 > 0.9 && h64 - h8 < 0.02, "organisation {org}: {row:?}");
    }
    // Without a buffer, 60 live allocations: the list walks about half of them a lookup, the
    // tree about log2(60).
    // Walk loads per LOADMETA: the loads less the checks' (one per check that missed).
    let per =
        |x: &gpusan_sim::run::Stats| (x.metadata_loads - (x.memcheck - x.memcheck_hits)) as f64 / x.loadmeta as f64;
    assert!(per(&s[0]) > 2.0 * per(&s[7]), "list {} tree {}", per(&s[0]), per(&s[7]));
    assert!(per(&s[7]) <= 7.0 && per(&s[7]) > 1.0, "tree {}", per(&s[7]));
}
