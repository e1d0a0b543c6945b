//! Where fatbins live on the host side: sections of ELF executables, shared libraries and
//! objects, and the memory a running program hands to the CUDA runtime and driver.
//!
//! nvcc puts each translation unit's fatbin in `.nv_fatbin` (`__nv_relfatbin` for
//! relocatable device code, `-rdc=true`) and, in `.nvFatBinSegment`, a wrapper per fatbin
//! that the generated code passes to `__cudaRegisterFatBinary`:
//!
//! ```text
//! wrapper (24 bytes, little-endian)
//!   [0x00] u32 magic 0x466243B1   [0x04] u32 version (1; 2 with a list of prelinked fatbins)
//!   [0x08] u64 address of the fatbin header   [0x10] u64 address of that list (or 0)
//! ```
//!
//! In objects the address is 0 plus a relocation against the section; in position-independent
//! files the linker writes it and a `R_*_RELATIVE` relocation, whose addend is used when the
//! stored value is 0.

use std::collections::HashMap;

use object::{Object, ObjectSection, ObjectSymbol, Relocation, RelocationTarget, SectionIndex};

use crate::fatbin::{self, container_size, Fatbin};
use crate::Error;

pub const WRAPPER_MAGIC: u32 = 0x4662_43B1;
/// The largest container [`from_wrapper_ptr`] accepts: more than any real one (the biggest
/// libraries split their code into thousands of containers), and little enough that a wrong
/// pointer is refused rather than turned into a slice over unmapped memory.
pub const MAX_FATBIN_SIZE: u64 = 1 << 32;

const WRAPPER_SIZE: usize = 24;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SectionKind {
    /// `.nv_fatbin`: linked device code.
    NvFatbin,
    /// `__nv_relfatbin`: relocatable device code, for nvlink.
    RelFatbin,
}

/// A fatbin found in a host ELF file; its offsets are file offsets.
#[derive(Debug, Clone)]
pub struct Embedded<'a> {
    pub section: SectionKind,
    /// Its virtual address (for objects: its offset in the section).
    pub address: u64,
    pub fatbin: Fatbin<'a>,
    section_index: SectionIndex,
    section_offset: u64,
}

/// A `__cudaRegisterFatBinary` wrapper found in `.nvFatBinSegment`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wrapper {
    /// File offset of the wrapper.
    pub offset: u64,
    pub version: u32,
    /// The fatbin address as stored (0 where a relocation supplies it).
    pub data: u64,
    /// The fatbin it points to, an index into [`HostElf::fatbins`].
    pub fatbin: Option<usize>,
}

/// The device code of a host ELF file.
#[derive(Debug, Clone, Default)]
pub struct HostElf<'a> {
    /// In file order: `.nv_fatbin` and `__nv_relfatbin` containers.
    pub fatbins: Vec<Embedded<'a>>,
    pub wrappers: Vec<Wrapper>,
}

impl<'a> HostElf<'a> {
    /// Finds and parses the fatbins and wrappers of a 64-bit little-endian ELF file.
    pub fn parse(data: &'a [u8]) -> Result<HostElf<'a>, Error> {
        let err = |offset: u64, what: String| Error::new("host ELF", offset, what);
        let file = object::File::parse(data).map_err(|e| err(0, e.to_string()))?;
        if file.format() != object::BinaryFormat::Elf || !file.is_64() || !file.is_little_endian() {
            return Err(err(0, "not a 64-bit little-endian ELF file, the only hosts CUDA supports".into()));
        }
        let mut host = HostElf::default();
        for section in file.sections() {
            let kind = match section.name() {
                Ok(".nv_fatbin") => SectionKind::NvFatbin,
                Ok("__nv_relfatbin") => SectionKind::RelFatbin,
                _ => continue,
            };
            let Some((file_offset, _)) = section.file_range() else { continue };
            let bytes = section.data().map_err(|e| err(file_offset, e.to_string()))?;
            for fatbin in fatbin::parse_all(bytes, file_offset)? {
                let section_offset = fatbin.offset - file_offset;
                host.fatbins.push(Embedded {
                    section: kind,
                    address: section.address().wrapping_add(section_offset),
                    fatbin,
                    section_index: section.index(),
                    section_offset,
                });
            }
        }
        if let Some(segment) = file.section_by_name(".nvFatBinSegment") {
            host.wrappers = host.read_wrappers(&file, &segment)?;
        }
        Ok(host)
    }

    /// The fatbins of one section kind.
    pub fn fatbins_in(&self, section: SectionKind) -> impl Iterator<Item = &Fatbin<'a>> {
        self.fatbins.iter().filter(move |e| e.section == section).map(|e| &e.fatbin)
    }

