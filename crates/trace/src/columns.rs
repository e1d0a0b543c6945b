//! A chunk's columns: each field of every event stored together, so that LZ4 finds the
//! repetition (the same kernel, SM and allocation, event after event) and an address is a
//! small delta from the one before. Integers are LEB128 varints; addresses are zigzag
//! deltas.

use crate::event::{Event, KernelInfo, Kind, Op};

/// The columns, in file order.
pub(crate) const COLUMNS: usize = 12;
pub(crate) const NAMES: [&str; COLUMNS] =
    ["kind", "kernel", "sm", "warp", "addr", "size", "op", "lanes", "alloc", "epoch", "count", "kernels"];

/// Columns being filled by a writer.
#[derive(Default)]
pub(crate) struct Builder {
    cols: [Vec<u8>; COLUMNS],
    last_addr: u64,
    pub(crate) events: u32,
}

pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    (v >> 1) as i64 ^ -((v & 1) as i64)
}

impl Builder {
    pub(crate) fn push(&mut self, e: &Event) {
        let c = &mut self.cols;
        c[0].push(e.kind as u8);
        put_varint(&mut c[1], u64::from(e.kernel));
        put_varint(&mut c[2], u64::from(e.sm));
        put_varint(&mut c[3], u64::from(e.warp));
        put_varint(&mut c[4], zigzag(e.addr.wrapping_sub(self.last_addr) as i64));
        self.last_addr = e.addr;
        put_varint(&mut c[5], e.size);
        c[6].push(e.op.0);
        c[7].push(e.lanes);
        put_varint(&mut c[8], u64::from(e.alloc));
        put_varint(&mut c[9], u64::from(e.epoch));
        put_varint(&mut c[10], e.count);
        self.events += 1;
    }

    /// A kernel's launch: its event, and its name and shape in the `kernels` column.
    pub(crate) fn push_kernel(&mut self, k: &KernelInfo) {
        self.push(&Event { kind: Kind::KernelBegin, kernel: k.kernel, ..Event::default() });
        let c = &mut self.cols[11];
        for v in k.grid.iter().chain(&k.block) {
            put_varint(c, u64::from(*v));
        }
        put_varint(c, k.name.len() as u64);
        c.extend_from_slice(k.name.as_bytes());
    }

    /// Bytes the columns take now.
    pub(crate) fn raw_len(&self) -> usize {
        self.cols.iter().map(|c| 4 + c.len()).sum()
    }

    /// The columns laid end to end, each after its length; the builder emptied.
    pub(crate) fn take(&mut self, out: &mut Vec<u8>) -> u32 {
        out.clear();
        for c in &mut self.cols {
            out.extend_from_slice(&(c.len() as u32).to_le_bytes());
            out.extend_from_slice(c);
            c.clear();
        }
        self.last_addr = 0;
        std::mem::take(&mut self.events)
    }
}

/// Where decoding a chunk's columns went wrong: the column and the event.
#[derive(Debug)]
pub(crate) struct Bad {
    pub column: &'static str,
    pub event: u32,
    pub what: &'static str,
}

struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
    column: &'static str,
}

impl<'a> Cursor<'a> {
    /// Most numbers of a trace fit one byte: they take no loop.
    #[inline]
    fn varint(&mut self, event: u32) -> Result<u64, Bad> {
        match self.bytes.get(self.at) {
            Some(&b) if b < 0x80 => {
                self.at += 1;
                Ok(u64::from(b))
            }
            _ => self.long_varint(event),
        }
    }

