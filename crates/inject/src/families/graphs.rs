//! Graph memory: allocation and free nodes (added explicitly, by `cuGraphAddNode`, or by
//! stream-ordered calls under capture), instantiations, launches, and the destruction of
//! graphs and executable graphs.
//!
//! A graph's allocation node has one address for its whole life (the driver gives it when
//! the node is made), and each launch allocates the memory there again. The allocation is
//! then freed by a free node of the same graph (at the end of every launch), by a free node
//! of another graph (at that graph's launch), by the program outside any graph (`cuMemFree`,
//! `cuMemFreeAsync`: judged like any free), or never. So gpusan registers it when the node
//! is made (copies captured into the graph are judged against it), learns each
//! instantiation's allocation and free nodes from the driver (however they were made:
//! added, captured, by `cuGraphAddNode`, in child graphs), makes the allocations live again
//! at each launch ([`launching`]) and frees what the graph frees of other graphs' after it
//! ([`launched`], `memory::freed_by_graph_launch`).
//!
//! Memory a graph frees itself stays live as long as the graph or an executable graph of it
//! exists: its free node runs on the GPU at a time the host does not know, and the next
//! launch brings the memory back. Such memory, and that of nodes no launch ran, is the
//! graph's: forgotten once neither the graph nor an executable graph of it is left, and
//! never a leak. Memory a launch allocated and no node frees is the program's: the driver
//! does not free it with its graph, so it stays until the program frees it, and at the exit
//! it is a leak, as `cudaMalloc` memory would be. Trimming graph memory
//! (`cuDeviceGraphMemTrim`) only gives unused physical memory back: the addresses stay the
//! nodes', so it changes nothing here.
//!
//! Launching a graph is a launch (`launches`), which calls [`launching`] and [`launched`].

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void};

use gpusan_runtime::per_process::PerProcess;
use gpusan_runtime::registry::{AllocKind, Lookup, SiteId};

use super::judge::{record_alloc, site};
use crate::driver::hook::hooks;
use crate::driver::{
    real, CUdeviceptr, CUgraph, CUgraphExec, CUgraphNode, CUresult, CUstream, CUstreamCaptureStatus,
    MemAllocNodeParams, CUDA_SUCCESS,
};
use crate::state::{quietly, state};

hooks! {
    fn cuGraphAddMemAllocNode(node: *mut CUgraphNode, graph: CUgraph, deps: *const CUgraphNode, n: usize, params: *mut MemAllocNodeParams)
        => |real| graph_add_mem_alloc_node(real, node, graph, deps, n, params);
    fn cuGraphAddMemFreeNode(node: *mut CUgraphNode, graph: CUgraph, deps: *const CUgraphNode, n: usize, dptr: CUdeviceptr)
        => |real| graph_add_mem_free_node(real, node, graph, deps, n, dptr);
    fn cuGraphDestroy(graph: CUgraph) => |real| graph_destroy(real, graph);
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

/// One graph allocation, by its node's address.
#[derive(Clone, Copy)]
struct GraphAlloc {
    size: u64,
    /// Where the program made the node, or instantiated its graph (reports name it, not a
    /// launch).
    site: SiteId,
    /// The graph whose node it is, while that graph exists.
    graph: Option<u64>,
    /// A free node of its own graph frees it at the end of each launch.
    freed_by_own_graph: bool,
    /// A launch has allocated it.
    launched: bool,
}

impl GraphAlloc {
    /// Memory the graph keeps to itself: never the program's to free, never a leak.
    fn graphs_own(&self) -> bool {
        self.freed_by_own_graph || !self.launched
    }
}

/// What one executable graph's launches allocate and free.
#[derive(Clone, Default)]
struct ExecMemory {
    allocs: Vec<u64>,
    /// Allocations of other graphs that its free nodes free.
    frees: Vec<u64>,
}

#[derive(Default)]
struct GraphMemory {
    allocs: HashMap<u64, GraphAlloc>,
    /// Graph → the addresses its free nodes free, as gpusan saw the nodes made.
    frees: HashMap<u64, Vec<u64>>,
    execs: HashMap<u64, ExecMemory>,
}

static GRAPHS: PerProcess<std::sync::Mutex<Option<GraphMemory>>> = PerProcess::new(|| std::sync::Mutex::new(None));

/// gpusan's record of graph memory. Never held while the registry or the driver is called.
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
    let node = GraphAlloc { size, site, graph: Some(graph), freed_by_own_graph: false, launched: false };
    graphs(|g| g.allocs.insert(base, node));
}

