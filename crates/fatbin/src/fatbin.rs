//! Fatbin containers and their entries, as nvcc 13's `fatbinary` writes them.
//!
//! All little-endian. A container is a 16-byte header followed by entries, each a header and
//! its payload; several containers may follow one another (zero padding between them is
//! skipped). Offsets in brackets are from the start of the header.
//!
//! ```text
//! container header (16 bytes)
//!   [0x00] u32 magic 0xBA55ED50   [0x04] u16 version (1)   [0x06] u16 header size (0x10)
//!   [0x08] u64 size of the entries that follow the header
//! entry header (0x40 bytes, more when it carries strings)
//!   [0x00] u16 kind: 1 PTX, 2 ELF (cubin)       [0x02] u16 format version (0x0101)
//!   [0x04] u32 header size                      [0x08] u64 payload size, padded to 8
//!   [0x10] u32 compressed size (0: stored)      [0x14] u32 offset of the options record (0: none)
//!   [0x18] u16 code version minor, [0x1a] major [0x1c] u32 SM architecture (90 for sm_90)
//!   [0x20] u32 identifier offset, [0x24] length [0x28] u64 flags (see `Flags`)
//!   [0x30] u64 unused (0)                       [0x38] u64 uncompressed size (0: stored)
//!   options record: u32 offset of the string, u32 its length; offsets from the entry header
//! ```

use std::borrow::Cow;
use std::fmt;

use crate::decompress;
use crate::Error;

pub const FATBIN_MAGIC: u32 = 0xBA55_ED50;
/// A stated uncompressed size above this is refused before anything is allocated.
pub const MAX_DECOMPRESSED_SIZE: u64 = 1 << 30;

const CONTAINER_HEADER_SIZE: usize = 16;
const ENTRY_HEADER_SIZE: usize = 0x40;

/// One fatbin container.
#[derive(Debug, Clone)]
pub struct Fatbin<'a> {
    /// Where its header is in the parsed input.
    pub offset: u64,
    pub version: u16,
    pub header_size: u16,
    /// The whole container: header and entries.
    pub data: &'a [u8],
    pub entries: Vec<Entry<'a>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EntryKind {
    Ptx,
    /// A cubin: device code for one SM architecture.
    Elf,
    Other(u16),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Compression {
    None,
    /// A raw LZ4 block, no frame (`--compress-mode=speed`).
    Lz4,
    /// One ZSTD frame (nvcc 13's default for PTX, and for everything with `-compress-all`).
    Zstd,
    /// Compression flag bits this crate cannot decode (e.g. the pre-LZ4 0x1000 scheme).
    Unknown(u64),
}

/// The entry header's flag word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Flags(pub u64);

impl Flags {
    pub const ADDRESS_64: Flags = Flags(0x1);
    pub const DEBUG: Flags = Flags(0x2);
    pub const LINUX: Flags = Flags(0x10);
    pub const MAC: Flags = Flags(0x20);
    pub const WINDOWS: Flags = Flags(0x40);
    /// Compression of old toolkits; not decoded.
    pub const COMPRESSED_LEGACY: Flags = Flags(0x1000);
    pub const COMPRESSED_LZ4: Flags = Flags(0x2000);
    pub const COMPRESSED_ZSTD: Flags = Flags(0x8000);
    /// Architecture-specific code: `sm_90a`.
    pub const ARCH_SPECIFIC: Flags = Flags(0x10_0000);
    /// Family-specific code: `sm_120f`.
    pub const FAMILY_SPECIFIC: Flags = Flags(0x20_0000);

    const COMPRESSION_MASK: u64 = Self::COMPRESSED_LEGACY.0 | Self::COMPRESSED_LZ4.0 | Self::COMPRESSED_ZSTD.0;

    pub fn contains(self, other: Flags) -> bool {
        self.0 & other.0 == other.0
    }

    pub fn compression(self) -> Compression {
        match self.0 & Self::COMPRESSION_MASK {
            0 => Compression::None,
            bits if bits == Self::COMPRESSED_LZ4.0 => Compression::Lz4,
            bits if bits == Self::COMPRESSED_ZSTD.0 => Compression::Zstd,
            bits => Compression::Unknown(bits),
        }
    }
}

