//! CUDA fatbinaries: finding them (host ELF sections, pointers handed to the CUDA runtime and
//! driver), parsing their entries, decompressing PTX and cubins, and listing the kernels of a
//! cubin.
//!
//! The runtime injected into user processes calls this on whatever the process loads, so no
//! input makes it panic, and no length field makes it allocate: what it allocates grows with
//! the input's size, and a decompressed payload with what the decoder really produces, up to
//! the size its header states and at most [`MAX_DECOMPRESSED_SIZE`].
//!
//! ```no_run
//! let file = std::fs::read("app").unwrap();
//! let host = gpusan_fatbin::HostElf::parse(&file).unwrap();
//! for entry in host.fatbins.iter().flat_map(|e| &e.fatbin.entries) {
//!     if entry.kind == gpusan_fatbin::EntryKind::Elf {
//!         let cubin = entry.contents().unwrap();
//!         for kernel in gpusan_fatbin::Cubin::parse(&cubin).unwrap().kernels() {
//!             println!("{} ({} bytes of parameters)", kernel.name, kernel.param_size.unwrap_or(0));
//!         }
//!     }
//! }
//! ```

mod cubin;
mod decompress;
mod error;
mod fatbin;
mod host;

pub use cubin::{Cubin, Function, Param, Variable, STO_CUDA_ENTRY};
pub use error::Error;
pub use fatbin::{parse, summary, Compression, Entry, EntryKind, Fatbin, Flags, FATBIN_MAGIC, MAX_DECOMPRESSED_SIZE};
pub use host::{
    from_ptr_checked, from_wrapper_ptr, Embedded, HostElf, SectionKind, Wrapper, MAX_FATBIN_SIZE, WRAPPER_MAGIC,
};

/// Runs `data` through every parser and accessor, as a fuzz target would: as a fatbin, a host
/// ELF file and a cubin, decompressing and parsing whatever it finds.
#[doc(hidden)]
pub fn fuzz_parse(data: &[u8]) {
    fn exercise(fatbin: &Fatbin<'_>) {
        let _ = fatbin.to_string();
        for entry in &fatbin.entries {
            let _ = (entry.to_string(), entry.ptx_text());
            if let (EntryKind::Elf, Ok(contents)) = (entry.kind, entry.contents()) {
                let _ = Cubin::parse(&contents);
            }
        }
    }
    if let Ok(fatbins) = parse(data) {
        fatbins.iter().for_each(exercise);
        let _ = summary(&fatbins, "fuzz");
    }
    if let Ok(host) = HostElf::parse(data) {
        host.fatbins.iter().for_each(|e| exercise(&e.fatbin));
    }
    let _ = Cubin::parse(data);
    // The pointer path of a module load, where nothing vouches for the image: every range is
    // asked of `readable` before it is read, and here only `data`'s bytes are readable.
    let (start, end) = (data.as_ptr() as usize, data.as_ptr() as usize + data.len());
    let readable =
        |p: *const u8, n: usize| p as usize >= start && (p as usize).checked_add(n).is_some_and(|e| e <= end);
    // SAFETY: `readable` accepts only ranges inside `data`, which outlives the parse.
    let _ = unsafe { from_ptr_checked(data.as_ptr(), &readable) }.map(|f| exercise(&f));
}
