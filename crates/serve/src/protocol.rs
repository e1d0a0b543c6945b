//! What a tenant and the manager say to each other over the tenant's Unix socket
//! (`docs/fence-design.md` §6): requests in order, each answered by one reply except a
//! launch ([`Request::answered`]). A frame is a 4-byte
//! little-endian length then that many bytes of a postcard-encoded message. Handles in
//! messages are the manager's own values: the tenant holds them opaquely, and the manager
//! accepts only those it gave that tenant.
//!
//! Bulk data travels through the tenant's shared segment when it gave one
//! ([`Request::Segment`]: a `memfd` the manager maps and registers with the driver, so a
//! copy is one `memcpy` in the tenant and a DMA), else inside the frames.

use std::io::{self, Read, Write};

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Bumped at every change of a message: a tenant and a manager of different versions refuse
/// each other at `Hello`.
pub const VERSION: u32 = 7;
/// The largest frame either side accepts: a copy larger than this is split by the tenant.
pub const MAX_FRAME: u32 = 64 << 20;
/// Bytes of copy data one request carries at most (room left for the message around it).
pub const MAX_CHUNK: u64 = (MAX_FRAME as u64) - 4096;

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// The first message: who the tenant is and the partition it asks for (`2^memory_log2`
    /// bytes).
    Hello {
        version: u32,
        pid: u32,
        name: String,
        memory_log2: u32,
    },
    MemAlloc {
        bytes: u64,
    },
    MemFree {
        ptr: u64,
    },
    CopyHtoD {
        dst: u64,
        data: Vec<u8>,
    },
    CopyDtoH {
        src: u64,
        bytes: u64,
    },
    /// The tenant's bulk segment, `bytes` long: the frame carries its descriptor
    /// (`SCM_RIGHTS`, [`crate::fdpass`]). Sent once, after `Hello`.
    Segment {
        bytes: u64,
    },
    /// Copies `bytes` from the segment at `offset` to `dst`.
    CopyHtoDShared {
        dst: u64,
        offset: u64,
        bytes: u64,
    },
    /// Copies `bytes` from `src` into the segment at `offset`; `Done` once they are there.
    CopyDtoHShared {
        src: u64,
        offset: u64,
        bytes: u64,
    },
    MemsetD8 {
        dst: u64,
        value: u8,
        count: u64,
    },
    /// `count` 32-bit words set to `value`.
    MemsetD32 {
        dst: u64,
        value: u32,
        count: u64,
    },
    /// A module image: PTX text or a fatbin with PTX (fenced by the manager before it is
    /// loaded). Machine code alone is refused until the binary route can fence it, unless
    /// the manager allows it unfenced for a tenant alone on the GPU (`--allow-native`).
    ModuleLoad {
        image: Vec<u8>,
    },
    ModuleUnload {
        module: u64,
    },
    GetFunction {
        module: u64,
        name: String,
    },
    /// A `.global` variable of a module: its copy in the partition (`Reply::Global`).
    GetGlobal {
        module: u64,
        name: String,
    },
    /// A launch on the tenant's stream; `params` are the kernel's parameters packed at the
    /// offsets [`Reply::Function`] gave. Not answered: a program launches thousands of
    /// kernels a second and waits for none of them, so the tenant does not wait for the
    /// manager either. A launch the manager refuses makes the tenant's next
    /// [`Request::Synchronize`] fail with its error, as a kernel's fault would.
    Launch {
        function: u64,
        grid: [u32; 3],
        block: [u32; 3],
        shared: u32,
        params: Vec<u8>,
    },
    /// Waits for the tenant's work; the reply carries the first error of its kernels.
    Synchronize,
    /// Whether the tenant's work is done: `Done`, or the error 600 (CUDA_ERROR_NOT_READY).
    Query,
    /// An event of the tenant's (`cuEventCreate`'s flags).
    EventCreate {
        flags: u32,
    },
    /// Records the event after the tenant's work so far (all of a tenant's streams are its
    /// one stream in the manager).
    EventRecord {
        event: u64,
    },
    EventSynchronize {
        event: u64,
    },
    /// `Done`, or the error 600 while the work before the event's record runs.
    EventQuery {
        event: u64,
    },
    /// Milliseconds between two recorded events: `Reply::Float`.
    EventElapsed {
        start: u64,
        end: u64,
    },
    EventDestroy {
        event: u64,
    },
    /// A device attribute of the GPU (`CUdevice_attribute`): `Reply::Value`.
    DeviceAttribute {
        attribute: i32,
    },
    /// The GPU's name: `Reply::Text`.
    DeviceName,
    /// The driver's version: `Reply::Value`.
    DriverVersion,
    /// The tenant's memory: `Reply::MemInfo`, its partition's free and total bytes (the
    /// GPU a tenant sees is its partition).
    MemInfo,
    /// Instead of `Hello`, from `gpusan serve --status`: the tenants now.
    Status,
    /// `cuTensorMapEncodeTiled`: a map made by the manager's driver, if the tensor it
    /// declares lies in the tenant's partition (`Reply::Bytes`, the 128-byte map). The
    /// manager remembers it: a kernel whose tensor copies read a map from a parameter runs
    /// only with maps so made there.
    TensorMapEncodeTiled(TiledMap),
    /// `cuTensorMapEncodeIm2col`, as [`Request::TensorMapEncodeTiled`].
    TensorMapEncodeIm2col(Im2colMap),
}