/// One entry of a fatbin: a PTX module or a cubin.
#[derive(Debug, Clone)]
pub struct Entry<'a> {
    /// Position in its fatbin, from 0.
    pub index: usize,
    /// Where its header is in the parsed input.
    pub offset: u64,
    pub kind: EntryKind,
    pub header_size: u32,
    /// (major, minor): the PTX ISA version for PTX (9.0), the cubin format version for ELF (1.8).
    pub code_version: (u16, u16),
    /// The SM architecture: 90 for sm_90 and compute_90.
    pub arch: u32,
    pub flags: Flags,
    pub compression: Compression,
    /// The source's name, when the fatbin was made with `fatbinary --ident`.
    pub identifier: Option<&'a [u8]>,
    /// For PTX, the ptxas options the JIT should use (`fatbinary --cmdline`). sm_100+ cubins
    /// carry binary data here that cuobjdump does not show.
    pub options: Option<&'a [u8]>,
    /// 0 when stored uncompressed.
    pub compressed_size: u32,
    /// 0 when stored uncompressed.
    pub uncompressed_size: u64,
    /// As stored: the compressed bytes, or the padded payload.
    pub payload: &'a [u8],
}

/// Parses every fatbin container in `data` (a `.nv_fatbin` section, a `.fatbin` file).
pub fn parse(data: &[u8]) -> Result<Vec<Fatbin<'_>>, Error> {
    let fatbins = parse_all(data, 0)?;
    if fatbins.is_empty() {
        return Err(Error::new("fatbin", 0, format!("no fatbin in {:#x} bytes (empty or all zeros)", data.len())));
    }
    Ok(fatbins)
}

/// Parses the containers of `data`, reporting offsets as `base` plus the position in `data`.
pub(crate) fn parse_all(data: &[u8], base: u64) -> Result<Vec<Fatbin<'_>>, Error> {
    let mut fatbins = Vec::new();
    let mut at = 0;
    while let Some(skip) = data[at..].iter().position(|&b| b != 0) {
        at += skip;
        let fatbin = Fatbin::parse_at(data, at, base)?;
        at += fatbin.data.len();
        fatbins.push(fatbin);
    }
    Ok(fatbins)
}

/// The total size (header included) a container header claims, after checking the header.
pub(crate) fn container_size(header: &[u8; CONTAINER_HEADER_SIZE], offset: u64) -> Result<u64, Error> {
    let err = |what: String| Error::new("fatbin header", offset, what);
    let magic = u32::from_le_bytes([header[0], header[1], header[2], header[3]]);
    if magic != FATBIN_MAGIC {
        return Err(err(format!("magic {magic:#010x}, expected {FATBIN_MAGIC:#010x}")));
    }
    let header_size = u16::from_le_bytes([header[6], header[7]]);
    if usize::from(header_size) < CONTAINER_HEADER_SIZE {
        return Err(err(format!("header size {header_size:#x} is below {CONTAINER_HEADER_SIZE:#x}")));
    }
    let entries_size = u64_at(header, 8);
    u64::from(header_size).checked_add(entries_size).ok_or_else(|| err(format!("size {entries_size:#x} overflows")))
}

