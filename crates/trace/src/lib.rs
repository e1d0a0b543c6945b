//! gpusan's trace format (issue 19, `docs/trace-format.md`): what a GPU run did that a
//! simulator of memory-safety hardware needs, per warp: each global, shared and local
//! access, each metadata lookup (GPUArmor's LOADMETA) and check (MEMCHECK) where the check
//! pass places them, the allocation each resolves to; allocations, frees, kernels, and each
//! warp's instruction count.
//!
//! Written as it is made and read as it is needed, in chunks of at most
//! [`MAX_CHUNK_EVENTS`] events: a writer and a reader each hold one chunk, whatever the
//! trace's length. A chunk stores its events column by column (each field of every event
//! together, addresses as deltas), compressed with LZ4 and guarded by a CRC. A damaged or
//! cut trace gives every whole chunk before the damage, then a [`TraceError`] naming the
//! byte and chunk where it is.

mod columns;
mod error;
mod event;
mod read;
mod write;

pub use error::{ErrorKind, TraceError};
pub use event::{Access, Event, KernelInfo, Kind, Op, Space};
pub use read::{Chunk, Reader};
pub use write::{Config, Writer};

use serde::{Deserialize, Serialize};

/// The file's first bytes.
pub const MAGIC: &[u8; 8] = b"GPUSANTR";
/// The format's version; a reader refuses others.
pub const VERSION: u32 = 1;
/// Most events a chunk holds (what bounds a reader's memory).
pub const MAX_CHUNK_EVENTS: u32 = 1 << 20;
/// Most bytes a chunk's columns take once decompressed.
pub const MAX_RAW_BYTES: u32 = 64 << 20;
/// Most bytes of the header's metadata.
pub const MAX_META_BYTES: u32 = 1 << 20;

/// What the trace is of: written once, at its start, as JSON.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Meta {
    /// The program traced, as it was run.
    #[serde(default)]
    pub program: String,
    /// The GPU, in the driver's words.
    #[serde(default)]
    pub device: String,
    /// Its streaming multiprocessors.
    #[serde(default)]
    pub sms: u32,
    /// One warp in this many was traced (1: every warp).
    #[serde(default = "one")]
    pub sample_warps: u32,
    /// Which launches' accesses were traced, as `gpusan trace --sample-launches` took them
    /// (`FIRST:EVERY`: each kernel's first FIRST, then one in EVERY); empty: every launch.
    /// Only those launches are in the trace; allocations and frees all are.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub sample_launches: String,
    /// What made the trace (`gpusan trace`, a synthetic generator, a test).
    #[serde(default)]
    pub source: String,
}

fn one() -> u32 {
    1
}