/// A free node of `graph` frees `base` (not now: at the end of each launch).
pub fn graph_frees(graph: u64, base: u64) {
    graphs(|g| {
        g.frees.entry(graph).or_default().push(base);
        if let Some(a) = g.allocs.get_mut(&base).filter(|a| a.graph == Some(graph)) {
            a.freed_by_own_graph = true;
        }
    });
}

/// Before a launch of `exec`: its allocations are there again, whatever the program freed
/// since the last launch (an allocation the registry already has live is left as it is).
pub fn launching(exec: CUgraphExec) {
    let Some(allocs) = graphs(|g| {
        let e = g.execs.get(&(exec as u64))?;
        let mut allocs = Vec::with_capacity(e.allocs.len());
        for base in &e.allocs {
            if let Some(a) = g.allocs.get_mut(base) {
                a.launched = true;
                allocs.push((*base, *a));
            }
        }
        Some(allocs)
    }) else {
        return;
    };
    let registry = &state().registry;
    for (base, a) in allocs {
        let live = matches!(registry.lookup(base), Lookup::Live { alloc, .. }
            if alloc.base == base && alloc.size == a.size && alloc.kind == AllocKind::GraphNode);
        if !live {
            record_alloc(base, a.size, AllocKind::GraphNode, a.site);
        }
    }
}

/// After a launch of `exec` that returned `r`: what its free nodes freed of other graphs'
/// memory (to be judged as a free would be: `memory::freed_by_graph_launch`).
pub fn launched(exec: CUgraphExec, r: CUresult) -> Vec<u64> {
    if r != CUDA_SUCCESS {
        return Vec::new();
    }
    graphs(|g| g.execs.get(&(exec as u64)).map(|e| e.frees.clone())).unwrap_or_default()
}

/// A graph's memory nodes, child graphs' included.
#[derive(Default)]
struct MemoryNodes {
    /// Allocations: base and size.
    allocs: Vec<(u64, u64)>,
    /// What free nodes free.
    frees: Vec<u64>,
}

