//! Graph memory: allocation and free nodes (added explicitly or by stream-ordered calls
//! under capture), graph destruction and the trimming of graph memory.
//!
//! A graph's allocation is registered when its node is made (the node's parameters give
//! address and size) and stays live across launches: a free node gives the memory back at
//! the end of each launch, and the next launch allocates it again at the same address, so
//! marking it freed at node creation would turn every later launch into use after free.
//! Its entry goes when the graph is destroyed (for allocations the graph itself frees) or,
//! once freed by the program, when the device's graph memory is trimmed.
//!
//! Launching a graph is a launch (`launches`).

use gpusan_runtime::per_process::PerProcess;
use gpusan_runtime::registry::{AllocKind, Lookup, SiteId};

use super::judge::{record_alloc, site};
use crate::driver::hook::hooks;
use crate::driver::{
    real, CUdevice, CUdeviceptr, CUgraph, CUgraphNode, CUresult, CUstream, CUstreamCaptureStatus, MemAllocNodeParams,
    CUDA_SUCCESS,
};
use crate::state::{quietly, state};

hooks! {
    fn cuGraphAddMemAllocNode(node: *mut CUgraphNode, graph: CUgraph, deps: *const CUgraphNode, n: usize, params: *mut MemAllocNodeParams)
        => |real| graph_add_mem_alloc_node(real, node, graph, deps, n, params);
    fn cuGraphAddMemFreeNode(node: *mut CUgraphNode, graph: CUgraph, deps: *const CUgraphNode, n: usize, dptr: CUdeviceptr)
        => |real| graph_add_mem_free_node(real, node, graph, deps, n, dptr);
    fn cuGraphDestroy(graph: CUgraph) => |real| graph_destroy(real, graph);
    fn cuDeviceGraphMemTrim(device: CUdevice) => |real| device_graph_mem_trim(real, device);
}

#[derive(Default)]
struct GraphMemory {
    /// Graph → bases of the allocations its nodes made.
    allocs: std::collections::HashMap<u64, Vec<u64>>,
    /// Graph → bases its free nodes free.
    frees: std::collections::HashMap<u64, Vec<u64>>,
}

static GRAPHS: PerProcess<std::sync::Mutex<Option<GraphMemory>>> = PerProcess::new(|| std::sync::Mutex::new(None));

fn graphs<R>(f: impl FnOnce(&mut GraphMemory) -> R) -> R {
    let mut g = GRAPHS.get().lock().unwrap_or_else(|p| p.into_inner());
    f(g.get_or_insert_with(GraphMemory::default))
}

/// The graph `stream` is being captured into, if it is (0 when the driver does not say
/// which graph).
pub fn capturing(stream: CUstream) -> Option<u64> {
    const ACTIVE: CUstreamCaptureStatus = 1;
    let (mut status, mut graph): (CUstreamCaptureStatus, CUgraph) = (0, std::ptr::null_mut());
    unsafe {
        if let Some(info) = real::cuStreamGetCaptureInfo_v2() {
            let (mut id, mut deps, mut n) = (0u64, std::ptr::null(), 0usize);
            if info(stream, &mut status, &mut id, &mut graph, &mut deps, &mut n) != CUDA_SUCCESS {
                return None;
            }
        } else {
            let is = real::cuStreamIsCapturing()?;
            if is(stream, &mut status) != CUDA_SUCCESS {
                return None;
            }
        }
    }
    (status == ACTIVE).then_some(graph as u64)
}

/// A graph allocation at `base` (a node made, or a stream-ordered allocation captured).
pub fn graph_alloc(graph: u64, base: u64, size: u64, site: SiteId) {
    record_alloc(base, size, AllocKind::GraphNode, site);
    graphs(|g| g.allocs.entry(graph).or_default().push(base));
}

/// A free node of `graph` frees `base` (not now: at the end of each launch).
pub fn graph_frees(graph: u64, base: u64) {
    graphs(|g| g.frees.entry(graph).or_default().push(base));
}

unsafe fn graph_add_mem_alloc_node(
    real: unsafe extern "C" fn(
        *mut CUgraphNode,
        CUgraph,
        *const CUgraphNode,
        usize,
        *mut MemAllocNodeParams,
    ) -> CUresult,
    node: *mut CUgraphNode,
    graph: CUgraph,
    deps: *const CUgraphNode,
    n: usize,
    params: *mut MemAllocNodeParams,
) -> CUresult {
    let r = real(node, graph, deps, n, params);
    if r == CUDA_SUCCESS && !params.is_null() {
        let (base, size) = ((*params).dptr, (*params).bytesize as u64);
        quietly(|| graph_alloc(graph as u64, base, size, site()));
    }
    r
}

unsafe fn graph_add_mem_free_node(
    real: unsafe extern "C" fn(*mut CUgraphNode, CUgraph, *const CUgraphNode, usize, CUdeviceptr) -> CUresult,
    node: *mut CUgraphNode,
    graph: CUgraph,
    deps: *const CUgraphNode,
    n: usize,
    dptr: CUdeviceptr,
) -> CUresult {
    let r = real(node, graph, deps, n, dptr);
    if r == CUDA_SUCCESS {
        // Not freed now: the memory is freed at the end of each launch and comes back at
        // the next one.
        quietly(|| graph_frees(graph as u64, dptr));
    }
    r
}

unsafe fn graph_destroy(real: unsafe extern "C" fn(CUgraph) -> CUresult, graph: CUgraph) -> CUresult {
    let r = real(graph);
    if r == CUDA_SUCCESS {
        quietly(|| {
            let (allocs, frees) = graphs(|g| {
                (
                    g.allocs.remove(&(graph as u64)).unwrap_or_default(),
                    g.frees.remove(&(graph as u64)).unwrap_or_default(),
                )
            });
            // What the graph allocated and frees itself is gone with it; what it allocated
            // without freeing outlives it until the program frees it.
            for base in allocs.iter().filter(|b| frees.contains(b)) {
                if let Lookup::Live { alloc, .. } = state().registry.lookup(*base) {
                    if alloc.base == *base && alloc.kind == AllocKind::GraphNode {
                        state().registry.forget(*base);
                    }
                }
            }
        });
    }
    r
}

unsafe fn device_graph_mem_trim(real: unsafe extern "C" fn(CUdevice) -> CUresult, device: CUdevice) -> CUresult {
    let r = real(device);
    if r == CUDA_SUCCESS {
        quietly(|| {
            let st = state();
            for a in st.registry.snapshot() {
                if a.kind == AllocKind::GraphNode && !a.is_live() && a.device == device {
                    st.registry.forget(a.base);
                }
            }
        });
    }
    r
}
