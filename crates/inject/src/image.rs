//! What a module load was handed: `cuModuleLoadData[Ex]`, `cuModuleLoadFatBinary` and
//! `cuLibraryLoadData` take a pointer and no length. Its first bytes say what it is (a
//! fatbin as a `.fatbin` file holds it, a registration wrapper pointing to one, a cubin, or
//! NUL-terminated PTX text) and its headers how long it is; every byte gpusan reads is
//! checked readable first ([`crate::driver::peek`]), so an image cut short or text without its NUL
//! is refused with the reason rather than read past its end. The driver gets such an image
//! unchanged, as the program gave it.

use std::ffi::c_void;

use crate::driver::peek;

/// The longest PTX text read: the limit of `gpusan`'s own inputs.
const MAX_TEXT: usize = 1 << 30;
/// The largest cubin believed: no real one comes near.
const MAX_CUBIN: u64 = 1 << 30;

/// A loaded image, viewed in place.
pub enum Image<'a> {
    /// A fatbin container: the bytes given, or those a registration wrapper points to.
    Fatbin(gpusan_fatbin::Fatbin<'a>),
    /// An ELF file: device code for one architecture.
    Cubin(&'a [u8]),
    /// Text (PTX, if it is a module at all), without its NUL.
    Text(&'a str),
}

/// Reads the image at `image`, checking each range before it is read.
///
/// # Safety
///
/// What [`peek::readable`] accepts must stay readable and unchanged for `'a` (the load call,
/// for an image the program owns).
pub unsafe fn read<'a>(image: *const c_void) -> Result<Image<'a>, String> {
    let p = image as *const u8;
    if p.is_null() {
        return Err("null image".into());
    }
    if !peek::readable(p, 4) {
        return Err("the image is not readable".into());
    }
    // SAFETY: 4 bytes at `p` are readable (checked above).
    let head = unsafe { std::slice::from_raw_parts(p, 4) };
    let magic = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
    if magic == gpusan_fatbin::FATBIN_MAGIC || magic == gpusan_fatbin::WRAPPER_MAGIC {
        // SAFETY: every range is asked of `peek::readable` before it is read.
        let fatbin = unsafe { gpusan_fatbin::from_ptr_checked(p, &peek::readable) };
        return fatbin.map(Image::Fatbin).map_err(|e| e.to_string());
    }
    if head == b"\x7fELF" {
        // SAFETY: as above: `cubin_size` checks its header, then the size it states.
        let size = unsafe { cubin_size(p) }?;
        return Ok(Image::Cubin(unsafe { std::slice::from_raw_parts(p, size) }));
    }
    // PTX text: NUL-terminated by the API's contract, and checked up to it.
    let len = peek::text_len(p, MAX_TEXT).ok_or("the image is neither a fatbin nor text ending within reach")?;
    // SAFETY: `len` bytes at `p` are readable (`text_len` checked them).
    let bytes = unsafe { std::slice::from_raw_parts(p, len) };
    std::str::from_utf8(bytes).map(Image::Text).map_err(|_| "image is neither a fatbin nor text".into())
}

/// The size of the 64-bit ELF file at `p`, from its header (the end of its program or
/// section header table, whichever is later; nvcc's cubins put the section headers last).
unsafe fn cubin_size(p: *const u8) -> Result<usize, String> {
    if !peek::readable(p, 64) {
        return Err("cubin cut short: its ELF header is not readable".into());
    }
    // SAFETY: 64 bytes at `p` are readable (checked above).
    let h = unsafe { std::slice::from_raw_parts(p, 64) };
    if h[4] != 2 {
        return Err("machine code only (cubin), not a 64-bit ELF file".into());
    }
    let u64_at = |o: usize| u64::from_le_bytes(h[o..o + 8].try_into().unwrap_or_default());
    let u16_at = |o: usize| u64::from(u16::from_le_bytes([h[o], h[o + 1]]));
    let (phoff, shoff) = (u64_at(0x20), u64_at(0x28));
    let (phentsize, phnum, shentsize, shnum) = (u16_at(0x36), u16_at(0x38), u16_at(0x3a), u16_at(0x3c));
    let end = |off: u64, n: u64, size: u64| off.checked_add(n * size);
    let size = match (end(phoff, phnum, phentsize), end(shoff, shnum, shentsize)) {
        (Some(a), Some(b)) => a.max(b).max(64),
        _ => return Err("cubin header out of range".into()),
    };
    if size > MAX_CUBIN {
        return Err(format!("cubin header claims {size:#x} bytes, over the limit of {MAX_CUBIN:#x}"));
    }
    if !peek::readable(p, size as usize) {
        return Err(format!("cubin header claims {size:#x} bytes, and not all of them are readable (cut short?)"));
    }
    Ok(size as usize)
}
