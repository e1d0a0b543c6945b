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
//! A free call outside the graph of memory its own graph frees is refused by the driver
//! (at any time: seen on the H100, driver 580, as a free before any launch is): a double
//! free, the graph's free node the first. `cuGraphExecUpdate` makes the executable graph
//! allocate at the updating graph's addresses from then on (seen on the H100 too: the old
//! address can no longer be freed), so it is learnt like an instantiation. cudart 13 makes
//! `cudaGraphAddMemAllocNode`'s nodes with `cuGraphAddMemAllocNode` and `cudaGraphAddNode`'s
//! with `cuGraphAddNode_v2`: both are watched, so reports name where the node was made.
//!
//! Launching a graph is a launch (`launches`), which calls [`launching`] and [`launched`]:
//! a launch the driver refuses (its graph's memory still allocated, say) allocated nothing.
//! The same listing of an instantiated graph gives its kernel nodes to the report's coverage
//! (`routes::coverage::graph_kernels`): each launch of the executable graph launches each.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void};

use gpusan_runtime::locks;
use gpusan_runtime::per_process::PerProcess;
use gpusan_runtime::registry::{AllocKind, Lookup, SiteId};

use super::judge::{record_alloc, site};
use crate::driver::hook::hooks;
use crate::driver::{
    real, CUdeviceptr, CUgraph, CUgraphExec, CUgraphNode, CUresult, CUstream, CUstreamCaptureStatus, GraphNodeParams,
    KernelNodeParams, MemAllocNodeParams, CUDA_SUCCESS,
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
    fn cuGraphExecUpdate(exec: CUgraphExec, graph: CUgraph, error_node: *mut CUgraphNode, result: *mut c_int)
        => |real| updated(real(exec, graph, error_node, result), exec, graph);
    fn cuGraphExecUpdate_v2(exec: CUgraphExec, graph: CUgraph, info: *mut c_void)
        => |real| updated(real(exec, graph, info), exec, graph);
    fn cuGraphAddNode(node: *mut CUgraphNode, graph: CUgraph, deps: *const CUgraphNode, n: usize, params: *mut GraphNodeParams)
        => |real| node_added(real(node, graph, deps, n, params), graph, params);
    fn cuGraphAddNode_v2(node: *mut CUgraphNode, graph: CUgraph, deps: *const CUgraphNode, edges: *const c_void, n: usize, params: *mut GraphNodeParams)
        => |real| node_added(real(node, graph, deps, edges, n, params), graph, params);
}

/// `CUgraphNodeType`s gpusan reads.
const KERNEL: c_int = 0;
const CHILD_GRAPH: c_int = 4;
const MEM_ALLOC: c_int = 10;
const MEM_FREE: c_int = 11;

/// One graph allocation, by its node's address.
#[derive(Clone, Copy)]
struct GraphAlloc {
    size: u64,
    /// Where the program made the node, or instantiated its graph (reports name it, not a
    /// launch).
    site: SiteId,
    /// The graph whose node it is, while that graph exists.
    graph: Option<u64>,
    /// Where the free node of its own graph that frees it at the end of each launch was made
    /// (or its graph instantiated), if it has one.
    freed_by_own_graph: Option<SiteId>,
    /// A launch has allocated it.
    launched: bool,
}