/// A graph's memory nodes as the driver has them; `None` where it cannot list them.
fn memory_nodes(graph: CUgraph) -> Option<MemoryNodes> {
    const CHILD_GRAPH: c_int = 4;
    const MEM_ALLOC: c_int = 10;
    const MEM_FREE: c_int = 11;
    // Child graphs nest; a cycle is impossible, a very deep nest is not worth following.
    const MAX_DEPTH: usize = 16;
    let (get_nodes, get_type, get_alloc, get_free) = (
        real::cuGraphGetNodes()?,
        real::cuGraphNodeGetType()?,
        real::cuGraphMemAllocNodeGetParams()?,
        real::cuGraphMemFreeNodeGetParams()?,
    );
    let child_of = real::cuGraphChildGraphNodeGetGraph();
    let mut found = MemoryNodes::default();
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
                        found.allocs.push((p.dptr, p.bytesize as u64));
                    }
                } else if kind == MEM_FREE {
                    let mut dptr: CUdeviceptr = 0;
                    if get_free(node, &mut dptr) == CUDA_SUCCESS && dptr != 0 {
                        found.frees.push(dptr);
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

/// What each launch of an executable graph of `graph` allocates and frees, from the
/// driver's nodes (`listed`), or else from the nodes gpusan saw made; the graph's
/// allocations gpusan had not seen made (by `cuGraphAddNode`, in a child graph) are
/// learnt here, made at `site`.
fn learn(g: &mut GraphMemory, graph: u64, listed: Option<MemoryNodes>, site: SiteId) -> ExecMemory {
    let MemoryNodes { allocs, frees } = listed.unwrap_or_else(|| MemoryNodes {
        allocs: g.allocs.iter().filter(|(_, a)| a.graph == Some(graph)).map(|(b, a)| (*b, a.size)).collect(),
        frees: g.frees.get(&graph).cloned().unwrap_or_default(),
    });
    let mut exec = ExecMemory::default();
    for (base, size) in allocs {
        let new = GraphAlloc { size, site, graph: None, freed_by_own_graph: false, launched: false };
        let a = g.allocs.entry(base).or_insert(new);
        if a.size != size {
            *a = new; // an address a destroyed graph's node had
        }
        a.graph = Some(graph);
        a.freed_by_own_graph = frees.contains(&base);
        exec.allocs.push(base);
    }
    exec.frees = frees.into_iter().filter(|b| !exec.allocs.contains(b)).collect();
    exec
}

/// After an instantiation: what each launch of the executable graph allocates and frees.
unsafe fn instantiated(r: CUresult, exec: *mut CUgraphExec, graph: CUgraph) -> CUresult {
    if r == CUDA_SUCCESS && !exec.is_null() {
        let exec = *exec as u64;
        quietly(|| {
            let (listed, site) = (memory_nodes(graph), site());
            graphs(|g| {
                let memory = learn(g, graph as u64, listed, site);
                g.execs.insert(exec, memory);
            })
        });
    }
    r
}

/// Forgets what gpusan knows of the allocations at `bases` that neither a graph nor an
/// executable graph holds any more; of those the graph kept to itself, the registry's
/// entries too (the program holds the others, or has freed them).
fn release(bases: Vec<u64>) {
    let gone: Vec<u64> = graphs(|g| {
        let held = |g: &GraphMemory, b: &u64| {
            g.allocs.get(b).is_some_and(|a| a.graph.is_some()) || g.execs.values().any(|e| e.allocs.contains(b))
        };
        let free: Vec<u64> = bases.into_iter().filter(|b| !held(g, b)).collect();
        free.into_iter().filter_map(|b| g.allocs.remove(&b).filter(GraphAlloc::graphs_own).map(|_| b)).collect()
    });
    gone.into_iter().for_each(forget);
}

/// Forgets the registry's entry of graph memory at `base`.
fn forget(base: u64) {
    let registry = &state().registry;
    if let Lookup::Live { alloc, .. } | Lookup::Freed { alloc, .. } = registry.lookup(base) {
        if alloc.base == base && alloc.kind == AllocKind::GraphNode {
            registry.forget(base);
        }
    }
}

/// Before the leak check at exit: memory graphs keep to themselves is not the program's.
pub fn before_leak_check() {
    let own: Vec<u64> = graphs(|g| g.allocs.iter().filter(|(_, a)| a.graphs_own()).map(|(b, _)| *b).collect());
    own.into_iter().for_each(forget);
}

unsafe fn exec_destroy(real: unsafe extern "C" fn(CUgraphExec) -> CUresult, exec: CUgraphExec) -> CUresult {
    let r = real(exec);
    if r == CUDA_SUCCESS {
        quietly(|| {
            let allocs = graphs(|g| g.execs.remove(&(exec as u64)).map(|e| e.allocs).unwrap_or_default());
            release(allocs);
        });
    }
    r
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
            let graph = graph as u64;
            let allocs = graphs(|g| {
                g.frees.remove(&graph);
                let mut mine = Vec::new();
                for (base, a) in g.allocs.iter_mut().filter(|(_, a)| a.graph == Some(graph)) {
                    a.graph = None;
                    mine.push(*base);
                }
                mine
            });
            release(allocs);
        });
    }
    r
}