impl<'a> Fatbin<'a> {
    /// Parses the one container at the start of `data`; bytes after it are ignored
    /// (`size()` says how many it took).
    pub fn parse(data: &'a [u8]) -> Result<Fatbin<'a>, Error> {
        Fatbin::parse_at(data, 0, 0)
    }

    pub fn size(&self) -> usize {
        self.data.len()
    }

    fn parse_at(data: &'a [u8], at: usize, base: u64) -> Result<Fatbin<'a>, Error> {
        let offset = base + at as u64;
        let rest = &data[at..];
        let header: &[u8; CONTAINER_HEADER_SIZE] = rest
            .get(..CONTAINER_HEADER_SIZE)
            .and_then(|h| h.try_into().ok())
            .ok_or_else(|| Error::new("fatbin header", offset, format!("needs 16 bytes, {:#x} left", rest.len())))?;
        let size = container_size(header, offset)?;
        let data = match usize::try_from(size).ok().and_then(|size| rest.get(..size)) {
            Some(data) => data,
            None => {
                let what = format!("size {size:#x} runs past the end of the input ({:#x} bytes left)", rest.len());
                return Err(Error::new("fatbin header", offset, what));
            }
        };
        let header_size = u16::from_le_bytes([header[6], header[7]]);
        let mut entries = Vec::new();
        let mut next = usize::from(header_size);
        while next < data.len() {
            let (entry, end) = Entry::parse(data, next, entries.len(), offset)?;
            entries.push(entry);
            next = end;
        }
        Ok(Fatbin { offset, version: u16::from_le_bytes([header[4], header[5]]), header_size, data, entries })
    }
}

impl<'a> Entry<'a> {
    /// Parses the entry at `at` in `fatbin`; returns it and where the next one starts.
    fn parse(fatbin: &'a [u8], at: usize, index: usize, base: u64) -> Result<(Entry<'a>, usize), Error> {
        let offset = base + at as u64;
        let err = |what: String| Error::new(format!("fatbin entry {index}"), offset, what);
        let rest = &fatbin[at..];
        let fatbin_size = fatbin.len();
        let h: &[u8; ENTRY_HEADER_SIZE] =
            rest.get(..ENTRY_HEADER_SIZE).and_then(|h| h.try_into().ok()).ok_or_else(|| {
                err(format!(
                    "header needs {ENTRY_HEADER_SIZE:#x} bytes, the fatbin (size {fatbin_size:#x}) has {:#x} left",
                    rest.len()
                ))
            })?;
        let header_size = u32_at(h, 0x04);
        let payload_size = u64_at(h, 0x08);
        let header = match usize::try_from(header_size).ok().and_then(|n| rest.get(..n)) {
            Some(header) if header.len() >= ENTRY_HEADER_SIZE => header,
            Some(_) => return Err(err(format!("header size {header_size:#x} is below {ENTRY_HEADER_SIZE:#x}"))),
            None => {
                return Err(err(format!(
                    "header size {header_size:#x} runs past the end of the fatbin (size {fatbin_size:#x})"
                )))
            }
        };
        let stored = match usize::try_from(payload_size).ok().and_then(|n| rest[header.len()..].get(..n)) {
            Some(stored) => stored,
            None => {
                return Err(err(format!(
                    "payload size {payload_size:#x} runs past the end of the fatbin (size {fatbin_size:#x})"
                )))
            }
        };
        let flags = Flags(u64_at(h, 0x28));
        let compression = flags.compression();
        let compressed_size = u32_at(h, 0x10);
        let payload = if compression == Compression::None {
            stored
        } else {
            stored.get(..compressed_size as usize).ok_or_else(|| {
                err(format!(
                    "compressed size {compressed_size:#x} exceeds the stored payload ({payload_size:#x} bytes)"
                ))
            })?
        };
        let field = |what: &str, at: u32, len: u32| -> Result<&'a [u8], Error> {
            let range = (at as usize)..(at as usize).saturating_add(len as usize);
            header.get(range).ok_or_else(|| {
                err(format!("{what} at {at:#x}, {len:#x} bytes, lies outside the header ({header_size:#x} bytes)"))
            })
        };
        let identifier = match u32_at(h, 0x24) {
            0 => None,
            len => Some(trim_nuls(field("identifier", u32_at(h, 0x20), len)?)),
        };
        let options = match u32_at(h, 0x14) {
            0 => None,
            record => {
                let record: &[u8; 8] = field("options record", record, 8)?.try_into().unwrap_or(&[0; 8]);
                Some(trim_nuls(field("options", u32_at(record, 0), u32_at(record, 4))?))
            }
        };
        let entry = Entry {
            index,
            offset,
            kind: match u16::from_le_bytes([h[0], h[1]]) {
                1 => EntryKind::Ptx,
                2 => EntryKind::Elf,
                other => EntryKind::Other(other),
            },
            header_size,
            code_version: (u16::from_le_bytes([h[0x1a], h[0x1b]]), u16::from_le_bytes([h[0x18], h[0x19]])),
            arch: u32_at(h, 0x1c),
            flags,
            compression,
            identifier,
            options,
            compressed_size,
            uncompressed_size: u64_at(h, 0x38),
            payload,
        };
        Ok((entry, at + header.len() + stored.len()))
    }

    /// The payload, decompressed. At most [`MAX_DECOMPRESSED_SIZE`] bytes are allocated, and
    /// never more than the header states.
    pub fn contents(&self) -> Result<Cow<'a, [u8]>, Error> {
        let err = |what: String| Error::new(format!("fatbin entry {}", self.index), self.offset, what);
        let size = self.uncompressed_size;
        let decode = match self.compression {
            Compression::None => return Ok(Cow::Borrowed(self.payload)),
            Compression::Unknown(bits) => return Err(err(format!("unsupported compression (flag bits {bits:#x})"))),
            _ if size > MAX_DECOMPRESSED_SIZE => {
                return Err(err(format!("uncompressed size {size:#x} is over the limit of {MAX_DECOMPRESSED_SIZE:#x}")))
            }
            Compression::Lz4 => decompress::lz4,
            Compression::Zstd => decompress::zstd,
        };
        decode(self.payload, size as usize).map(Cow::Owned).map_err(err)
    }

