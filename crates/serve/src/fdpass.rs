//! A file descriptor passed with a frame over the tenant's Unix socket (`SCM_RIGHTS`): how a
//! tenant hands the manager its shared bulk segment (`docs/fence-design.md` §6). The
//! manager reads every frame through [`FdReader`], which keeps the descriptors that arrive
//! with the bytes; a frame that announces one ([`crate::protocol::Request::Segment`]) takes
//! it from there.

use std::collections::VecDeque;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;

/// Descriptors one read accepts at most (more are closed by the kernel, unread).
const MAX_FDS: usize = 4;

/// Reads a Unix stream with `recvmsg`, keeping the descriptors that come with the bytes.
pub struct FdReader {
    stream: UnixStream,
    fds: VecDeque<OwnedFd>,
}

impl FdReader {
    pub fn new(stream: UnixStream) -> FdReader {
        FdReader { stream, fds: VecDeque::new() }
    }

    /// The oldest descriptor received and not taken yet.
    pub fn take_fd(&mut self) -> Option<OwnedFd> {
        self.fds.pop_front()
    }
}

impl Read for FdReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
        // u64s: the control buffer must be aligned for `cmsghdr`.
        let mut control = [0u64; 16];
        // SAFETY: a zeroed msghdr is a valid empty one; the pointers set below outlive the call.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        // SAFETY: CMSG_SPACE only computes a size.
        msg.msg_controllen = (unsafe { libc::CMSG_SPACE((MAX_FDS * std::mem::size_of::<RawFd>()) as u32) } as usize)
            .min(std::mem::size_of_val(&control));
        let n = loop {
            // SAFETY: `msg` describes buffers of ours of the lengths given.
            let n = unsafe { libc::recvmsg(self.stream.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
            if n >= 0 {
                break n as usize;
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        };
        // SAFETY: walking the control messages the kernel wrote into `msg`'s buffer.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                    let data = libc::CMSG_DATA(c).cast::<RawFd>();
                    let count = ((*c).cmsg_len as usize).saturating_sub(libc::CMSG_LEN(0) as usize)
                        / std::mem::size_of::<RawFd>();
                    for i in 0..count {
                        self.fds.push_back(OwnedFd::from_raw_fd(std::ptr::read_unaligned(data.add(i))));
                    }
                    // A peer sending descriptors nobody asked for must not fill the
                    // manager's table: only the newest few are kept (the rest closed).
                    while self.fds.len() > MAX_FDS {
                        self.fds.pop_front();
                    }
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
        Ok(n)
    }
}

/// Writes `bytes` to `stream` with `fd` attached to the first of them.
pub fn send_with_fd(stream: &UnixStream, bytes: &[u8], fd: RawFd) -> io::Result<()> {
    let mut iov = libc::iovec { iov_base: bytes.as_ptr() as *mut _, iov_len: bytes.len() };
    let mut control = [0u64; 4];
    // SAFETY: as in `FdReader::read`; one descriptor's control message fits `control`.
    let sent = unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) as usize;
        let c = libc::CMSG_FIRSTHDR(&msg);
        (*c).cmsg_level = libc::SOL_SOCKET;
        (*c).cmsg_type = libc::SCM_RIGHTS;
        (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as usize;
        std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<RawFd>(), fd);
        libc::sendmsg(stream.as_raw_fd(), &msg, libc::MSG_NOSIGNAL)
    };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    // The rest, if the socket took only part: the descriptor went with the first bytes.
    io::Write::write_all(&mut &*stream, &bytes[sent as usize..])
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_descriptor_sent_with_bytes_is_kept_by_the_reader_that_reads_them() {
        let (a, b) = UnixStream::pair().unwrap();
        let file = tempfile::tempfile().unwrap();
        (&file).write_all(b"segment").unwrap();
        send_with_fd(&a, b"hello", file.as_raw_fd()).unwrap();
        (&a).write_all(b" world").unwrap();
        drop(a);
        let mut r = FdReader::new(b);
        let mut got = String::new();
        r.read_to_string(&mut got).unwrap();
        assert_eq!(got, "hello world");
        let fd = r.take_fd().expect("the descriptor");
        let mut f = std::fs::File::from(fd);
        use std::io::Seek;
        f.seek(std::io::SeekFrom::Start(0)).unwrap();
        let mut text = String::new();
        f.read_to_string(&mut text).unwrap();
        assert_eq!(text, "segment", "the same file");
        assert!(r.take_fd().is_none());
    }
}
