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
}

#[cfg(test)]
mod tests {
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
        for cut in 0..bytes.len() {
            super::trace(&bytes[..cut]);
        }
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] = b[i].wrapping_add(0x41);
            super::trace(&b);
        }
    }
}
