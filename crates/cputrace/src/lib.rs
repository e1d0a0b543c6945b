//! gpusan's CPU tracer: what BCache's simulator (`gpusan sim bcache --trace`) replays for
//! multithreaded C programs (issue 20).
//!
//! A program is compiled with gcc's `-fsanitize=thread`, which calls `__tsan_read8(addr)`
//! and the like before every load and store that may touch shared memory, and linked with
//! this library (a static library) instead of ThreadSanitizer's runtime, with
//! `-Wl,--wrap=malloc,--wrap=free,…` so that its allocations come here first
//! (`bench/bcache/trace-programs.sh` does both). No binary rewriting, no Valgrind: the
//! compiler places the calls, so they follow the program's own loads and stores.
//!
//! The trace (the `gpusan-trace` format; its CPU fields are in `docs/trace-format.md`) holds,
//! per thread in program order:
//! - every instrumented access, with the object it falls in and, for 8-byte accesses, the
//!   object the value moved points into (a pointer, as the hardware's pointer tags would
//!   mark it) and its offset there;
//! - allocations and frees, and the regions the program marks read-only
//!   (`GPUSAN_READ_ONLY` in `bench/bcache/programs/gpusan_cputrace.h`).
//!
//! Written to `$GPUSAN_CPUTRACE` (default `cputrace.gstrace`) and finished at exit.
//!
//! A forked child is not traced: the trace is the parent's.
//!
//! What it cannot see:
//! - accesses gcc does not instrument: locals that do not escape, and libc's own `memcpy` and
//!   the like;
//! - the pointers a whole-struct copy or a 16-byte access moves: gcc reports the copy as one
//!   range, and neither is recorded with values;
//! - allocations made inside libc.
//!
//! These are rare in our six workloads: at -O2, gcc emits 7 range calls and 2 `memcpy` calls
//! in all, and no 16-byte accesses.
//!
//! Values stored are read after the store, at the thread's next event (the call comes before
//! the store).

mod state;

use std::ffi::c_void;

use state::{on_access, on_alloc, on_free, on_read_only, Kind};

/// Called by every instrumented translation unit's constructor.
#[no_mangle]
pub extern "C" fn __tsan_init() {
    state::init();
}

#[no_mangle]
pub extern "C" fn __tsan_func_entry(_caller: *mut c_void) {}

#[no_mangle]
pub extern "C" fn __tsan_func_exit() {}

macro_rules! accesses {
    ($($name:ident, $kind:expr, $width:expr;)*) => {$(
        #[no_mangle]
        pub extern "C" fn $name(addr: *mut c_void) {
            on_access(addr as u64, $width, $kind);
        }
    )*};
}

accesses! {
    __tsan_read1, Kind::Load, 1;
    __tsan_read2, Kind::Load, 2;
    __tsan_read4, Kind::Load, 4;
    __tsan_read8, Kind::Load, 8;
    __tsan_read16, Kind::Load, 16;
    __tsan_write1, Kind::Store, 1;
    __tsan_write2, Kind::Store, 2;
    __tsan_write4, Kind::Store, 4;
    __tsan_write8, Kind::Store, 8;
    __tsan_write16, Kind::Store, 16;
    __tsan_unaligned_read2, Kind::Load, 2;
    __tsan_unaligned_read4, Kind::Load, 4;
    __tsan_unaligned_read8, Kind::Load, 8;
    __tsan_unaligned_read16, Kind::Load, 16;
    __tsan_unaligned_write2, Kind::Store, 2;
    __tsan_unaligned_write4, Kind::Store, 4;
    __tsan_unaligned_write8, Kind::Store, 8;
    __tsan_unaligned_write16, Kind::Store, 16;
    __tsan_volatile_read1, Kind::Load, 1;
    __tsan_volatile_read2, Kind::Load, 2;
    __tsan_volatile_read4, Kind::Load, 4;
    __tsan_volatile_read8, Kind::Load, 8;
    __tsan_volatile_read16, Kind::Load, 16;
    __tsan_volatile_write1, Kind::Store, 1;
    __tsan_volatile_write2, Kind::Store, 2;
    __tsan_volatile_write4, Kind::Store, 4;
    __tsan_volatile_write8, Kind::Store, 8;
    __tsan_volatile_write16, Kind::Store, 16;
}

/// A C++ object's vtable pointer read or written: an 8-byte access like another.
#[no_mangle]
pub extern "C" fn __tsan_vptr_read(addr: *mut c_void) {
    on_access(addr as u64, 8, Kind::Load);
}

#[no_mangle]
pub extern "C" fn __tsan_vptr_update(addr: *mut c_void, _new: *mut c_void) {
    on_access(addr as u64, 8, Kind::Store);
}

/// Whole-aggregate copies gcc emits as one range.
#[no_mangle]
pub extern "C" fn __tsan_read_range(addr: *mut c_void, size: usize) {
    on_access(addr as u64, size as u64, Kind::Load);
}

#[no_mangle]
pub extern "C" fn __tsan_write_range(addr: *mut c_void, size: usize) {
    on_access(addr as u64, size as u64, Kind::Store);
}

extern "C" {
    fn __real_malloc(size: usize) -> *mut c_void;
    fn __real_calloc(n: usize, size: usize) -> *mut c_void;
    fn __real_realloc(p: *mut c_void, size: usize) -> *mut c_void;
    fn __real_free(p: *mut c_void);
    fn __real_posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> libc::c_int;
    fn __real_aligned_alloc(align: usize, size: usize) -> *mut c_void;
}

// The program's allocation calls, through `--wrap`. The tracer's own allocations (Rust's,
// in this same link) come here too: `on_alloc` and `on_free` pass them by.

/// # Safety
/// As `malloc`.
#[no_mangle]
pub unsafe extern "C" fn __wrap_malloc(size: usize) -> *mut c_void {
    let p = __real_malloc(size);
    on_alloc(p as u64, size as u64);
    p
}

/// # Safety
/// As `calloc`.
#[no_mangle]
pub unsafe extern "C" fn __wrap_calloc(n: usize, size: usize) -> *mut c_void {
    let p = __real_calloc(n, size);
    on_alloc(p as u64, n.saturating_mul(size) as u64);
    p
}

/// # Safety
/// As `realloc`: the old object is freed and a new one made, even in place (its bounds
/// changed).
#[no_mangle]
pub unsafe extern "C" fn __wrap_realloc(old: *mut c_void, size: usize) -> *mut c_void {
    if !old.is_null() {
        on_free(old as u64);
    }
    let p = __real_realloc(old, size);
    on_alloc(p as u64, size as u64);
    p
}

/// # Safety
/// As `free`.
#[no_mangle]
pub unsafe extern "C" fn __wrap_free(p: *mut c_void) {
    if !p.is_null() {
        on_free(p as u64);
    }
    __real_free(p)
}

/// # Safety
/// As `posix_memalign`.
#[no_mangle]
pub unsafe extern "C" fn __wrap_posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> libc::c_int {
    let rc = __real_posix_memalign(out, align, size);
    if rc == 0 {
        on_alloc(*out as u64, size as u64);
    }
    rc
}

/// # Safety
/// As `aligned_alloc`.
#[no_mangle]
pub unsafe extern "C" fn __wrap_aligned_alloc(align: usize, size: usize) -> *mut c_void {
    let p = __real_aligned_alloc(align, size);
    on_alloc(p as u64, size as u64);
    p
}

/// The program's annotation: the `n` bytes at `p` are read-only from now on.
#[no_mangle]
pub extern "C" fn gpusan_read_only(p: *const c_void, n: usize) {
    on_read_only(p as u64, n as u64);
}