    /// A PTX entry's text, without the NULs that pad it.
    pub fn ptx_text(&self) -> Result<Cow<'a, str>, Error> {
        let err = |what: String| Error::new(format!("fatbin entry {}", self.index), self.offset, what);
        if self.kind != EntryKind::Ptx {
            return Err(err(format!("is {}, not PTX", self.kind)));
        }
        let not_utf8 = |e: std::str::Utf8Error| err(format!("PTX text is not UTF-8 at byte {:#x}", e.valid_up_to()));
        match self.contents()? {
            Cow::Borrowed(bytes) => std::str::from_utf8(trim_nuls(bytes)).map(Cow::Borrowed).map_err(not_utf8),
            Cow::Owned(mut bytes) => {
                bytes.truncate(trim_nuls(&bytes).len());
                String::from_utf8(bytes).map(Cow::Owned).map_err(|e| not_utf8(e.utf8_error()))
            }
        }
    }

    /// `sm_90`, `sm_90a`, `sm_120f`.
    pub fn arch_name(&self) -> String {
        let suffix = if self.flags.contains(Flags::ARCH_SPECIFIC) {
            "a"
        } else if self.flags.contains(Flags::FAMILY_SPECIFIC) {
            "f"
        } else {
            ""
        };
        format!("sm_{}{suffix}", self.arch)
    }
}

/// Lists the ELF and PTX entries as `cuobjdump -lelf -lptx <name>` does: numbered in order,
/// named `<name>.<n>.sm_<arch>.cubin`, or after the identifier when the entry has one.
pub fn summary<'a, 'b: 'a>(fatbins: impl IntoIterator<Item = &'a Fatbin<'b>>, name: &str) -> String {
    let (mut elf, mut ptx) = (0, 0);
    let mut out = String::new();
    for entry in fatbins.into_iter().flat_map(|f| &f.entries) {
        let (label, n, extension) = match entry.kind {
            EntryKind::Elf => ("ELF", &mut elf, "cubin"),
            EntryKind::Ptx => ("PTX", &mut ptx, "ptx"),
            EntryKind::Other(_) => continue,
        };
        *n += 1;
        let stem = match entry.identifier {
            // cuobjdump drops the identifier's folders and extension, and the number.
            Some(ident) => {
                let ident = String::from_utf8_lossy(ident);
                let file = ident.rsplit('/').next().unwrap_or_default();
                file.rsplit_once('.').map_or(file, |(stem, _)| stem).to_string()
            }
            None => format!("{name}.{n}"),
        };
        // cuobjdump shows the `a` of sm_90a in file names, not the `f` of sm_120f.
        let a = if entry.flags.contains(Flags::ARCH_SPECIFIC) { "a" } else { "" };
        out += &format!("{label} file {n:>4}: {stem}.sm_{}{a}.{extension}\n", entry.arch);
    }
    out
}

impl fmt::Display for EntryKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EntryKind::Ptx => f.write_str("PTX"),
            EntryKind::Elf => f.write_str("ELF"),
            EntryKind::Other(kind) => write!(f, "kind {kind:#x}"),
        }
    }
}

