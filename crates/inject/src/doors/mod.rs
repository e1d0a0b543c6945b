//! The doors: how gpusan's stand-ins reach a program that does not call them by name. The
//! exported names of the families are the first door (a program linked against `libcuda`
//! binds to them under `LD_PRELOAD`); these are the others.
//!
//! - [`dlsym`]: our `dlsym` and `cuGetProcAddress[_v2]` hand out the stand-ins;
//! - [`sanitizer`]: `InitializeInjection`, called by the driver when it loads this library
//!   through `CUDA_INJECTION64_PATH`, subscribes to the Compute Sanitizer API's callbacks
//!   (whose data [`sanitizer_data`] lays out as the C headers do);
//! - [`nvtx`]: `InitializeInjectionNvtx2` and `InitializeInjectionNvtxExtension`, called by
//!   NVTX when it loads this library through `NVTX_INJECTION64_PATH`: allocators' memory
//!   regions become pool blocks (`families::pools`);
//! - [`cupti`]: CUPTI's switches (`cuptiActivityEnable`, `cuptiSubscribe`), watched so the
//!   report warns about a profiler only when one was switched on.

pub mod cupti;
pub mod dlsym;
pub mod nvtx;
pub mod sanitizer;
pub mod sanitizer_data;
