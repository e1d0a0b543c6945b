//! Streams and events: stream capture (while a stream captures, gpusan's own driver calls
//! must not break it: see `capture`), the synchronizations after which what kernels
//! wrote is final (`routes::after_sync`), the queries, through which a program may learn of
//! a GPU fault, and a stream's end (its handle's events: see `ordered`).

use std::ffi::{c_int, c_void};

use crate::driver::hook::hooks;
use crate::driver::{CUevent, CUgraph, CUgraphNode, CUresult, CUstream};
use crate::routes::{after_stream_sync, after_sync, before_sync};
use crate::state::quietly;

hooks! {
    fn cuStreamBeginCapture(stream: CUstream) => |real| begin_capture(stream, || real(stream));
    fn cuStreamBeginCapture_ptsz(stream: CUstream) => |real| begin_capture(stream, || real(stream));
    fn cuStreamBeginCapture_v2(stream: CUstream, mode: c_int) => |real| begin_capture(stream, || real(stream, mode));
    fn cuStreamBeginCapture_v2_ptsz(stream: CUstream, mode: c_int) => |real| begin_capture(stream, || real(stream, mode));
    fn cuStreamBeginCaptureToGraph(stream: CUstream, graph: CUgraph, deps: *const CUgraphNode, data: *const c_void, n: usize, mode: c_int)
        => |real| begin_capture(stream, || real(stream, graph, deps, data, n, mode));
    fn cuStreamBeginCaptureToGraph_ptsz(stream: CUstream, graph: CUgraph, deps: *const CUgraphNode, data: *const c_void, n: usize, mode: c_int)
        => |real| begin_capture(stream, || real(stream, graph, deps, data, n, mode));
    fn cuStreamEndCapture(stream: CUstream, graph: *mut CUgraph) => |real| end_capture(stream, || real(stream, graph));
    fn cuStreamEndCapture_ptsz(stream: CUstream, graph: *mut CUgraph) => |real| end_capture(stream, || real(stream, graph));
    fn cuEventSynchronize(event: CUevent) => |real| event_synchronize(real, event);
    fn cuStreamSynchronize(stream: CUstream) => |real| stream_synchronize(real, stream);
    fn cuStreamSynchronize_ptsz(stream: CUstream) => |real| stream_synchronize(real, stream);
    // Forwarded untouched: how a program that polls (PyTorch's allocator with its events)
    // learns of a GPU fault, which every stand-in's result is checked for (`driver::fault`).
    fn cuStreamQuery(stream: CUstream);
    fn cuStreamQuery_ptsz(stream: CUstream);
    fn cuEventQuery(event: CUevent);
    fn cuStreamDestroy_v2(stream: CUstream) => |real| stream_destroy(real, stream);
    fn cuStreamDestroy(stream: CUstream) => |real| stream_destroy(real, stream);
}

/// `cuStreamBeginCapture*` on `stream`, made by `real`: from now on gpusan's own driver
/// calls take the capture-safe paths (see `capture`).
fn begin_capture(stream: CUstream, real: impl FnOnce() -> CUresult) -> CUresult {
    let r = real();
    quietly(|| crate::capture::began(stream, r));
    r
}

/// Work gpusan held back during captures (frees leaving quarantine) is done once the last
/// one ended.
fn end_capture(stream: CUstream, real: impl FnOnce() -> CUresult) -> CUresult {
    let r = real();
    quietly(|| {
        if crate::capture::ended(stream) {
            super::memory::after_captures();
        }
    });
    r
}

/// A stream's handle may be given to the next stream made: stream-ordered frees held back
/// stop sharing its event first (`ordered::stream_gone`).
unsafe fn stream_destroy(real: unsafe extern "C" fn(CUstream) -> CUresult, s: CUstream) -> CUresult {
    quietly(|| super::ordered::stream_gone(s));
    real(s)
}

unsafe fn stream_synchronize(real: unsafe extern "C" fn(CUstream) -> CUresult, s: CUstream) -> CUresult {
    let began = before_sync();
    after_stream_sync(real(s), s, began)
}

unsafe fn event_synchronize(real: unsafe extern "C" fn(CUevent) -> CUresult, e: CUevent) -> CUresult {
    after_sync(real(e))
}