impl fmt::Display for Fatbin<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.entries.len();
        writeln!(
            f,
            "fatbin at byte {:#x}: version {}, {n} entries, {:#x} bytes",
            self.offset,
            self.version,
            self.size()
        )?;
        self.entries.iter().try_for_each(|entry| writeln!(f, "  {entry}"))
    }
}

impl fmt::Display for Entry<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (major, minor) = self.code_version;
        write!(
            f,
            "entry {} at byte {:#x}: {} {}, code version {major}.{minor}",
            self.index,
            self.offset,
            self.kind,
            self.arch_name()
        )?;
        for (flag, name) in [
            (Flags::ADDRESS_64, "64-bit"),
            (Flags::DEBUG, "debug"),
            (Flags::LINUX, "linux"),
            (Flags::MAC, "mac"),
            (Flags::WINDOWS, "windows"),
        ] {
            if self.flags.contains(flag) {
                write!(f, ", {name}")?;
            }
        }
        match self.compression {
            Compression::None => write!(f, ", {:#x} bytes", self.payload.len())?,
            c => write!(f, ", {c:?} {:#x} -> {:#x} bytes", self.payload.len(), self.uncompressed_size)?,
        }
        if let Some(ident) = self.identifier {
            write!(f, ", identifier {:?}", String::from_utf8_lossy(ident))?;
        }
        if let (EntryKind::Ptx, Some(options)) = (self.kind, self.options) {
            write!(f, ", ptxas options {:?}", String::from_utf8_lossy(options))?;
        }
        Ok(())
    }
}

fn trim_nuls(bytes: &[u8]) -> &[u8] {
    let end = bytes.iter().rposition(|&b| b != 0).map_or(0, |last| last + 1);
    &bytes[..end]
}