/// The arguments of `cuTensorMapEncodeIm2col` (cuda.h), by value: the tensor as a tiled
/// map's, then the pixel box's corners (`tensorRank - 2` each), channels per pixel and
/// pixels per column in place of the box.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Im2colMap {
    pub data_type: u32,
    pub address: u64,
    pub dims: Vec<u64>,
    pub strides: Vec<u64>,
    pub lower: Vec<i32>,
    pub upper: Vec<i32>,
    pub channels: u32,
    pub pixels: u32,
    pub element_strides: Vec<u32>,
    pub interleave: i32,
    pub swizzle: i32,
    pub l2_promotion: i32,
    pub oob_fill: i32,
}

/// The arguments of `cuTensorMapEncodeTiled` (cuda.h), by value.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct TiledMap {
    pub data_type: u32,
    pub address: u64,
    /// `globalDim`: `tensorRank` entries.
    pub dims: Vec<u64>,
    /// `globalStrides`: `tensorRank - 1` entries.
    pub strides: Vec<u64>,
    pub box_dim: Vec<u32>,
    pub element_strides: Vec<u32>,
    pub interleave: i32,
    pub swizzle: i32,
    pub l2_promotion: i32,
    pub oob_fill: i32,
}

impl Request {
    /// Whether the manager answers this request with a reply.
    pub fn answered(&self) -> bool {
        !matches!(self, Request::Launch { .. })
    }
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub enum Reply {
    Hello {
        tenant: u32,
        partition_base: u64,
        partition_size: u64,
    },
    Done,
    Pointer(u64),
    Bytes(Vec<u8>),
    Module(u64),
    Event(u64),
    Global {
        ptr: u64,
        bytes: u64,
    },
    Value(i64),
    Float(f32),
    Text(String),
    MemInfo {
        free: u64,
        total: u64,
    },
    /// A function's handle and its parameters' (offset, size) in the packed buffer.
    Function {
        handle: u64,
        params: Vec<(u32, u32)>,
    },
    /// The call failed: the CUDA error code the tenant's caller gets, and why in words (for
    /// the tenant's report).
    Error {
        code: i32,
        message: String,
    },
    Status(Vec<TenantStatus>),
}

/// One tenant as `gpusan serve --status` shows it.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct TenantStatus {
    pub tenant: u32,
    pub name: String,
    pub pid: u32,
    pub partition_base: u64,
    pub partition_size: u64,
    /// Bytes of live allocations (rounded as placed).
    pub used: u64,
    /// 2 MiB chunks of real memory (the rest of the partition is its sink).
    pub real_chunks: u64,
    pub modules: u64,
    pub launches: u64,
    pub refused: u64,
    /// Runs unfenced machine code (`gpusan serve --allow-native`): the GPU's only tenant.
    pub native: bool,
}

