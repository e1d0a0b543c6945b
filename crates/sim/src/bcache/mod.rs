//! `gpusan sim bcache` (issue 20): the BCache paper's chip multiprocessor as a trace-driven
//! simulator, starting with what fetching bounds information costs: the mesh ([`mesh`]),
//! the caches ([`cache`]), HardBound's and BCache's miss paths ([`model`]) and the paper's
//! synthetic workload ([`synthetic`]).

pub mod cache;
pub mod mesh;
pub mod model;
pub mod program;
mod queue;
pub mod synthetic;
