//! Reading a trace chunk by chunk: a reader holds one chunk's bytes and events, whatever the
//! trace's length, and stops at the first damage with the byte and chunk where it is.

use std::io::{ErrorKind as IoKind, Read};

use crate::columns;
use crate::error::{ErrorKind, TraceError};
use crate::event::{Event, KernelInfo};
use crate::{Meta, MAGIC, MAX_CHUNK_EVENTS, MAX_META_BYTES, MAX_RAW_BYTES, VERSION};

/// One chunk's events, in trace order, and the kernels launched in it.
#[derive(Clone, Debug, Default)]
pub struct Chunk {
    /// Its number in the trace, from 0.
    pub index: u32,
    pub events: Vec<Event>,
    /// The [`crate::Kind::KernelBegin`] events' kernels, in their order.
    pub kernels: Vec<KernelInfo>,
}

/// A trace being read from `R` (give it a buffered reader).
pub struct Reader<R: Read> {
    input: R,
    offset: u64,
    meta: Meta,
    chunks: u32,
    events: u64,
    ended: bool,
    packed: Vec<u8>,
    raw: Vec<u8>,
}

impl<R: Read> Reader<R> {
    /// Reads the header.
    pub fn new(input: R) -> Result<Reader<R>, TraceError> {
        let mut r = Reader {
            input,
            offset: 0,
            meta: Meta::default(),
            chunks: 0,
            events: 0,
            ended: false,
            packed: Vec::new(),
            raw: Vec::new(),
        };
        let mut head = [0u8; 16];
        r.exact(&mut head, "in its header")?;
        if &head[..8] != MAGIC {
            return Err(r.error_at(0, ErrorKind::NotATrace));
        }
        let version = u32::from_le_bytes([head[8], head[9], head[10], head[11]]);
        if version != VERSION {
            return Err(r.error_at(8, ErrorKind::Version(version)));
        }
        let len = u32::from_le_bytes([head[12], head[13], head[14], head[15]]);
        if len > MAX_META_BYTES {
            return Err(r.error_at(12, ErrorKind::Limit(format!("metadata of {len} bytes (at most {MAX_META_BYTES})"))));
        }
        let mut json = vec![0u8; len as usize];
        r.exact(&mut json, "in its metadata")?;
        r.meta = serde_json::from_slice(&json).map_err(|e| r.error_at(16, ErrorKind::Meta(e.to_string())))?;
        Ok(r)
    }

    pub fn meta(&self) -> &Meta {
        &self.meta
    }

    /// Events read so far.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// Reads the next chunk into `chunk`: `Ok(true)`, or `Ok(false)` after the end record
    /// (checked against what was read, and nothing after it).
    pub fn next_chunk(&mut self, chunk: &mut Chunk) -> Result<bool, TraceError> {
        if self.ended {
            return Ok(false);
        }
        let start = self.offset;
        let mut marker = [0u8; 4];
        let got = self.fill(&mut marker)?;
        if got == 0 {
            return Err(self.error_at(
                start,
                ErrorKind::Truncated("after its last whole chunk: there is no end record (its writer did not finish)"),
            ));
        }
        if got < 4 {
            return Err(self.error_at(start, ErrorKind::Truncated("inside a chunk's marker")));
        }
        match &marker {
            b"END!" => return self.end(start).map(|()| false),
            b"CHNK" => {}
            _ => return Err(self.error_at(start, ErrorKind::BadMarker(marker))),
        }
        let index = self.chunks;
        let mut head = [0u8; 16];
        self.exact(&mut head, "inside a chunk's header").map_err(|e| in_chunk(e, index))?;
        let word = |i: usize| u32::from_le_bytes([head[i], head[i + 1], head[i + 2], head[i + 3]]);
        let (events, raw_len, packed_len, crc) = (word(0), word(4), word(8), word(12));
        let limit = |what: String| self_error(start, index, ErrorKind::Limit(what));
        if events == 0 || events > MAX_CHUNK_EVENTS {
            return Err(limit(format!("a chunk of {events} events (1 to {MAX_CHUNK_EVENTS})")));
        }
        if raw_len > MAX_RAW_BYTES {
            return Err(limit(format!("a chunk of {raw_len} bytes decompressed (at most {MAX_RAW_BYTES})")));
        }
        // LZ4 expands incompressible bytes by at most a little over 1/255.
        if u64::from(packed_len) > u64::from(raw_len) + u64::from(raw_len) / 128 + 64 {
            return Err(limit(format!("{packed_len} compressed bytes for {raw_len} decompressed")));
        }
        let payload_at = self.offset;
        self.packed.resize(packed_len as usize, 0);
        let mut packed = std::mem::take(&mut self.packed);
        let read = self.exact(&mut packed, "inside a chunk's payload").map_err(|e| in_chunk(e, index));
        self.packed = packed;
        read?;
        let found = crc32fast::hash(&self.packed);
        if found != crc {
            return Err(self_error(payload_at, index, ErrorKind::Crc { expected: crc, found }));
        }
        self.raw.resize(raw_len as usize, 0);
        match lz4_flex::block::decompress_into(&self.packed, &mut self.raw) {
            Ok(n) if n == raw_len as usize => {}
            Ok(n) => {
                return Err(self_error(
                    payload_at,
                    index,
                    ErrorKind::Decompress(format!("{n} bytes, its header says {raw_len}")),
                ))
            }
            Err(e) => return Err(self_error(payload_at, index, ErrorKind::Decompress(e.to_string()))),
        }
        columns::decode(&self.raw, events, &mut chunk.events, &mut chunk.kernels).map_err(|b| {
            self_error(payload_at, index, ErrorKind::Column { column: b.column, event: b.event, what: b.what })
        })?;
        chunk.index = index;
        self.chunks += 1;
        self.events += u64::from(events);
        Ok(true)
    }