impl GraphAlloc {
    /// Memory the graph keeps to itself: never the program's to free, never a leak.
    fn graphs_own(&self) -> bool {
        self.freed_by_own_graph.is_some() || !self.launched
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
    /// Graph → the addresses its free nodes free and where each was made, as gpusan saw
    /// the nodes made.
    frees: HashMap<u64, Vec<(u64, SiteId)>>,
    execs: HashMap<u64, ExecMemory>,
}

static GRAPHS: PerProcess<std::sync::Mutex<Option<GraphMemory>>> = PerProcess::new(|| std::sync::Mutex::new(None));

/// gpusan's record of graph memory. Never held while the registry or the driver is called.
fn graphs<R>(f: impl FnOnce(&mut GraphMemory) -> R) -> R {
    let mut g = locks::lock(GRAPHS.get());
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
    if crate::routes::canary::active() {
        crate::routes::canary::unguarded("graph memory (made under capture)");
    }
    let node = GraphAlloc { size, site, graph: Some(graph), freed_by_own_graph: None, launched: false };
    graphs(|g| g.allocs.insert(base, node));
}

/// A free node of `graph`, made at `site`, frees `base` (not now: at the end of each launch).
pub fn graph_frees(graph: u64, base: u64, site: SiteId) {
    graphs(|g| {
        g.frees.entry(graph).or_default().push((base, site));
        if let Some(a) = g.allocs.get_mut(&base).filter(|a| a.graph == Some(graph)) {
            a.freed_by_own_graph = Some(site);
        }
    });
}

/// Where the free node is, when `base` is memory its own graph frees: the driver refuses
/// any free call of it outside the graph.
pub fn freed_by_own_graph(base: u64) -> Option<SiteId> {
    graphs(|g| g.allocs.get(&base).and_then(|a| a.freed_by_own_graph))
}

/// A launch under way, for [`launched`].
pub struct Launch {
    exec: u64,
    /// Allocations [`launching`] made live again, and where the program had freed each.
    revived: Vec<(u64, SiteId)>,
}

/// What the registry must record after a launch (`memory::after_graph_launch`).
pub enum AfterLaunch {
    /// It went through: memory of other graphs its free nodes freed (judged as frees).
    Freed(Vec<u64>),
    /// The driver refused it: what [`launching`] made live again, to be freed as the
    /// program had freed it (where).
    Refused(Vec<(u64, SiteId)>),
}

/// Before a launch of `exec`: its allocations are there again, whatever the program freed
/// since the last launch (an allocation the registry already has live is left as it is).
/// `None` for a graph without memory nodes.
pub fn launching(exec: CUgraphExec) -> Option<Launch> {
    let exec = exec as u64;
    let allocs: Vec<(u64, GraphAlloc)> = graphs(|g| {
        let e = g.execs.get(&exec).filter(|e| !e.allocs.is_empty() || !e.frees.is_empty())?;
        Some(e.allocs.iter().filter_map(|b| g.allocs.get(b).map(|a| (*b, *a))).collect())
    })?;
    let registry = &state().registry;
    let mut revived = Vec::new();
    for (base, a) in allocs {
        match registry.lookup(base) {
            Lookup::Live { alloc, .. }
                if alloc.base == base && alloc.size == a.size && alloc.kind == AllocKind::GraphNode =>
            {
                continue
            }
            Lookup::Freed { alloc, .. } if alloc.base == base && alloc.kind == AllocKind::GraphNode => {
                revived.extend(alloc.free_site().map(|at| (base, at)))
            }
            _ => {}
        }
        record_alloc(base, a.size, AllocKind::GraphNode, a.site);
    }
    Some(Launch { exec, revived })
}

/// After the launch [`launching`] prepared, which returned `r`, on `stream`.
pub fn launched(launch: Launch, stream: CUstream, r: CUresult) -> AfterLaunch {
    if r != CUDA_SUCCESS {
        return AfterLaunch::Refused(launch.revived);
    }
    // Launched into a capturing stream, the graph became part of the capture: nothing ran.
    if crate::capture::any() && crate::capture::stream_is_capturing(stream) {
        return AfterLaunch::Freed(Vec::new());
    }
    graphs(|g| {
        let Some(e) = g.execs.get(&launch.exec) else { return AfterLaunch::Freed(Vec::new()) };
        for base in &e.allocs {
            if let Some(a) = g.allocs.get_mut(base) {
                a.launched = true;
            }
        }
        AfterLaunch::Freed(e.frees.clone())
    })
}

/// A graph's memory nodes, child graphs' included, and its kernel nodes.
#[derive(Default)]
struct MemoryNodes {
    /// Allocations: base and size.
    allocs: Vec<(u64, u64)>,
    /// What free nodes free.
    frees: Vec<u64>,
    /// The function (or library kernel) of each kernel node: what a launch runs, for the
    /// report's coverage.
    kernels: Vec<usize>,
}

/// A graph's memory nodes as the driver has them; `None` where it cannot list them.
fn memory_nodes(graph: CUgraph) -> Option<MemoryNodes> {
    // Child graphs nest; a cycle is impossible, a very deep nest is not worth following.
    const MAX_DEPTH: usize = 16;
    let (get_nodes, get_type, get_alloc, get_free) = (
        real::cuGraphGetNodes()?,
        real::cuGraphNodeGetType()?,
        real::cuGraphMemAllocNodeGetParams()?,
        real::cuGraphMemFreeNodeGetParams()?,
    );
    let child_of = real::cuGraphChildGraphNodeGetGraph();
    let kernel_of = real::cuGraphKernelNodeGetParams_v2();
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
                } else if kind == KERNEL {
                    let mut p: KernelNodeParams = std::mem::zeroed();
                    if kernel_of.is_some_and(|get| get(node, &mut p) == CUDA_SUCCESS) {
                        let f = if p.func.is_null() { p.kern as usize } else { p.func as usize };
                        found.kernels.extend((f != 0).then_some(f));
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
    let seen = g.frees.get(&graph).cloned().unwrap_or_default();
    let MemoryNodes { allocs, frees, .. } = listed.unwrap_or_else(|| MemoryNodes {
        allocs: g.allocs.iter().filter(|(_, a)| a.graph == Some(graph)).map(|(b, a)| (*b, a.size)).collect(),
        frees: seen.iter().map(|(b, _)| *b).collect(),
        kernels: Vec::new(),
    });
    // Where a free node was made: as gpusan saw it made, or else here.
    let made_at = |base: u64| seen.iter().find(|(b, _)| *b == base).map_or(site, |(_, s)| *s);
    let mut exec = ExecMemory::default();
    for (base, size) in allocs {
        let new = GraphAlloc { size, site, graph: None, freed_by_own_graph: None, launched: false };
        let a = g.allocs.entry(base).or_insert(new);
        if a.size != size {
            *a = new; // an address a destroyed graph's node had
        }
        a.graph = Some(graph);
        a.freed_by_own_graph = frees.contains(&base).then(|| made_at(base));
        exec.allocs.push(base);
    }
    exec.frees = frees.into_iter().filter(|b| !exec.allocs.contains(b)).collect();
    exec
}

/// After an instantiation: what each launch of the executable graph allocates and frees.
unsafe fn instantiated(r: CUresult, exec: *mut CUgraphExec, graph: CUgraph) -> CUresult {
    if r == CUDA_SUCCESS && !exec.is_null() {
        let exec = *exec;
        quietly(|| learn_exec(exec, graph));
    }
    r
}

/// After `cuGraphExecUpdate`: the executable graph takes the updating graph's memory nodes,
/// addresses included.
fn updated(r: CUresult, exec: CUgraphExec, graph: CUgraph) -> CUresult {
    if r == CUDA_SUCCESS {
        quietly(|| learn_exec(exec, graph));
    }
    r
}

/// What each launch of `exec`, made or updated from `graph`, allocates and frees.
fn learn_exec(exec: CUgraphExec, graph: CUgraph) {
    let (listed, site) = (memory_nodes(graph), site());
    let kernels = listed.as_ref().map(|l| l.kernels.clone()).unwrap_or_default();
    crate::routes::coverage::graph_kernels(exec as usize, kernels);
    let before = graphs(|g| {
        let memory = learn(g, graph as u64, listed, site);
        g.execs.insert(exec as u64, memory)
    });
    // Updated: what it allocated before may be no one's now.
    if let Some(before) = before {
        release(before.allocs);
    }
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
            crate::routes::coverage::graph_gone(exec as usize);
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
        quietly(|| graph_frees(graph as u64, dptr, site()));
    }
    r
}

/// `cuGraphAddNode`: the generic call that adds any node, memory nodes too.
unsafe fn node_added(r: CUresult, graph: CUgraph, params: *const GraphNodeParams) -> CUresult {
    if r != CUDA_SUCCESS || params.is_null() {
        return r;
    }
    // The type's parameters: `CUDA_MEM_ALLOC_NODE_PARAMS` (the driver wrote the address in
    // it) or `CUDA_MEM_FREE_NODE_PARAMS` (the address). A child graph's memory nodes are
    // learnt when the parent is instantiated.
    let at = std::ptr::addr_of!((*params).params) as *const u8;
    match (*params).kind {
        MEM_ALLOC => {
            let p = std::ptr::read_unaligned(at as *const MemAllocNodeParams);
            quietly(|| graph_alloc(graph as u64, p.dptr, p.bytesize as u64, site()));
        }
        MEM_FREE => {
            let base = std::ptr::read_unaligned(at as *const CUdeviceptr);
            quietly(|| graph_frees(graph as u64, base, site()));
        }
        _ => {}
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
