//! `gpusan sim`: trace-driven simulators of the memory-safety hardware the papers propose,
//! fed by `gpusan-trace` traces of real GPU runs (issue 19).
//!
//! - [`run`]: GPUArmor's metadata path (LOADMETA, MEMCHECK, the per-SM Metadata Lookaside
//!   Buffer of [`mlb`], the metadata table organisations of [`table`]) over a trace, with a
//!   simple timing model.
//! - [`sweep()`]: many configurations over one pass of a trace, results independent of the
//!   threads used.
//! - [`characterize()`]: GPUArmor §3's workload characterization of a trace.
//! - [`synth`]: synthetic traces shaped like GPUArmor's workloads.
//! - [`chart`]: the sweep as an SVG chart.

pub mod bcache;
pub mod characterize;
pub mod chart;
pub mod fuzz;
pub mod mlb;
pub mod run;
pub mod sweep;
pub mod synth;
pub mod table;

pub use characterize::characterize;
pub use sweep::sweep;
