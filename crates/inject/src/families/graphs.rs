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
//! Memory a graph allocates and the program frees outside it (`cuMemFree`,
//! `cuMemFreeAsync`) comes back, at the same address, at the graph's next launch: so each
//! instantiation reads the allocation nodes of its graph from the driver (however they were
//! made: added, captured, cloned, in child graphs) and each launch makes them live again.
//! Reading them at instantiation rather than trusting what gpusan saw at node creation
//! also covers nodes made by entry points it does not hook (`cuGraphAddNode`).
//!
//! Launching a graph is a launch (`launches`), which calls [`launching`] first.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void};

use gpusan_runtime::per_process::PerProcess;
use gpusan_runtime::registry::{AllocKind, Lookup, SiteId};

use super::judge::{record_alloc, site};
use crate::driver::hook::hooks;
use crate::driver::{
    real, CUdevice, CUdeviceptr, CUgraph, CUgraphExec, CUgraphNode, CUresult, CUstream, CUstreamCaptureStatus,
    MemAllocNodeParams, CUDA_SUCCESS,
};
use crate::state::{quietly, state};

hooks! {
    fn cuGraphAddMemAllocNode(node: *mut CUgraphNode, graph: CUgraph, deps: *const CUgraphNode, n: usize, params: *mut MemAllocNodeParams)
        => |real| graph_add_mem_alloc_node(real, node, graph, deps, n, params);
    fn cuGraphAddMemFreeNode(node: *mut CUgraphNode, graph: CUgraph, deps: *const CUgraphNode, n: usize, dptr: CUdeviceptr)
        => |real| graph_add_mem_free_node(real, node, graph, deps, n, dptr);
    fn cuGraphDestroy(graph: CUgraph) => |real| graph_destroy(real, graph);
    fn cuDeviceGraphMemTrim(device: CUdevice) => |real| device_graph_mem_trim(real, device);
    fn cuGraphInstantiateWithFlags(exec: *mut CUgraphExec, graph: CUgraph, flags: u64)
        => |real| instantiated(real(exec, graph, flags), exec, graph);
    fn cuGraphInstantiateWithParams(exec: *mut CUgraphExec, graph: CUgraph, params: *mut c_void)
        => |real| instantiated(real(exec, graph, params), exec, graph);
    fn cuGraphInstantiateWithParams_ptsz(exec: *mut CUgraphExec, graph: CUgraph, params: *mut c_void)
        => |real| instantiated(real(exec, graph, params), exec, graph);
    fn cuGraphInstantiate(exec: *mut CUgraphExec, graph: CUgraph, error_node: *mut CUgraphNode, log: *mut c_char, size: usize)
        => |real| instantiated(real(exec, graph, error_node, log, size), exec, graph);
    fn cuGraphInstantiate_v2(exec: *mut CUgraphExec, graph: CUgraph, error_node: *mut CUgraphNode, log: *mut c_char, size: usize)
        => |real| instantiated(real(exec, graph, error_node, log, size), exec, graph);
    fn cuGraphExecDestroy(exec: CUgraphExec) => |real| exec_destroy(real, exec);
}

#[derive(Default)]
struct GraphMemory {
    /// Graph → bases and sizes of the allocations its nodes made, as gpusan saw them made.
    allocs: HashMap<u64, Vec<(u64, u64)>>,
    /// Graph → bases its free nodes free.
    frees: HashMap<u64, Vec<u64>>,
    /// Executable graph → the allocations each of its launches makes.
    execs: HashMap<u64, Vec<(u64, u64)>>,
    /// Base → where the program made the node (reports name it, not the launch).
    sites: HashMap<u64, SiteId>,
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
    graphs(|g| {
        g.allocs.entry(graph).or_default().push((base, size));
        g.sites.insert(base, site);
    });
}

