//! The body of the `trace` fuzz target (`fuzz/fuzz_targets/trace.rs`): any bytes read as a
//! trace, characterized and simulated. Must never panic, hang or run out of memory; what
//! it returns holds the simulator's invariants.

use crate::mlb::{Policy, Shape};
use crate::run::{Config, Mode, Timing};
use crate::table::Organisation;

pub fn trace(data: &[u8]) {
    simulate(data);
    // Most changes to a chunk break its CRC, and the reader stops there: the same bytes with
    // every chunk's CRC made right let the changes reach the decompressor and the columns.
    let fixed = with_crcs_fixed(data);
    if fixed != data {
        simulate(&fixed);
    }
}

/// `data` with the CRC of each chunk it can find (walking the chunk headers from the end of
/// the metadata) set to its payload's.
fn with_crcs_fixed(data: &[u8]) -> Vec<u8> {
    let mut out = data.to_vec();
    let word = |b: &[u8], at: usize| b.get(at..at + 4).map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]) as usize);
    let Some(meta) = word(data, 12) else { return out };
    let mut at = 16usize.saturating_add(meta);
    while out.get(at..at + 4) == Some(b"CHNK") {
        let Some(packed) = word(&out, at + 12) else { break };
        let payload = at + 20;
        let Some(bytes) = out.get(payload..payload.saturating_add(packed)) else { break };
        let crc = crc32fast::hash(bytes).to_le_bytes();
        out[at + 16..at + 20].copy_from_slice(&crc);
        at = payload + packed;
    }
    out
}

fn simulate(data: &[u8]) {
    let Ok(mut reader) = gpusan_trace::Reader::new(data) else { return };
    let _ = crate::characterize(&mut reader, 8);
    let Ok(mut reader) = gpusan_trace::Reader::new(data) else { return };
    let configs = [
        Config {
            mlb: Shape { entries: 4, ways: 2, policy: Policy::Random },
            org: Organisation::List,
            mode: Mode::Compiled,
            timing: Timing::default(),
        },
        Config {
            mlb: Shape::fully_associative(8),
            org: Organisation::Bst,
            mode: Mode::HwOnly,
            timing: Timing::default(),
        },
        Config {
            mlb: Shape::fully_associative(2),
            org: Organisation::Oracle,
            mode: Mode::Derived,
            timing: Timing::default(),
        },
    ];
    if let Ok((stats, _)) = crate::sweep(&mut reader, &configs, 2) {
        for s in stats {
            assert!(s.loadmeta_hits <= s.loadmeta && s.memcheck_hits <= s.memcheck, "{s:?}");
            assert!(s.loadmeta_null <= s.loadmeta);
        }
    }
    // The BCache replays: a program's (CPU trace) and the synthetic workload's.
    use crate::bcache::model::{Config as Mesh, Design};
    use crate::bcache::program::{replay, Options};
    let Ok(mut reader) = gpusan_trace::Reader::new(data) else { return };
    if let Ok(s) = replay(Design::BCache, Mesh::mesh(2, 2), &Options { smart: true, ..Options::default() }, &mut reader)
    {
        let c = &s.checks;
        assert!(c.skipped_stored <= c.total && c.skipped_address <= c.total, "{c:?}");
        assert!(s.storage.linked <= s.storage.locations, "{:?}", s.storage);
    }
    let Ok(mut reader) = gpusan_trace::Reader::new(data) else { return };
    let _ = crate::bcache::synthetic::trace::replay(Design::HardBound, Mesh::mesh(2, 2), &mut reader, 1);
}

#[cfg(test)]
mod tests {
    /// `bytes` cut at every byte, and with every byte changed, through the fuzz body.
    fn damaged_everywhere(bytes: &[u8]) {
        for cut in 0..bytes.len() {
            super::trace(&bytes[..cut]);
        }
        for i in 0..bytes.len() {
            let mut b = bytes.to_vec();
            b[i] = b[i].wrapping_add(0x41);
            super::trace(&b);
        }
    }

    /// Every prefix and every one-byte change of a small synthetic trace.
    #[test]
    fn damaged_traces_neither_panic_nor_hang() {
        let shape = crate::synth::Shape {
            allocations: 5,
            kernels: 2,
            sms: 3,
            warps_per_kernel: 4,
            accesses_per_warp: 2,
            working_set: 2,
            churn: 1,
            seed: 3,
        };
        let mut bytes = Vec::new();
        crate::synth::write(&shape, &mut bytes).unwrap();
        damaged_everywhere(&bytes);
    }

    /// The same for a CPU trace: every prefix and one-byte change, and a thread number that
    /// would size the replay's tables, refused.
    #[test]
    fn damaged_cpu_traces_neither_panic_nor_hang() {
        use gpusan_trace::{Access, Event, Meta, Op, Space, Writer};
        let meta = Meta { source: "gpusan cputrace".into(), ..Meta::default() };
        let write = |events: &[Event]| {
            let mut bytes = Vec::new();
            let mut w = Writer::new(&mut bytes, &meta, Default::default()).unwrap();
            for e in events {
                w.push(e).unwrap();
            }
            w.finish().unwrap();
            bytes
        };
        let load = |tid: u32, addr: u64, obj: u32, to: u32| Event {
            epoch: to,
            ..Event::access(0, tid, 0, Op::new(Space::Global, Access::Load, 8), addr, 8, obj)
        };
        let events = [
            Event::alloc(1, 0x1000, 64),
            Event::alloc(2, 0x2000, 64),
            load(1, 0x1000, 1, 2),
            load(2, 0x2008, 2, 0),
            Event { sm: 1, ..Event::free(2) },
        ];
        let bytes = write(&events);
        damaged_everywhere(&bytes);
        let far = write(&[load(u32::MAX, 0x1000, 0, 0)]);
        let err = crate::bcache::program::replay(
            crate::bcache::model::Design::BCache,
            crate::bcache::model::Config::mesh(2, 2),
            &Default::default(),
            &mut gpusan_trace::Reader::new(&far[..]).unwrap(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("at most 4096 threads"), "{err}");
    }
}
