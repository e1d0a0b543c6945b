//! Many simulations over one pass of a trace: each chunk is read once and handed to every
//! configuration; the configurations are shared out among threads, each simulated by one
//! thread in trace order, so the results do not depend on how many threads ran.

use std::io::Read;

use gpusan_trace::{Chunk, Reader, TraceError};

use crate::run::{Config, Sim, Stats};

/// Runs every configuration of `configs` over the trace `reader` reads, on up to `threads`
/// threads; their statistics in `configs`' order, and the events read.
pub fn sweep<R: Read>(
    reader: &mut Reader<R>,
    configs: &[Config],
    threads: usize,
) -> Result<(Vec<Stats>, u64), TraceError> {
    let threads = threads.clamp(1, configs.len().max(1));
    let mut sims: Vec<Sim> = configs.iter().map(|c| Sim::new(*c)).collect();
    let mut chunk = Chunk::default();
    // Contiguous shares, the same whatever the chunk.
    let share = sims.len().div_ceil(threads).max(1);
    while reader.next_chunk(&mut chunk)? {
        if threads == 1 {
            for s in &mut sims {
                for e in &chunk.events {
                    s.event(e);
                }
            }
            continue;
        }
        let events = &chunk.events;
        std::thread::scope(|scope| {
            for part in sims.chunks_mut(share) {
                scope.spawn(move || {
                    for s in part {
                        for e in events {
                            s.event(e);
                        }
                    }
                });
            }
        });
    }
    Ok((sims.into_iter().map(Sim::finish).collect(), reader.events()))
}