    fn read_wrappers(&self, file: &object::File<'a>, segment: &object::Section<'a, '_>) -> Result<Vec<Wrapper>, Error> {
        let Some((file_offset, _)) = segment.file_range() else { return Ok(Vec::new()) };
        let bytes = segment.data().map_err(|e| Error::new(".nvFatBinSegment", file_offset, e.to_string()))?;
        let relocations: HashMap<u64, Relocation> = segment.relocations().collect();
        // Built on first need: large libraries have many dynamic relocations and many wrappers.
        let mut relative: Option<HashMap<u64, u64>> = None;
        let mut wrappers = Vec::new();
        for (i, wrapper) in bytes.chunks_exact(WRAPPER_SIZE).enumerate() {
            let at = (i * WRAPPER_SIZE) as u64;
            let offset = file_offset + at;
            let Some(head) = wrapper.first_chunk::<16>() else { continue };
            let (magic, version, data) = wrapper_fields(head);
            if magic != WRAPPER_MAGIC {
                let what = format!("magic {magic:#010x}, expected {WRAPPER_MAGIC:#010x}");
                return Err(Error::new(format!("fatbin wrapper {i}"), offset, what));
            }
            let pointer_at = at + 8;
            let fatbin = if let Some(reloc) = relocations.get(&pointer_at) {
                // An object: the pointer is a symbol or section plus an addend.
                let (index, base) = match reloc.target() {
                    RelocationTarget::Symbol(symbol) => match file.symbol_by_index(symbol) {
                        Ok(symbol) => (symbol.section_index(), symbol.address()),
                        Err(_) => (None, 0),
                    },
                    RelocationTarget::Section(index) => (Some(index), 0),
                    _ => (None, 0),
                };
                let target = base.wrapping_add(reloc.addend() as u64);
                self.fatbins.iter().position(|e| Some(e.section_index) == index && e.section_offset == target)
            } else {
                let address = match data {
                    0 => {
                        let relative = relative.get_or_insert_with(|| relative_addends(file));
                        relative.get(&segment.address().wrapping_add(pointer_at)).copied().unwrap_or(0)
                    }
                    data => data,
                };
                self.fatbins.iter().position(|e| e.address == address)
            };
            wrappers.push(Wrapper { offset, version, data, fatbin });
        }
        Ok(wrappers)
    }
}

/// (magic, version, fatbin address) from the start of a wrapper.
fn wrapper_fields(head: &[u8; 16]) -> (u32, u32, u64) {
    let low = u64::from_le_bytes(head[..8].try_into().unwrap_or_default());
    let high = u64::from_le_bytes(head[8..].try_into().unwrap_or_default());
    (low as u32, (low >> 32) as u32, high)
}

/// Address to addend of the symbol-less dynamic relocations (`R_*_RELATIVE`): what the loader
/// stores there.
fn relative_addends(file: &object::File<'_>) -> HashMap<u64, u64> {
    let relocations = file.dynamic_relocations().into_iter().flatten();
    relocations
        .filter(|(_, r)| r.target() == RelocationTarget::Absolute)
        .map(|(at, r)| (at, r.addend() as u64))
        .collect()
}

/// Parses the fatbin that `ptr` designates: a `__cudaRegisterFatBinary` wrapper, or a fatbin
/// header as `cuModuleLoadFatBinary` and `cuLibraryLoadData` take. The header is read first,
/// then a slice of the size it states is parsed.
///
/// # Safety
///
/// `ptr` must point to readable memory holding a wrapper (24 bytes) or a fatbin header (16
/// bytes); a wrapper's data pointer must point to a fatbin header; the whole fatbin the
/// header describes must be readable, and stay unchanged for `'a`.
pub unsafe fn from_wrapper_ptr<'a>(ptr: *const u8) -> Result<Fatbin<'a>, Error> {
    // SAFETY: the caller guarantees every range read here is readable.
    unsafe { from_ptr_checked(ptr, &|_, _| true) }
}

/// [`from_wrapper_ptr`] for a pointer nothing vouches for (an image a program hands to
/// `cuModuleLoadData` has no length, and a file cut short still has its whole header):
/// `readable(p, n)` is asked before `n` bytes at `p` are read, and a range it refuses is an
/// error, never a read.
///
/// # Safety
///
/// The ranges `readable` accepts must be readable, and stay unchanged for `'a`.
pub unsafe fn from_ptr_checked<'a>(
    ptr: *const u8,
    readable: &dyn Fn(*const u8, usize) -> bool,
) -> Result<Fatbin<'a>, Error> {
    let err = |what: String| Error::new("fatbin pointer", 0, what);
    if ptr.is_null() {
        return Err(err("null pointer".into()));
    }
    // A bare fatbin's header is 16 bytes; only a wrapper (24 bytes) is read further.
    if !readable(ptr, 16) {
        return Err(err(format!("{ptr:p} is not readable")));
    }
    // SAFETY: 16 bytes at `ptr` are readable (asked above).
    let first: [u8; 16] = unsafe { ptr.cast::<[u8; 16]>().read_unaligned() };
    let (magic, version, data) = wrapper_fields(&first);
    let fatbin = if magic == WRAPPER_MAGIC {
        if !(1..=2).contains(&version) {
            return Err(err(format!("wrapper {ptr:p} has version {version}; 1 and 2 are known")));
        }
        if data == 0 {
            return Err(err(format!("wrapper {ptr:p} has a null fatbin pointer")));
        }
        data as usize as *const u8
    } else {
        ptr
    };
    if !readable(fatbin, 16) {
        return Err(err(format!("the fatbin header at {fatbin:p} is not readable")));
    }
    // SAFETY: 16 bytes at `fatbin` are readable (asked above).
    let header: [u8; 16] = unsafe { fatbin.cast::<[u8; 16]>().read_unaligned() };
    let size = container_size(&header, 0).map_err(|e| err(format!("at {fatbin:p}: {}", e.what)))?;
    if size > MAX_FATBIN_SIZE || (fatbin as usize).checked_add(size as usize).is_none() {
        return Err(err(format!(
            "fatbin at {fatbin:p} claims {size:#x} bytes, over the limit of {MAX_FATBIN_SIZE:#x}"
        )));
    }
    // No pointer in this message: reports count unchecked modules by their reason.
    if !readable(fatbin, size as usize) {
        return Err(err(format!(
            "the fatbin's header claims {size:#x} bytes, and not all of them are readable (cut short?)"
        )));
    }
    // SAFETY: the `size` bytes the header describes are readable (asked above) and unchanged
    // for 'a (the caller's promise); `size` fits the address space (checked above).
    let bytes = unsafe { std::slice::from_raw_parts(fatbin, size as usize) };
    Fatbin::parse(bytes)
}
