//! Writing a trace as events come: one chunk is held, compressed and written when full.

use std::io::Write;

use crate::columns::Builder;
use crate::event::{Event, KernelInfo};
use crate::{Meta, MAGIC, MAX_CHUNK_EVENTS, MAX_RAW_BYTES, VERSION};

/// How a writer cuts its chunks.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// Events per chunk (at most [`MAX_CHUNK_EVENTS`]): what a writer and a reader hold.
    pub chunk_events: u32,
}

impl Default for Config {
    fn default() -> Self {
        Config { chunk_events: 1 << 16 }
    }
}

/// A trace being written to `W`. [`Writer::finish`] writes the end record; a writer
/// dropped without it leaves a trace a reader reports cut off (after all its whole chunks),
/// as a traced program that crashed does.
pub struct Writer<W: Write> {
    out: W,
    config: Config,
    columns: Builder,
    raw: Vec<u8>,
    events: u64,
    chunks: u32,
}

impl<W: Write> Writer<W> {
    pub fn new(mut out: W, meta: &Meta, config: Config) -> std::io::Result<Writer<W>> {
        let json = serde_json::to_vec(meta).map_err(std::io::Error::other)?;
        out.write_all(MAGIC)?;
        out.write_all(&VERSION.to_le_bytes())?;
        out.write_all(&(json.len() as u32).to_le_bytes())?;
        out.write_all(&json)?;
        let config = Config { chunk_events: config.chunk_events.clamp(1, MAX_CHUNK_EVENTS) };
        Ok(Writer { out, config, columns: Builder::default(), raw: Vec::new(), events: 0, chunks: 0 })
    }

    pub fn push(&mut self, e: &Event) -> std::io::Result<()> {
        self.columns.push(e);
        self.after_push()
    }

    /// A kernel launched (its [`crate::Kind::KernelBegin`] event).
    pub fn kernel_begin(&mut self, k: &KernelInfo) -> std::io::Result<()> {
        self.columns.push_kernel(k);
        self.after_push()
    }

    fn after_push(&mut self) -> std::io::Result<()> {
        self.events += 1;
        // A chunk is cut before its columns could outgrow what a reader accepts (long
        // kernel names).
        if self.columns.events >= self.config.chunk_events || self.columns.raw_len() > (MAX_RAW_BYTES / 2) as usize {
            self.flush_chunk()?;
        }
        Ok(())
    }

    fn flush_chunk(&mut self) -> std::io::Result<()> {
        if self.columns.events == 0 {
            return Ok(());
        }
        let events = self.columns.take(&mut self.raw);
        let packed = lz4_flex::block::compress(&self.raw);
        let crc = crc32fast::hash(&packed);
        self.out.write_all(b"CHNK")?;
        for v in [events, self.raw.len() as u32, packed.len() as u32, crc] {
            self.out.write_all(&v.to_le_bytes())?;
        }
        self.out.write_all(&packed)?;
        self.chunks += 1;
        Ok(())
    }

    /// Writes the last chunk and the end record; the output.
    pub fn finish(mut self) -> std::io::Result<W> {
        self.flush_chunk()?;
        self.out.write_all(b"END!")?;
        self.out.write_all(&self.events.to_le_bytes())?;
        self.out.write_all(&self.chunks.to_le_bytes())?;
        self.out.flush()?;
        Ok(self.out)
    }

    /// Events pushed so far.
    pub fn events(&self) -> u64 {
        self.events
    }
}
