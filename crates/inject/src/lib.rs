//! `libgpusan_inject.so`: the only place gpusan exports C symbols into a user's program.
//!
//! A CUDA program reaches the driver in four ways, and each needs its own door:
//! - linked against `libcuda.so` (driver-API programs): calls bind to exported names, so
//!   under `LD_PRELOAD` our `cuMemAlloc_v2` etc. are called first;
//! - `dlopen("libcuda.so.1")` + `dlsym(h, "cu…")` (Triton, libraries): our `dlsym`;
//! - `cuGetProcAddress` (cudart, static or shared, since CUDA 11.3): our `dlsym` hands out
//!   our `cuGetProcAddress`, which hands out our stand-ins for the functions we watch;
//! - nothing we can hook (the driver loaded by other means): the Compute Sanitizer API's
//!   callbacks, when the driver loads this library through `CUDA_INJECTION64_PATH` and
//!   calls `InitializeInjection`.
//!
//! # Layers
//!
//! Each module uses only those of its layer or below, and no two import each other in a
//! circle (`tests/layers.rs` checks both from the sources; a new module is given a layer
//! there):
//!
//! ```text
//! exit                      library load and process exit: the report, the probe's record
//! doors/                    dlsym, cuGetProcAddress, InitializeInjection (sanitizer)
//! families/                 one file per API family: its exported stand-ins and handlers
//!   memory copies modules launches graphs streams contexts   (judge: what they share)
//!   tensormaps              TMA descriptors bounded where they are made
//!   nvrtc link jitlink      the other doors PTX comes through: NVRTC, cuLink*, nvJitLink
//!   tenant                  pass-through stand-ins only a fenced tenant is handed (driver queries,
//!                           streams, events: forwarded to the manager below them)
//! routes/                   how a kernel is checked: substitute (+ passes), built, binary (machine code
//!                           patched through the Compute Sanitizer API), mirror (+ table_memory),
//!                           canary (+ canary_device: canary mode's guard, no kernel touched)
//! variables  capture  host_symbols   module variables; gpusan's own capture-safe driver calls
//! state  probe  image       options and Mode, registry and findings, `quietly`; the probe's data;
//!   pyframes                a loaded image and how far it may be read; the Python frames above
//!                           a call (sites)
//! driver/                   FFI types; real functions resolved once, typed (`real`); `hooks!`;
//!                           peek: reads of the program's memory that cannot fault;
//!                           remote/: --mode fence's forwarding functions, in place of the real ones
//! ```
//!
//! # Where a new door goes
//!
//! - A new family of driver or library functions (NVRTC's `nvrtcGetPTX`, `cuLink*` and
//!   nvJitLink, an allocator's `cudaMallocAsync` pool hooks): a file in `families/` with a
//!   `hooks!` block (exact exported names and signatures, `_v2`/`_ptsz`/`_ptds` variants
//!   each declared) and its handlers, listed in `families::hooks` so `dlsym` and
//!   `cuGetProcAddress` hand its stand-ins out (a library other than the driver, NVRTC's
//!   say, needs its own lookup beside `Slot::driver`, and its result type beside
//!   `CUresult`). The real functions gpusan calls itself are declared in `driver::real`,
//!   never converted from an address where they are used.
//! - Code the new family produces or loads (PTX from NVRTC, a linked cubin) goes through
//!   `routes::load_module` (or `routes::substitute` directly), like a module load.
//! - A new way of checking kernels (as `routes::binary` patches machine code): a module in
//!   `routes/`, called from `routes::load_module`, the launch/sync/teardown events there or
//!   a door's callbacks;
//!   a new entry point into the program (another injection API) belongs in `doors/`.

mod capture;
mod doors;
mod driver;
mod exit;
mod families;
mod host_symbols;
mod image;

mod probe;
mod pyframes;
mod routes;
mod state;
mod variables;