/// Why a frame could not be read.
#[derive(Debug, Error)]
pub enum FrameError {
    #[error("the peer closed the connection")]
    Closed,
    #[error("a frame of {len} bytes announced: more than the {MAX_FRAME} allowed")]
    TooLarge { len: u32 },
    #[error("the connection ended {missing} bytes before the end of a {len}-byte frame")]
    Truncated { len: u32, missing: usize },
    #[error("a {len}-byte frame does not decode: {why}")]
    Decode { len: u32, why: String },
    #[error("the connection failed: {0}")]
    Io(#[from] io::Error),
}

/// Writes `message` as one frame.
pub fn write_frame<T: Serialize>(w: &mut impl Write, message: &T) -> io::Result<()> {
    // One write: a frame is never interleaved with another writer's, and costs one system call.
    let mut frame = Vec::new();
    append_frame(&mut frame, message)?;
    w.write_all(&frame)?;
    w.flush()
}

/// Appends `message` as one frame to `buf` (a sender gathering frames to write at once);
/// on an error `buf` is left as it was.
pub fn append_frame<T: Serialize>(buf: &mut Vec<u8>, message: &T) -> io::Result<()> {
    /// `buf`, extended in place by the encoder (which takes its writer by value).
    struct Tail<'a>(&'a mut Vec<u8>);
    impl Extend<u8> for Tail<'_> {
        fn extend<I: IntoIterator<Item = u8>>(&mut self, bytes: I) {
            self.0.extend(bytes);
        }
    }
    let at = buf.len();
    buf.extend_from_slice(&[0; 4]);
    let encoded = postcard::to_extend(message, Tail(buf)).map(|_| ()).map_err(|e| e.to_string());
    let body = buf.len() - at - 4;
    let len = encoded.and_then(|()| {
        u32::try_from(body).ok().filter(|&l| l <= MAX_FRAME).ok_or_else(|| format!("a message of {body} bytes"))
    });
    match len {
        Ok(len) => {
            buf[at..at + 4].copy_from_slice(&len.to_le_bytes());
            Ok(())
        }
        Err(why) => {
            buf.truncate(at);
            Err(io::Error::new(io::ErrorKind::InvalidInput, why))
        }
    }
}

/// Reads one frame and decodes it.
pub fn read_frame<T: for<'de> Deserialize<'de>>(r: &mut impl Read) -> Result<T, FrameError> {
    let mut header = [0u8; 4];
    let got = read_full(r, &mut header)?;
    if got == 0 {
        return Err(FrameError::Closed);
    }
    if got < 4 {
        return Err(FrameError::Truncated { len: 4, missing: 4 - got });
    }
    let len = u32::from_le_bytes(header);
    if len > MAX_FRAME {
        return Err(FrameError::TooLarge { len });
    }
    let mut body = vec![0u8; len as usize];
    let got = read_full(r, &mut body)?;
    if got < body.len() {
        return Err(FrameError::Truncated { len, missing: body.len() - got });
    }
    postcard::from_bytes(&body).map_err(|e| FrameError::Decode { len, why: e.to_string() })
}

/// How long a side of the connection watches for the other's next frame before it blocks
/// in a read (`spin_until_readable`): a blocked read is woken by the kernel some
/// microseconds after the frame arrives, on each side, at each round trip, which a program
/// that waits for every kernel pays twice per kernel.
pub const SPIN: std::time::Duration = std::time::Duration::from_micros(50);

/// Watches `fd` for up to `spin` for something to read, without blocking: returns as soon
/// as there is (or the time is up; the caller then reads, blocking).
pub fn spin_until_readable(fd: std::os::fd::RawFd, spin: std::time::Duration) {
    if spin.is_zero() {
        return;
    }
    let start = std::time::Instant::now();
    loop {
        let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        // SAFETY: one pollfd of ours; a zero timeout never blocks.
        if unsafe { libc::poll(&mut p, 1, 0) } != 0 || start.elapsed() >= spin {
            return;
        }
        std::hint::spin_loop();
    }
}

