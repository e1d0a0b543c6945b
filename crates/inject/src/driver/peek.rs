//! Reading the program's memory where a bad address must not crash it: an image handed to
//! a module load comes without a length (only its headers say how long it is, and a file cut
//! short still has whole headers; text need not end in a NUL), and the error buffer of a
//! context the driver tore down unseen is no longer mapped.
//!
//! `process_vm_readv` on the process itself copies what is readable and reports the rest as
//! `EFAULT` where a plain read would fault. Readability is a property of pages, so a range
//! is checked with one byte per page, a thousand pages a call. Where the call is not
//! allowed (a seccomp filter), nothing can be checked, and ranges count as readable:
//! gpusan then reads what the driver itself is about to read.

use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Remote ranges per `process_vm_readv` call (Linux's `IOV_MAX`).
const RANGES_PER_CALL: usize = 1024;

fn page_size() -> usize {
    // An atomic, not a once-cell: one a thread was filling at a `fork` stays busy in the child.
    static PAGE: AtomicUsize = AtomicUsize::new(0);
    match PAGE.load(Ordering::Relaxed) {
        0 => {
            // SAFETY: sysconf has no preconditions.
            let n = match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
                n if n > 0 => n as usize,
                _ => 4096,
            };
            PAGE.store(n, Ordering::Relaxed);
            n
        }
        n => n,
    }
}

/// Copies `dst.len()` bytes from `src` into `dst` without faulting: how many were readable
/// (from the start), or `None` when the kernel does not let the process read itself.
fn read_own(dst: &mut [u8], src: *const u8) -> Option<usize> {
    let local = libc::iovec { iov_base: dst.as_mut_ptr() as *mut c_void, iov_len: dst.len() };
    let remote = libc::iovec { iov_base: src as *mut c_void, iov_len: dst.len() };
    // SAFETY: `local` is our own buffer of its stated length; the remote range is only read
    // by the kernel, which reports an unmapped one as an error.
    let n = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
    match n {
        n if n >= 0 => Some(n as usize),
        _ if std::io::Error::last_os_error().raw_os_error() == Some(libc::EFAULT) => Some(0),
        _ => None,
    }
}

/// Whether all `len` bytes at `p` can be read (an empty range can).
pub fn readable(p: *const u8, len: usize) -> bool {
    if len == 0 {
        return true;
    }
    let Some(last) = (p as usize).checked_add(len - 1) else { return false };
    let page = page_size();
    let (first_page, last_page) = (p as usize / page, last / page);
    let mut probes = Vec::with_capacity(RANGES_PER_CALL.min(last_page - first_page + 1));
    let mut bytes = [0u8; RANGES_PER_CALL];
    let mut next = first_page;
    while next <= last_page {
        // One byte of every page the range touches: its own first byte, then each
        // following page's first.
        probes.clear();
        while probes.len() < RANGES_PER_CALL && next <= last_page {
            let at = if next == first_page { p as usize } else { next * page };
            probes.push(libc::iovec { iov_base: at as *mut c_void, iov_len: 1 });
            next += 1;
        }
        let local = libc::iovec { iov_base: bytes.as_mut_ptr() as *mut c_void, iov_len: probes.len() };
        // SAFETY: as in `read_own`; each remote range is one byte.
        let n = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, probes.as_ptr(), probes.len() as _, 0) };
        if n < 0 {
            // EFAULT: the first page is not readable. Anything else: the process may not
            // read itself, and nothing can be told apart.
            return std::io::Error::last_os_error().raw_os_error() != Some(libc::EFAULT);
        }
        if n as usize != probes.len() {
            return false;
        }
    }
    true
}

/// The length of the NUL-terminated text at `p`, if its NUL comes within `max` bytes and
/// every byte up to it is readable.
pub fn text_len(p: *const u8, max: usize) -> Option<usize> {
    let page = page_size();
    let mut len = 0;
    while len < max {
        let at = (p as usize).checked_add(len)?;
        // Up to the end of this page: all of it is readable or none.
        let chunk = (page - at % page).min(max - len);
        if !readable(at as *const u8, chunk) {
            return None;
        }
        // SAFETY: `chunk` bytes at `at` are readable (checked above).
        let bytes = unsafe { std::slice::from_raw_parts(at as *const u8, chunk) };
        if let Some(nul) = bytes.iter().position(|&b| b == 0) {
            return Some(len + nul);
        }
        len += chunk;
    }
    None
}

/// Copies `dst.len()` bytes from `src`; false (and `dst` partly written) where some are not
/// readable.
///
/// # Safety
///
/// Where the process may not read itself (see the module's doc) `src` is read directly:
/// it must then be readable for `dst.len()` bytes.
pub unsafe fn copy(dst: &mut [u8], src: *const u8) -> bool {
    match read_own(dst, src) {
        Some(n) => n == dst.len(),
        None => {
            // SAFETY: the caller's promise, for this case.
            unsafe { std::ptr::copy_nonoverlapping(src, dst.as_mut_ptr(), dst.len()) };
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two pages, the second unreadable.
    fn guarded() -> (*mut u8, usize) {
        let page = page_size();
        // SAFETY: a fresh anonymous mapping, then its second page made unreadable.
        unsafe {
            let p = libc::mmap(
                std::ptr::null_mut(),
                2 * page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            ) as *mut u8;
            assert_ne!(p as *mut c_void, libc::MAP_FAILED);
            assert_eq!(libc::mprotect(p.add(page) as *mut c_void, page, libc::PROT_NONE), 0);
            (p, page)
        }
    }

    #[test]
    fn ranges_up_to_an_unreadable_page_are_readable_and_none_across_it() {
        let (p, page) = guarded();
        assert!(readable(p, page));
        assert!(readable(unsafe { p.add(page - 1) }, 1));
        assert!(!readable(unsafe { p.add(page - 1) }, 2));
        assert!(!readable(p, 2 * page));
        assert!(!readable(std::ptr::null(), 1));
        assert!(readable(std::ptr::null(), 0));
        assert!(!readable(usize::MAX as *const u8, 2), "a range past the address space");
        // Many pages: more than one call's worth of probes.
        let big = vec![1u8; RANGES_PER_CALL * page * 2 + 5];
        assert!(readable(big.as_ptr(), big.len()));
    }

    #[test]
    fn text_ends_at_its_nul_or_not_at_all() {
        let (p, page) = guarded();
        unsafe {
            std::ptr::write_bytes(p, b'x', page);
            *p.add(10) = 0;
        }
        assert_eq!(text_len(p, 1 << 20), Some(10));
        assert_eq!(text_len(p, 5), None, "no NUL within the limit");
        unsafe { *p.add(10) = b'x' };
        assert_eq!(text_len(p, 1 << 20), None, "the text runs into the unreadable page");
        let mut dst = [0u8; 8];
        // SAFETY: `p` is readable for 8 bytes; the second copy is refused, not made.
        assert!(unsafe { copy(&mut dst, p) });
        assert!(!unsafe { copy(&mut dst, p.add(page - 4)) });
    }
}