    #[cold]
    fn long_varint(&mut self, event: u32) -> Result<u64, Bad> {
        let mut v: u64 = 0;
        let mut shift = 0;
        loop {
            let Some(&b) = self.bytes.get(self.at) else {
                return Err(Bad { column: self.column, event, what: "ends before its events do" });
            };
            self.at += 1;
            if shift == 63 && b > 1 {
                return Err(Bad { column: self.column, event, what: "a number longer than 64 bits" });
            }
            v |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Ok(v);
            }
            shift += 7;
            if shift > 63 {
                return Err(Bad { column: self.column, event, what: "a number longer than 64 bits" });
            }
        }
    }

    #[inline]
    fn u32(&mut self, event: u32) -> Result<u32, Bad> {
        let v = self.varint(event)?;
        u32::try_from(v).map_err(|_| Bad { column: self.column, event, what: "a number past 32 bits" })
    }

    #[inline]
    fn byte(&mut self, event: u32) -> Result<u8, Bad> {
        let b = self.bytes.get(self.at).copied();
        self.at += 1;
        b.ok_or(Bad { column: self.column, event, what: "ends before its events do" })
    }

    fn done(&self, events: u32) -> Result<(), Bad> {
        if self.at == self.bytes.len() {
            Ok(())
        } else {
            Err(Bad { column: self.column, event: events, what: "has bytes past its last event" })
        }
    }
}

/// Decodes `events` events from `raw` (the decompressed columns) into `out` and `kernels`
/// (both emptied first).
pub(crate) fn decode(raw: &[u8], events: u32, out: &mut Vec<Event>, kernels: &mut Vec<KernelInfo>) -> Result<(), Bad> {
    out.clear();
    kernels.clear();
    let mut cursors: Vec<Cursor> = Vec::with_capacity(COLUMNS);
    let mut at = 0usize;
    for name in NAMES {
        let len = raw.get(at..at + 4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize).ok_or(Bad {
            column: name,
            event: 0,
            what: "its length is cut off",
        })?;
        at += 4;
        let bytes = raw.get(at..at + len).ok_or(Bad { column: name, event: 0, what: "runs past the chunk" })?;
        at += len;
        cursors.push(Cursor { bytes, at: 0, column: name });
    }
    if at != raw.len() {
        return Err(Bad { column: "kernels", event: events, what: "the chunk has bytes past its last column" });
    }
    out.reserve(events as usize);
    let mut addr: u64 = 0;
    for i in 0..events {
        let kind_byte = cursors[0].byte(i)?;
        let kind = Kind::from_u8(kind_byte).ok_or(Bad { column: "kind", event: i, what: "an unknown kind" })?;
        let kernel = cursors[1].u32(i)?;
        let sm = cursors[2].u32(i)?;
        let warp = cursors[3].u32(i)?;
        addr = addr.wrapping_add(unzigzag(cursors[4].varint(i)?) as u64);
        let size = cursors[5].varint(i)?;
        let op = Op(cursors[6].byte(i)?);
        let lanes = cursors[7].byte(i)?;
        let alloc = cursors[8].u32(i)?;
        let epoch = cursors[9].u32(i)?;
        let count = cursors[10].varint(i)?;
        if kind == Kind::KernelBegin {
            let c = &mut cursors[11];
            let mut dims = [0u32; 6];
            for d in &mut dims {
                *d = c.u32(i)?;
            }
            let len = c.varint(i)? as usize;
            let name = c.bytes.get(c.at..c.at.saturating_add(len)).ok_or(Bad {
                column: "kernels",
                event: i,
                what: "a kernel name runs past the column",
            })?;
            c.at += len;
            let name = String::from_utf8_lossy(name).into_owned();
            kernels.push(KernelInfo {
                kernel,
                name,
                grid: [dims[0], dims[1], dims[2]],
                block: [dims[3], dims[4], dims[5]],
            });
        }
        out.push(Event { kind, kernel, sm, warp, addr, size, op, lanes, alloc, epoch, count });
    }
    for c in &cursors {
        c.done(events)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_zigzag_round_trip_at_their_edges() {
        for v in [0u64, 1, 127, 128, 16_383, 16_384, u64::from(u32::MAX), u64::MAX] {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            let mut c = Cursor { bytes: &b, at: 0, column: "t" };
            assert_eq!(c.varint(0).unwrap(), v);
            assert!(c.done(1).is_ok());
        }
        for v in [0i64, -1, 1, i64::MIN, i64::MAX] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
    }

    #[test]
    fn an_overlong_varint_is_refused() {
        let b = [0xffu8; 11];
        let mut c = Cursor { bytes: &b, at: 0, column: "t" };
        assert_eq!(c.varint(3).unwrap_err().what, "a number longer than 64 bits");
    }
}