/// Reads until `buf` is full or the stream ends; the bytes read.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut at = 0;
    while at < buf.len() {
        match r.read(&mut buf[at..]) {
            Ok(0) => break,
            Ok(n) => at += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn round_trip(r: &Request) -> Request {
        let mut buf = Vec::new();
        write_frame(&mut buf, r).unwrap();
        read_frame(&mut buf.as_slice()).unwrap()
    }

    #[test]
    fn every_request_kind_survives_a_round_trip() {
        let all = [
            Request::Hello { version: VERSION, pid: 7, name: "app".into(), memory_log2: 30 },
            Request::MemAlloc { bytes: 4096 },
            Request::MemFree { ptr: 1 << 40 },
            Request::CopyHtoD { dst: 5, data: vec![1, 2, 3] },
            Request::CopyDtoH { src: 5, bytes: 3 },
            Request::MemsetD8 { dst: 9, value: 0xab, count: 100 },
            Request::ModuleLoad { image: b".version 8.0".to_vec() },
            Request::ModuleUnload { module: 3 },
            Request::GetFunction { module: 3, name: "k".into() },
            Request::Launch { function: 4, grid: [1, 2, 3], block: [32, 1, 1], shared: 0, params: vec![0; 16] },
            Request::Synchronize,
            Request::Status,
        ];
        for r in &all {
            assert_eq!(&round_trip(r), r);
        }
    }

    /// Frames gathered in one buffer (a tenant's queued launches) read back one by one, in
    /// order; one too large to send leaves the buffer as it was.
    #[test]
    fn frames_appended_to_one_buffer_read_back_in_order_and_a_refused_one_adds_nothing() {
        let a = Request::Launch { function: 4, grid: [1, 1, 1], block: [32, 1, 1], shared: 0, params: vec![1; 8] };
        let b = Request::Synchronize;
        let mut buf = Vec::new();
        append_frame(&mut buf, &a).unwrap();
        append_frame(&mut buf, &b).unwrap();
        let before = buf.clone();
        let huge = Request::CopyHtoD { dst: 0, data: vec![0; MAX_FRAME as usize + 1] };
        assert!(append_frame(&mut buf, &huge).is_err());
        assert_eq!(buf, before);
        let mut r = buf.as_slice();
        assert_eq!(read_frame::<Request>(&mut r).unwrap(), a);
        assert_eq!(read_frame::<Request>(&mut r).unwrap(), b);
        assert!(matches!(read_frame::<Request>(&mut r), Err(FrameError::Closed)));
    }

    #[test]
    fn a_closed_connection_and_a_short_frame_are_told_apart() {
        assert!(matches!(read_frame::<Request>(&mut [].as_slice()), Err(FrameError::Closed)));
        assert!(matches!(
            read_frame::<Request>(&mut [5u8, 0].as_slice()),
            Err(FrameError::Truncated { len: 4, missing: 2 })
        ));
        let mut buf = Vec::new();
        write_frame(&mut buf, &Request::MemAlloc { bytes: 1 << 33 }).unwrap();
        buf.pop();
        assert!(matches!(read_frame::<Request>(&mut buf.as_slice()), Err(FrameError::Truncated { missing: 1, .. })));
    }

    #[test]
    fn an_announced_length_past_the_limit_is_refused_before_anything_is_allocated() {
        let frame = (MAX_FRAME + 1).to_le_bytes();
        assert!(matches!(read_frame::<Request>(&mut frame.as_slice()), Err(FrameError::TooLarge { .. })));
    }

    proptest! {
        /// Garbage never panics the reader: it is a located error or some message.
        #[test]
        fn any_bytes_read_as_an_error_or_a_message(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = read_frame::<Request>(&mut bytes.as_slice());
        }
    }

    #[test]
    fn spinning_returns_when_there_is_something_to_read_or_the_time_is_up() {
        use std::os::fd::AsRawFd;
        use std::time::{Duration, Instant};
        let (mut a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let t = Instant::now();
        super::spin_until_readable(b.as_raw_fd(), Duration::from_millis(20));
        assert!(t.elapsed() >= Duration::from_millis(20), "nothing to read: the whole spin");
        a.write_all(b"x").unwrap();
        let t = Instant::now();
        super::spin_until_readable(b.as_raw_fd(), Duration::from_secs(5));
        assert!(t.elapsed() < Duration::from_secs(1), "a byte waiting: at once");
        let t = Instant::now();
        super::spin_until_readable(b.as_raw_fd(), Duration::ZERO);
        assert!(t.elapsed() < Duration::from_millis(100));
    }
}
