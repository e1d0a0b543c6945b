//! The on-disk cache of instrumented modules (written by the injected library and by the
//! `ptxas` stand-in), and what makes it safe to load from: the
//! cached PTX runs as the program's own code, so an entry another user could have written,
//! or one whose content is not what gpusan wrote under its name, is never used.
//!
//! - An entry's name is a SHA-256 of its input (the module's PTX, the pass's options, the
//!   version and the pass's code fingerprint), stable across Rust releases.
//! - Each file starts with one header line naming its key and the SHA-256 of the rest of
//!   the file: an edited or swapped body, or another entry's file renamed, is a miss.
//! - The folder is created 0700; the folder and each file must be the user's own and not
//!   writable by group or others, and files are opened without following symlinks.
//! - Files are written to a fresh temporary file in the folder (created exclusively, 0600)
//!   and renamed into place: no name anyone could plant a symlink at is ever opened for
//!   writing, and a reader never sees half a file.

use std::io::Read;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use gpusan_abi::env;
use sha2::{Digest, Sha256};

use crate::per_process::PerProcess;

/// The cache folder: `$GPUSAN_CACHE_DIR`, else `$XDG_CACHE_HOME/gpusan` or
/// `~/.cache/gpusan`. An empty variable counts as unset (it would mean the program's
/// working folder).
pub fn dir() -> Option<PathBuf> {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    if let Some(d) = var(env::CACHE_DIR) {
        return Some(PathBuf::from(d));
    }
    let base =
        var("XDG_CACHE_HOME").map(PathBuf::from).or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("gpusan"))
}

/// The key of an input made of `parts`: SHA-256 over each part with its length, in hex.
pub fn key(parts: &[&[u8]]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p);
    }
    hex(&h.finalize())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The header line of a file of entry `key` whose body is `body`.
fn header(key: &str, body: &[u8]) -> String {
    format!("// gpusan cache {key} sha256 {}\n", hex(&Sha256::digest(body)))
}

/// Why a file or folder with this owner and mode must not be trusted, if it must not.
pub fn untrusted(owner: u32, mode: u32, me: u32) -> Option<&'static str> {
    if owner != me {
        Some("owned by another user")
    } else if mode & 0o022 != 0 {
        Some("writable by group or others")
    } else {
        None
    }
}

/// Why the cache folder was not used, the first time it was not: the report says so (a
/// folder made group-writable by an older gpusan or a umask of 002 would otherwise stop
/// caching without a word).
static REFUSED: PerProcess<std::sync::OnceLock<String>> = PerProcess::new(std::sync::OnceLock::new);

/// The note for the report when the cache folder could not be trusted.
pub fn refused() -> Option<&'static str> {
    REFUSED.get().get().map(String::as_str)
}

fn trusted_folder(dir: &Path) -> bool {
    let Ok(m) = std::fs::metadata(dir) else { return false };
    match untrusted(m.uid(), m.mode(), unsafe { libc::geteuid() }) {
        None if m.is_dir() => true,
        None => false,
        Some(why) => {
            let _ = REFUSED.get().set(format!(
                "the cache folder {} is {why}: no instrumented module was read from it or written to it \
                 (every module was still instrumented; make it the user's own, mode 0700)",
                dir.display()
            ));
            false
        }
    }
}

fn trusted(meta: &std::fs::Metadata) -> bool {
    untrusted(meta.uid(), meta.mode(), unsafe { libc::geteuid() }).is_none()
}

/// The folder, if it is (or, created now 0700, becomes) one gpusan may trust.
fn usable(dir: &Path) -> bool {
    let _ = std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir);
    trusted_folder(dir)
}

/// The body of file `name` of entry `key` in `dir`; `None` (a miss) unless the folder and
/// the file are trusted, the file is no symlink and its header names `key` and its body's
/// digest.
pub fn read(dir: &Path, name: &str, key: &str) -> Option<Vec<u8>> {
    if !trusted_folder(dir) {
        return None;
    }
    let mut f = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW).open(dir.join(name)).ok()?;
    let meta = f.metadata().ok()?;
    if !meta.is_file() || !trusted(&meta) {
        return None;
    }
    let mut text = Vec::new();
    f.read_to_end(&mut text).ok()?;
    let end = text.iter().position(|&b| b == b'\n')? + 1;
    let body = text.split_off(end);
    (text == header(key, &body).as_bytes()).then_some(body)
}

/// Writes file `name` of entry `key` (header and `body`) into `dir`, atomically; nothing
/// when the folder cannot be trusted or written.
pub fn write(dir: &Path, name: &str, key: &str, body: &[u8]) {
    if !usable(dir) {
        return;
    }
    let mut file = header(key, body).into_bytes();
    file.extend_from_slice(body);
    write_no_follow(&dir.join(name), &file);
}

/// Writes `bytes` to `path` through a fresh temporary file in its folder renamed into
/// place: never through a symlink planted at `path`, never half a file to a reader.
pub fn write_no_follow(path: &Path, bytes: &[u8]) -> bool {
    use std::io::Write;
    let Some(dir) = path.parent() else { return false };
    let Ok(mut tmp) = tempfile::Builder::new().prefix(".tmp-").tempfile_in(dir) else { return false };
    tmp.write_all(bytes).is_ok() && tmp.persist(path).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_is_a_stable_sha256_of_the_framed_parts() {
        // Pinned: the same input names the same entry with every build of gpusan.
        assert_eq!(key(&[b"ab", b"c"]), "43ee655579de01ca739b3f95c1c2d3f46d353b2c0df818064ea594506cdb2617");
        assert_ne!(key(&[b"ab", b"c"]), key(&[b"a", b"bc"]), "parts are framed");
        assert_eq!(key(&[]), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    }

    #[test]
    fn untrusted_names_another_owner_and_loose_modes() {
        assert_eq!(untrusted(1000, 0o100600, 1000), None);
        assert_eq!(untrusted(1000, 0o40755, 1000), None);
        assert_eq!(untrusted(0, 0o100600, 1000), Some("owned by another user"));
        assert_eq!(untrusted(1000, 0o100620, 1000), Some("writable by group or others"));
        assert_eq!(untrusted(1000, 0o40777, 1000), Some("writable by group or others"));
    }

    #[test]
    fn a_file_is_read_back_only_under_its_own_key_and_digest() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), "k.ptx", "k", b"body\n");
        assert_eq!(read(d.path(), "k.ptx", "k").as_deref(), Some(&b"body\n"[..]));
        assert_eq!(read(d.path(), "k.ptx", "other"), None, "another entry's file");
        let f = d.path().join("k.ptx");
        let text = std::fs::read_to_string(&f).unwrap();
        std::fs::write(&f, text.replace("body", "evil")).unwrap();
        assert_eq!(read(d.path(), "k.ptx", "k"), None, "a swapped body");
        std::fs::write(d.path().join("real"), header("k", b"x")).unwrap();
        std::fs::remove_file(&f).unwrap();
        std::os::unix::fs::symlink(d.path().join("real"), &f).unwrap();
        assert_eq!(read(d.path(), "k.ptx", "k"), None, "through a symlink");
    }
}
