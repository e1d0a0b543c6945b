//! What a reader found wrong with a trace, and where.

use thiserror::Error;

/// A trace that cannot be read past a point: the byte where the damage is, the chunk (its
/// number from 0) if inside one, and what is wrong. Every chunk before it was read whole.
#[derive(Debug, Error)]
#[error("trace byte {offset}{}: {kind}", chunk.map(|c| format!(" (chunk {c})")).unwrap_or_default())]
pub struct TraceError {
    pub offset: u64,
    pub chunk: Option<u32>,
    pub kind: ErrorKind,
}

#[derive(Debug, Error)]
pub enum ErrorKind {
    #[error("not a gpusan trace (it does not start with GPUSANTR)")]
    NotATrace,
    #[error("version {0} of the format; this gpusan reads version {}", crate::VERSION)]
    Version(u32),
    #[error("the metadata is not valid: {0}")]
    Meta(String),
    #[error("the trace is cut off {0}")]
    Truncated(&'static str),
    #[error("expected a chunk or the end record, found {0:02x?}")]
    BadMarker([u8; 4]),
    #[error("{0}")]
    Limit(String),
    #[error("the chunk's CRC is {found:#010x}, its header says {expected:#010x}: its bytes were changed")]
    Crc { expected: u32, found: u32 },
    #[error("the chunk does not decompress: {0}")]
    Decompress(String),
    #[error("column `{column}`, event {event}: {what}")]
    Column { column: &'static str, event: u32, what: &'static str },
    #[error("the end record counts {said} {what}, the trace holds {found}")]
    Count { what: &'static str, said: u64, found: u64 },
    #[error("bytes after the end record")]
    TrailingBytes,
    #[error("reading the trace: {0}")]
    Io(#[from] std::io::Error),
}