fn u32_at<const N: usize>(bytes: &[u8; N], at: usize) -> u32 {
    u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

fn u64_at<const N: usize>(bytes: &[u8; N], at: usize) -> u64 {
    u64::from(u32_at(bytes, at)) | u64::from(u32_at(bytes, at + 4)) << 32
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An entry as fatbinary lays it out; `strings` go after the 0x40 fixed bytes.
    fn entry(kind: u16, flags: u64, payload: &[u8], strings: &[u8]) -> Vec<u8> {
        let header_size = (ENTRY_HEADER_SIZE + strings.len()) as u32;
        let padded = payload.len().next_multiple_of(8);
        let mut e = vec![0; ENTRY_HEADER_SIZE];
        e[0..2].copy_from_slice(&kind.to_le_bytes());
        e[2..4].copy_from_slice(&0x0101u16.to_le_bytes());
        e[4..8].copy_from_slice(&header_size.to_le_bytes());
        e[8..16].copy_from_slice(&(padded as u64).to_le_bytes());
        e[0x1a..0x1c].copy_from_slice(&9u16.to_le_bytes());
        e[0x1c..0x20].copy_from_slice(&90u32.to_le_bytes());
        e[0x28..0x30].copy_from_slice(&flags.to_le_bytes());
        e.extend(strings);
        e.extend(payload);
        e.resize(header_size as usize + padded, 0);
        e
    }

    fn container(entries: &[Vec<u8>]) -> Vec<u8> {
        let body: Vec<u8> = entries.concat();
        let mut c = FATBIN_MAGIC.to_le_bytes().to_vec();
        c.extend(1u16.to_le_bytes());
        c.extend(16u16.to_le_bytes());
        c.extend((body.len() as u64).to_le_bytes());
        c.extend(body);
        c
    }

    fn set(bytes: &mut [u8], at: usize, value: &[u8]) {
        bytes[at..at + value.len()].copy_from_slice(value);
    }

    #[test]
    fn errors_say_which_entry_where_and_why() {
        let ptx = entry(1, 0x11, b".version 9.0\n", &[]);
        let mut data = container(&[ptx.clone(), ptx.clone(), ptx.clone(), ptx.clone()]);
        let entry3 = 16 + 3 * ptx.len();
        set(&mut data, entry3 + 8, &0xffff_0000u64.to_le_bytes());
        let err = parse(&data).unwrap_err();
        let expected = format!(
            "fatbin entry 3 at byte {entry3:#x}: payload size 0xffff0000 runs past the end of the fatbin (size {:#x})",
            data.len()
        );
        assert_eq!(err.to_string(), expected);

        set(&mut data, entry3 + 4, &0x20u32.to_le_bytes());
        assert_eq!(parse(&data).unwrap_err().what, "header size 0x20 is below 0x40");
        assert!(parse(&data[..data.len() - 1]).unwrap_err().to_string().starts_with("fatbin header at byte 0x0: size"));
    }

    #[test]
    fn containers_follow_each_other_across_zero_padding() {
        let one = container(&[entry(2, 0x11, b"\x7fELF", &[])]);
        let mut data = one.clone();
        data.extend([0; 8]);
        data.extend(&one);
        let fatbins = parse(&data).unwrap();
        assert_eq!(fatbins.iter().map(|f| f.offset).collect::<Vec<_>>(), [0, one.len() as u64 + 8]);
        assert_eq!(fatbins[1].entries[0].offset, one.len() as u64 + 8 + 16);

        data.extend(b"junk");
        let err = parse(&data).unwrap_err();
        assert_eq!((err.item.as_str(), err.offset), ("fatbin header", 2 * one.len() as u64 + 8));
        assert!(err.what.contains("needs 16 bytes"), "{err}");
    }

    #[test]
    fn identifier_and_options_come_from_the_header() {
        // Options record at 0x40 -> string at 0x48 (7 bytes); identifier at 0x50.
        let mut strings = vec![0; 0x20];
        set(&mut strings, 0, &0x48u32.to_le_bytes());
        set(&mut strings, 4, &7u32.to_le_bytes());
        set(&mut strings, 8, b"-O3 -v\0");
        set(&mut strings, 0x10, b"dir/kernels.cu\0\0");
        let mut e = entry(1, 0x11, b"x", &strings);
        set(&mut e, 0x14, &0x40u32.to_le_bytes());
        set(&mut e, 0x20, &0x50u32.to_le_bytes());
        set(&mut e, 0x24, &0x10u32.to_le_bytes());
        let data = container(&[e.clone()]);
        let fatbins = parse(&data).unwrap();
        let parsed = &fatbins[0].entries[0];
        assert_eq!((parsed.options, parsed.identifier), (Some(&b"-O3 -v"[..]), Some(&b"dir/kernels.cu"[..])));
        assert_eq!(summary(&fatbins, "ignored"), "PTX file    1: kernels.sm_90.ptx\n");

        set(&mut e, 0x24, &0x11u32.to_le_bytes());
        let err = parse(&container(&[e])).unwrap_err();
        assert_eq!(err.what, "identifier at 0x50, 0x11 bytes, lies outside the header (0x60 bytes)");
    }

    #[test]
    fn ptx_text_and_contents_refuse_what_they_cannot_give() {
        let elf = container(&[entry(2, 0x11, b"\x7fELF", &[]), entry(1, 0x11, b"ok\xff", &[])]);
        let fatbins = parse(&elf).unwrap();
        assert_eq!(fatbins[0].entries[0].ptx_text().unwrap_err().what, "is ELF, not PTX");
        assert_eq!(fatbins[0].entries[1].ptx_text().unwrap_err().what, "PTX text is not UTF-8 at byte 0x2");

        let mut legacy = entry(1, 0x1011, b"data", &[]);
        set(&mut legacy, 0x10, &4u32.to_le_bytes());
        let data = container(&[legacy]);
        let fatbins = parse(&data).unwrap();
        assert_eq!(fatbins[0].entries[0].compression, Compression::Unknown(0x1000));
        assert_eq!(fatbins[0].entries[0].contents().unwrap_err().what, "unsupported compression (flag bits 0x1000)");
    }

    #[test]
    fn plain_ptx_loses_only_its_padding() {
        let data = container(&[entry(1, 0x11, b".version 9.0\n\0", &[])]);
        let fatbins = parse(&data).unwrap();
        assert_eq!(fatbins[0].entries[0].payload.len(), 16);
        assert_eq!(fatbins[0].entries[0].ptx_text().unwrap(), ".version 9.0\n");
    }
}