/// Before a launch of `exec`: its allocations are there again, whatever the program freed
/// since the last launch (an allocation the registry already has live is left as it is).
pub fn launching(exec: CUgraphExec) {
    let Some((allocs, sites)) = graphs(|g| {
        let allocs = g.execs.get(&(exec as u64))?.clone();
        let sites: Vec<Option<SiteId>> = allocs.iter().map(|(b, _)| g.sites.get(b).copied()).collect();
        Some((allocs, sites))
    }) else {
        return;
    };
    let registry = &state().registry;
    for ((base, size), made_at) in allocs.into_iter().zip(sites) {
        let live =
            matches!(registry.lookup(base), Lookup::Live { alloc, .. } if alloc.base == base && alloc.size == size);
        if !live {
            record_alloc(base, size, AllocKind::GraphNode, made_at.unwrap_or_else(site));
        }
    }
}

/// A graph's allocation nodes (base, size), child graphs' included, as the driver has them;
/// `None` where the driver cannot list them.
fn allocation_nodes(graph: CUgraph) -> Option<Vec<(u64, u64)>> {
    const CHILD_GRAPH: c_int = 4;
    const MEM_ALLOC: c_int = 10;
    // Child graphs nest; a cycle is impossible, a very deep nest is not worth following.
    const MAX_DEPTH: usize = 16;
    let (get_nodes, get_type, get_alloc) =
        (real::cuGraphGetNodes()?, real::cuGraphNodeGetType()?, real::cuGraphMemAllocNodeGetParams()?);
    let child_of = real::cuGraphChildGraphNodeGetGraph();
    let mut found = Vec::new();
    let mut pending = vec![(graph, 0usize)];
    while let Some((graph, depth)) = pending.pop() {
        let mut n = 0usize;
        // SAFETY: the driver's functions, with the arguments its API describes.
        unsafe {
            if get_nodes(graph, std::ptr::null_mut(), &mut n) != CUDA_SUCCESS {
                return None;
            }
            let mut nodes: Vec<CUgraphNode> = vec![std::ptr::null_mut(); n];
            if n > 0 && get_nodes(graph, nodes.as_mut_ptr(), &mut n) != CUDA_SUCCESS {
                return None;
            }
            nodes.truncate(n);
            for node in nodes {
                let mut kind: c_int = -1;
                if get_type(node, &mut kind) != CUDA_SUCCESS {
                    continue;
                }
                if kind == MEM_ALLOC {
                    let mut p: MemAllocNodeParams = std::mem::zeroed();
                    if get_alloc(node, &mut p) == CUDA_SUCCESS && p.dptr != 0 && p.bytesize != 0 {
                        found.push((p.dptr, p.bytesize as u64));
                    }
                } else if kind == CHILD_GRAPH && depth < MAX_DEPTH {
                    let mut child: CUgraph = std::ptr::null_mut();
                    if let Some(f) = child_of {
                        if f(node, &mut child) == CUDA_SUCCESS && !child.is_null() {
                            pending.push((child, depth + 1));
                        }
                    }
                }
            }
        }
    }
    Some(found)
}

/// After an instantiation: what each launch of the executable graph allocates, from the
/// driver's nodes, or else from the nodes gpusan saw made.
unsafe fn instantiated(r: CUresult, exec: *mut CUgraphExec, graph: CUgraph) -> CUresult {
    if r == CUDA_SUCCESS && !exec.is_null() {
        let exec = *exec as u64;
        quietly(|| {
            let listed = allocation_nodes(graph);
            graphs(|g| {
                let allocs = listed.unwrap_or_else(|| g.allocs.get(&(graph as u64)).cloned().unwrap_or_default());
                g.execs.insert(exec, allocs);
            })
        });
    }
    r
}

unsafe fn exec_destroy(real: unsafe extern "C" fn(CUgraphExec) -> CUresult, exec: CUgraphExec) -> CUresult {
    let r = real(exec);
    if r == CUDA_SUCCESS {
        quietly(|| graphs(|g| g.execs.remove(&(exec as u64))));
    }
    r
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
            for (base, _) in allocs.iter().filter(|(b, _)| frees.contains(b)) {
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
