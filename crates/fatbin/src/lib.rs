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
    // The pointer path reads the header in place; safe here only when the fatbin it claims
    // lies inside `data`.
    let claimed = data.first_chunk::<16>().and_then(|h| fatbin::container_size(h, 0).ok());
    if claimed.is_some_and(|size| size <= data.len() as u64) {
        // SAFETY: `data` starts with a fatbin header whose whole claimed size is in `data`.
        let _ = unsafe { from_wrapper_ptr(data.as_ptr()) }.map(|f| exercise(&f));
    }
}
