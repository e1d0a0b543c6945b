/* gpusan's pool-block interface: how a pool allocator (PyTorch's caching allocator, CuPy's
 * memory pools, RMM, your own) tells gpusan which block of its segment each tensor is, so
 * that a kernel reading past a tensor inside the pool's segment is reported as out of bounds
 * of that tensor, and a use of a block the pool took back as a use after free.
 *
 * The functions live in libgpusan_inject.so, which `gpusan run` preloads. Resolve them at run
 * time, never link them: they are absent when the program runs without gpusan.
 *
 *     typedef int (*gpusan_alloc_fn)(uint64_t, uint64_t, uint64_t, int32_t, uint32_t);
 *     gpusan_alloc_fn f = (gpusan_alloc_fn)dlsym(RTLD_DEFAULT, "gpusan_pool_block_alloc");
 *     if (f) f((uint64_t)ptr, requested_size, (uint64_t)stream, device, GPUSAN_POOL_OTHER);
 *
 * (Python: `ctypes.CDLL(None).gpusan_pool_block_alloc`, guarded by `hasattr`.)
 *
 * Each call returns 0 when recorded and a nonzero code otherwise; it never crashes, never
 * blocks for long (one lock, no system call, no driver call), and is safe from any thread.
 *
 * Semantics:
 * - alloc: `size` is the size the program asked for, not the pool's rounded one: the bytes
 *   past it, and every byte of the segment no live block holds, are out of bounds for
 *   kernels. A block overlapping earlier blocks replaces them (the pool reused their memory).
 *   A block outside any allocation gpusan knows is still registered.
 * - free: the block stays known as freed (a use of it is a use after free) until a block is
 *   allocated over it, or its segment is freed (cudaFree, e.g. torch.cuda.empty_cache()).
 *   Call it where the pool may hand the memory out again on `stream` (in the stream's order):
 *   kernels launched after the call see the block freed once the kernels launched before it
 *   on `stream` are done; kernels launched before it never do.
 * - stream: the CUstream/cudaStream_t as an integer (0 for the legacy default stream).
 */
#ifndef GPUSAN_POOLS_H
#define GPUSAN_POOLS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* source: which allocator describes the block (reports name it). */
#define GPUSAN_POOL_TORCH 1u        /* PyTorch's CUDA caching allocator */
#define GPUSAN_POOL_CUPY 2u         /* CuPy's MemoryPool */
#define GPUSAN_POOL_CUPY_PINNED 3u  /* CuPy's PinnedMemoryPool */
#define GPUSAN_POOL_NVTX 4u         /* a region of the NVTX memory API */
#define GPUSAN_POOL_OTHER 5u        /* any other pool */
/* Or'ed into source: the pool was asked for `pad` bytes (at most 65535) more than `size`, so
 * that the block's slack can hold canary mode's canary (a size the pool rounds to nothing
 * more would leave none). */
#define GPUSAN_POOL_PADDED(pad) ((uint32_t)(pad) << 16)

/* Return codes. */
#define GPUSAN_POOL_OK 0
#define GPUSAN_POOL_BYPASSED 1      /* gpusan keeps no books in this process: nothing done */
#define GPUSAN_POOL_INVALID 2       /* null pointer, size 0, or a range that wraps */
#define GPUSAN_POOL_INTERNAL 3      /* gpusan failed inside the call (the program goes on) */
#define GPUSAN_POOL_UNKNOWN 4       /* free: no block starts at ptr */
#define GPUSAN_POOL_FREED_TWICE 5   /* free: the block was already freed */

int gpusan_pool_block_alloc(uint64_t ptr, uint64_t size, uint64_t stream, int32_t device, uint32_t source);
int gpusan_pool_block_free(uint64_t ptr, uint64_t stream, int32_t device, uint32_t source);

#ifdef __cplusplus
}
#endif

#endif /* GPUSAN_POOLS_H */
