//! The binary route's access kinds beyond global memory: which instructions of a patched
//! module call which of gpusan's patches (`gpusan_abi::binary`), and the device-heap table
//! the heap patches share in a context.
//!
//! - **Shared memory** (`SANITIZER_INSTRUCTION_SHARED_MEMORY_ACCESS`): the API passes the
//!   access's offset in the block's shared window; past the window (reserved, static and
//!   dynamic parts, as the block's `%aggr_smem_size` says) is out of bounds. The window is
//!   read on the device at each access, so every launch's dynamic size, graph nodes'
//!   included, is the one it ran with. Arrays inside the window are not told apart (the
//!   machine code has no sizes of them), and a generic access that lands in shared memory
//!   reaches the global patch, which leaves it alone.
//! - **Local memory** is not patched: the API passes an offset in the thread's local
//!   window, whose bounds are the stack the driver reserved, not the frame's objects; an
//!   access outside the window faults in the hardware already, and one inside it may be any
//!   object of any frame on the stack. Nothing sound can be said that the GPU does not say.
//! - **`cp.async`** (`MEMCPY_ASYNC`): the shared destination against the window, the global
//!   source's first byte as a global read (the instruction's `src-size` may be smaller than
//!   the copy, and the API does not pass it).
//! - **Bulk copies** (`BULK_COPY_GLOBAL_TO_SHARED`, `BULK_COPY_SHARED_TO_GLOBAL`,
//!   `BULK_REDUCTION_SHARED_TO_GLOBAL`): the global range, all of it, as one access. TMA
//!   (`cp.async.bulk.tensor`) has no patch point.
//! - **The device heap** (`DEVICE_SIDE_MALLOC`, `DEVICE_ALIGNED_MALLOC`,
//!   `DEVICE_SIDE_FREE`), in modules whose machine code names `malloc` or `free`: blocks
//!   enter a table per context at their `malloc`, and a `free` of a block already freed is a
//!   double free, of a pointer inside a live block (or not 16-byte aligned) an invalid free.
//!   Blocks of modules the route did not patch are unknown to it (never judged); under
//!   `--route auto`, a block freed in a patched module and handed out again at the same
//!   base by an unpatched one (PTX-route modules keep heap tables of their own) still reads
//!   as freed here, so freeing it in a patched module would read as a double free. Under
//!   `--route binary` every module is patched (those that launch kernels from the device
//!   aside). Accesses to heap blocks stay untracked: the allocation table knows no heap
//!   block.
//!
//! The judgements themselves are `patches/gpusan_kinds.h` (the window's bound, the heap
//! table), which `tests/patch_kinds.rs` compiles for the host and holds to their rules.
//!
//! Each kind costs the API's call at every instruction of it (shared accesses are the most
//! frequent in tiled kernels): `gpusan run --binary-kinds` chooses them (default all).
//!
//! A kind the Compute Sanitizer library refuses to patch (an older library without its
//! instruction) leaves the module patched for the others.

use std::ffi::{c_char, c_int, c_void, CString};

use gpusan_abi::binary::{
    Kinds, BULK_GLOBAL_TO_SHARED_PATCH, BULK_REDUCTION_TO_GLOBAL_PATCH, BULK_SHARED_TO_GLOBAL_PATCH, DEVICE_FREE_PATCH,
    DEVICE_MALLOC_PATCH, MEMCPY_ASYNC_PATCH, SHARED_ACCESS_PATCH,
};
use gpusan_abi::heap::TABLE_BYTES;

use super::mirror::ParamsMemory;

/// `Sanitizer_InstructionId`s (`sanitizer_patching.h`), the patch each calls, and whether a
/// run's [`Kinds`] asks for it.
type Kind = (u32, &'static str, fn(&Kinds) -> bool);
pub const KINDS: [Kind; 5] = [
    (4, SHARED_ACCESS_PATCH, |k| k.shared),           // SHARED_MEMORY_ACCESS
    (14, MEMCPY_ASYNC_PATCH, |k| k.memcpy_async),     // MEMCPY_ASYNC
    (30, BULK_GLOBAL_TO_SHARED_PATCH, |k| k.bulk),    // BULK_COPY_GLOBAL_TO_SHARED
    (35, BULK_SHARED_TO_GLOBAL_PATCH, |k| k.bulk),    // BULK_COPY_SHARED_TO_GLOBAL
    (37, BULK_REDUCTION_TO_GLOBAL_PATCH, |k| k.bulk), // BULK_REDUCTION_SHARED_TO_GLOBAL
];

/// The device heap's: `DEVICE_SIDE_MALLOC`, `DEVICE_ALIGNED_MALLOC`, `DEVICE_SIDE_FREE`.
pub const HEAP_KINDS: [(u32, &str); 3] =
    [(11, DEVICE_MALLOC_PATCH), (18, DEVICE_MALLOC_PATCH), (12, DEVICE_FREE_PATCH)];

/// `sanitizerPatchInstructions(instruction, module, patch)`.
pub type PatchInstructions = unsafe extern "C" fn(u32, *mut c_void, *const c_char) -> c_int;

/// Marks `module`'s instructions of the kinds `kinds` asks for with their patches (before
/// `sanitizerPatchModule`); the heap's only where `heap` (its machine code calls `malloc` or
/// `free`). Returns whether the heap's were marked. The caller holds the API's lock.
///
/// # Safety
/// `module` is a module the driver loaded, and `patch_instructions` the library's function.
pub unsafe fn patch(patch_instructions: PatchInstructions, module: *mut c_void, kinds: &Kinds, heap: bool) -> bool {
    let heap = heap && kinds.heap;
    let chosen = KINDS.iter().filter(|(_, _, wanted)| wanted(kinds)).map(|&(id, name, _)| (id, name));
    let heap_kinds = if heap { &HEAP_KINDS[..] } else { &[] };
    for (id, name) in chosen.chain(heap_kinds.iter().copied()) {
        let name = CString::new(name).expect("no NUL in a patch's name");
        // Refused (an older library): that kind stays unpatched, the rest is checked.
        let _ = patch_instructions(id, module, name.as_ptr());
    }
    heap
}

/// Zeros a new heap table is copied from: made once, kept for the copies (zeroed pages
/// from the allocator, not 2 MiB in the library's image).
static ZEROS: std::sync::OnceLock<&'static [u8]> = std::sync::OnceLock::new();

/// A context's device-heap table, allocated and zeroed with the API's memory calls (inside
/// a launch callback, before the launch).
pub fn heap_table(memory: &dyn ParamsMemory) -> Option<u64> {
    let table = memory.alloc(TABLE_BYTES as usize)?;
    let zeros = ZEROS.get_or_init(|| vec![0u8; TABLE_BYTES as usize].leak());
    memory.write_static(table, zeros).then_some(table)
}
