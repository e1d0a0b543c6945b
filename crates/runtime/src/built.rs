//! Cubins built from instrumented PTX, known by their digest: the program loads machine
//! code that gpusan (or its `ptxas` stand-in) made from PTX it instrumented, and the loader
//! then sees only a cubin. A record names where the cubin came from, the cache entry of the
//! instrumented PTX it was built from (when that PTX can be loaded in its place), and the
//! module's metadata (`gpusan_passes::meta`, as text), so reports name its kernels and lines.
//!
//! Records live in the cache folder beside the PTX entries (`<digest>.built`, written and
//! read with [`crate::cache`]'s checks), so a cubin a program kept in its own cache (CuPy's,
//! numba's, Triton's) is recognised on a later run too.

use std::path::Path;

use crate::cache;

/// Which door produced the cubin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// NVRTC asked for a cubin: gpusan built it from the instrumented PTX.
    Nvrtc,
    /// The driver's linker linked instrumented PTX.
    Linker,
    /// The `ptxas` stand-in assembled instrumented PTX (Triton, nvcc).
    Ptxas,
}

impl Origin {
    pub fn name(self) -> &'static str {
        match self {
            Origin::Nvrtc => "nvrtc",
            Origin::Linker => "linker",
            Origin::Ptxas => "ptxas",
        }
    }

    fn from_name(s: &str) -> Option<Origin> {
        [Origin::Nvrtc, Origin::Linker, Origin::Ptxas].into_iter().find(|o| o.name() == s)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Built {
    pub origin: Origin,
    /// The cache key of the instrumented PTX the cubin was built from, when that PTX may be
    /// loaded in the cubin's place (it is the same module, JIT-compiled as a whole program).
    pub ptx_key: Option<String>,
    /// The module's metadata, as `ModuleMeta::to_text` wrote it.
    pub meta: String,
}

/// The name of a cubin: SHA-256 of its bytes, framed apart from PTX keys.
pub fn digest(cubin: &[u8]) -> String {
    cache::key(&[b"cubin", cubin])
}

impl Built {
    pub fn to_text(&self) -> String {
        format!("origin {}\nptx {}\n{}", self.origin.name(), self.ptx_key.as_deref().unwrap_or("-"), self.meta)
    }

    /// `None` for anything [`Built::to_text`] did not write.
    pub fn from_text(text: &str) -> Option<Built> {
        let (first, rest) = text.split_once('\n')?;
        let (second, meta) = rest.split_once('\n')?;
        let origin = Origin::from_name(first.strip_prefix("origin ")?)?;
        let ptx = second.strip_prefix("ptx ")?;
        let valid_key = |k: &str| k.len() == 64 && k.bytes().all(|b| b.is_ascii_hexdigit());
        let ptx_key = match ptx {
            "-" => None,
            k if valid_key(k) => Some(k.to_string()),
            _ => return None,
        };
        Some(Built { origin, ptx_key, meta: meta.to_string() })
    }
}

/// Records that the cubin of digest `digest` is `built`.
pub fn write(dir: &Path, digest: &str, built: &Built) {
    cache::write(dir, &format!("{digest}.built"), digest, built.to_text().as_bytes());
}

/// The record of the cubin of digest `digest`, if one was written and passes the cache's
/// checks.
pub fn read(dir: &Path, digest: &str) -> Option<Built> {
    let body = cache::read(dir, &format!("{digest}.built"), digest)?;
    Built::from_text(std::str::from_utf8(&body).ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Built {
        Built { origin: Origin::Nvrtc, ptx_key: Some("ab".repeat(32)), meta: "function 0 k\nline 3 1 7\n".into() }
    }

    #[test]
    fn a_record_reads_back_as_written_under_its_cubins_digest() {
        let d = tempfile::tempdir().unwrap();
        let cubin = b"\x7fELF not really";
        write(d.path(), &digest(cubin), &sample());
        assert_eq!(read(d.path(), &digest(cubin)), Some(sample()));
        assert_eq!(read(d.path(), &digest(b"another cubin")), None);
        let no_ptx = Built { origin: Origin::Ptxas, ptx_key: None, meta: String::new() };
        assert_eq!(Built::from_text(&no_ptx.to_text()), Some(no_ptx));
    }

    #[test]
    fn text_it_did_not_write_is_no_record() {
        for bad in [
            "",
            "origin nvrtc\n",
            "origin elsewhere\nptx -\n",
            "origin nvrtc\nptx ../../etc\n",
            "ptx -\norigin nvrtc\n",
        ] {
            assert_eq!(Built::from_text(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_cubins_digest_differs_from_a_ptx_key_of_the_same_bytes() {
        assert_ne!(digest(b"x"), cache::key(&[b"x"]));
        assert_eq!(digest(b"x").len(), 64);
    }
}
