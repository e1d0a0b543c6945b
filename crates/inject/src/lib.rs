//! `libgpusan_inject.so`: the only place gpusan exports C symbols into a user's program.
//!
//! A CUDA program reaches the driver in four ways, and each needs its own door:
//! - linked against `libcuda.so` (driver-API programs): calls bind to exported names, so
//!   under `LD_PRELOAD` our `cuMemAlloc_v2` etc. are called first;
//! - `dlopen("libcuda.so.1")` + `dlsym(h, "cu…")` (Triton, libraries): our `dlsym`;
//! - `cuGetProcAddress` (cudart, static or shared, since CUDA 11.3): our `dlsym` hands out
//!   our `cuGetProcAddress`, which hands out our wrappers for the functions we watch;
//! - nothing we can hook (the driver loaded by other means): the Compute Sanitizer API's
//!   callbacks, when the driver loads this library through `CUDA_INJECTION64_PATH` and
//!   calls `InitializeInjection`.
//!
//! Behind the doors, [`hooks`] does gpusan's work (registry, checks, quarantine) and
//! [`modules`] swaps modules for instrumented builds; [`capture`] keeps gpusan's own
//! driver calls from breaking the program's stream captures; [`state`] holds what a run found and
//! writes it at exit. With `$GPUSAN_PROBE_OUT` set, [`probe`] also records which door each
//! driver function came through (how the injection design was chosen).

mod capture;
mod hooks;
mod host_symbols;
mod mirror;
mod modules;
mod passes;
mod probe;
mod resolve;
mod sanitizer;
mod state;
mod table_memory;
mod variables;
mod wrappers;