    /// Every event, chunk by chunk, into `f`; stops at the end or the first damage.
    pub fn for_each(&mut self, mut f: impl FnMut(&Chunk)) -> Result<(), TraceError> {
        let mut chunk = Chunk::default();
        while self.next_chunk(&mut chunk)? {
            f(&chunk);
        }
        Ok(())
    }

    fn end(&mut self, start: u64) -> Result<(), TraceError> {
        let mut tail = [0u8; 12];
        self.exact(&mut tail, "inside its end record")?;
        let said_events = u64::from_le_bytes(tail[..8].try_into().unwrap_or_default());
        let said_chunks = u32::from_le_bytes(tail[8..].try_into().unwrap_or_default());
        if said_events != self.events {
            return Err(
                self.error_at(start, ErrorKind::Count { what: "events", said: said_events, found: self.events })
            );
        }
        if said_chunks != self.chunks {
            let kind = ErrorKind::Count { what: "chunks", said: u64::from(said_chunks), found: u64::from(self.chunks) };
            return Err(self.error_at(start, kind));
        }
        let mut one = [0u8; 1];
        if self.fill(&mut one)? > 0 {
            return Err(self.error_at(self.offset - 1, ErrorKind::TrailingBytes));
        }
        self.ended = true;
        Ok(())
    }

    /// Reads as much of `buf` as there is: its length, or fewer at the end of the input.
    fn fill(&mut self, buf: &mut [u8]) -> Result<usize, TraceError> {
        let mut got = 0;
        while got < buf.len() {
            match self.input.read(&mut buf[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == IoKind::Interrupted => {}
                Err(e) => return Err(self.error_at(self.offset + got as u64, ErrorKind::Io(e))),
            }
        }
        self.offset += got as u64;
        Ok(got)
    }

    fn exact(&mut self, buf: &mut [u8], place: &'static str) -> Result<(), TraceError> {
        let at = self.offset;
        let got = self.fill(buf)?;
        if got < buf.len() {
            return Err(self.error_at(at + got as u64, ErrorKind::Truncated(place)));
        }
        Ok(())
    }

    fn error_at(&self, offset: u64, kind: ErrorKind) -> TraceError {
        TraceError { offset, chunk: None, kind }
    }
}

fn self_error(offset: u64, chunk: u32, kind: ErrorKind) -> TraceError {
    TraceError { offset, chunk: Some(chunk), kind }
}

fn in_chunk(mut e: TraceError, chunk: u32) -> TraceError {
    e.chunk = Some(chunk);
    e
}
