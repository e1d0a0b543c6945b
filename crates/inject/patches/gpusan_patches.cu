// The binary route's patch functions: the Compute Sanitizer API calls them at the memory
// accesses of machine code gpusan cannot instrument (`crates/inject/src/routes/binary.rs`
// patches the modules; `gpusan_abi::binary` is the reference of what this file relies on).
// Built by `crates/inject/build.rs` with the pinned nvcc (`--compile-as-tools-patch`) and
// embedded in the injected library.
//
// Every global or generic access is judged against the SAME allocation table the
// instrumented PTX searches (with its lookup cache), and a bad one writes the SAME 64-byte
// error record into the SAME error buffer, so the runtime drains and reports both routes'
// findings alike. The access then proceeds (report): returning SANITIZER_PATCH_ERROR would
// exit the whole warp, which can leave a block's other warps waiting at a barrier.
#include <sanitizer_patching.h>
#include <stdint.h>

#include "gpusan_abi.h"

#define AT(base, offset, type) (*(type *)((char *)(base) + (offset)))

// The entry of the table holding `addr`, as `registry::device_lookup` finds it: the last
// entry whose base is at most `addr`; `-1` when none. The lookup cache names it first when
// the page of `addr` was searched before (trusted only if that entry contains `addr`).
static __device__ __forceinline__ int64_t find(const char *table, uint64_t len, uint64_t addr, bool *inside) {
    uint32_t *cache = (uint32_t *)(table - GPUSAN_LOOKUP_CACHE_BYTES);
    uint64_t page = addr >> GPUSAN_CACHE_PAGE_BITS << GPUSAN_CACHE_PAGE_BITS;
    uint64_t slot = (page * GPUSAN_LOOKUP_CACHE_HASH) >> (64 - GPUSAN_LOOKUP_CACHE_BITS);
    uint32_t hint = cache[slot];
    const char *entries = table + GPUSAN_TABLE_HEADER_BYTES;
    if (hint < len) {
        const char *e = entries + GPUSAN_TABLE_ENTRY_BYTES * hint;
        if (addr - AT(e, GPUSAN_ENTRY_BASE, uint64_t) < AT(e, GPUSAN_ENTRY_SIZE, uint64_t)) {
            *inside = true;
            return hint;
        }
    }
    uint64_t lo = 0, hi = len;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (AT(entries + GPUSAN_TABLE_ENTRY_BYTES * mid, GPUSAN_ENTRY_BASE, uint64_t) <= addr) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    if (lo == 0) {
        *inside = false;
        return -1;
    }
    const char *e = entries + GPUSAN_TABLE_ENTRY_BYTES * (lo - 1);
    *inside = addr - AT(e, GPUSAN_ENTRY_BASE, uint64_t) < AT(e, GPUSAN_ENTRY_SIZE, uint64_t);
    if (*inside) {
        cache[slot] = (uint32_t)(lo - 1);
    }
    return (int64_t)(lo - 1);
}

static __device__ __noinline__ void record(const char *params, uint64_t pc, uint64_t addr, uint32_t size,
                                           uint32_t flags, uint64_t allocation, uint32_t code) {
    char *errors = (char *)AT(params, GPUSAN_PARAMS_ERRORS, uint64_t);
    if (!errors) {
        return;
    }
    // The buffer is mapped host memory: an atomic per erring thread crosses PCIe each time,
    // and a kernel whose every thread errs (16M threads reading a freed buffer) stalled for
    // minutes on the H100. So the lanes of a warp that err together claim their records
    // with one atomic, taken by one lane, and once the buffer is full (until the runtime
    // drains it) no record is claimed or counted: the report's count of errors not stored
    // is then a lower bound.
    unsigned lanes = __activemask();
    unsigned lane;
    asm("mov.u32 %0, %%laneid;" : "=r"(lane));
    unsigned leader = __ffs(lanes) - 1;
    uint32_t first = 0, capacity = 0;
    if (lane == leader) {
        capacity = AT(errors, GPUSAN_ERRORS_CAPACITY, uint32_t);
        uint32_t count = *(volatile uint32_t *)(errors + GPUSAN_ERRORS_COUNT);
        first = count >= capacity ? capacity : atomicAdd((unsigned *)(errors + GPUSAN_ERRORS_COUNT), __popc(lanes));
    }
    first = __shfl_sync(lanes, first, leader);
    capacity = __shfl_sync(lanes, capacity, leader);
    uint32_t i = first + __popc(lanes & ((1u << lane) - 1));
    if (i >= capacity) {
        return;
    }
    char *r = errors + GPUSAN_ERRORS_HEADER_BYTES + GPUSAN_RECORD_BYTES * (uint64_t)i;
    uint32_t function_pc = AT(params, GPUSAN_PARAMS_FUNCTION_PC, uint32_t);
    bool read = flags & SANITIZER_MEMORY_DEVICE_FLAG_READ, write = flags & SANITIZER_MEMORY_DEVICE_FLAG_WRITE;
    uint32_t access = (read && write) || (flags & SANITIZER_MEMORY_DEVICE_FLAG_ATOMSYS) ? GPUSAN_ACCESS_ATOMIC
                      : write                                                           ? GPUSAN_ACCESS_WRITE
                                                                                        : GPUSAN_ACCESS_READ;
    AT(r, GPUSAN_RECORD_ADDRESS, uint64_t) = addr;
    AT(r, GPUSAN_RECORD_ALLOCATION, uint64_t) = allocation;
    AT(r, GPUSAN_RECORD_KERNEL, uint32_t) = AT(params, GPUSAN_PARAMS_KERNEL, uint32_t);
    AT(r, GPUSAN_RECORD_CODE, uint32_t) = code;
    AT(r, GPUSAN_RECORD_SIZE, uint32_t) = size;
    // The access's SASS offset in its kernel (0: the kernel's start was not known).
    AT(r, GPUSAN_RECORD_PTX_LINE, uint32_t) = function_pc ? (uint32_t)pc - function_pc : 0;
    uint32_t *block = &AT(r, GPUSAN_RECORD_BLOCK, uint32_t), *thread = &AT(r, GPUSAN_RECORD_THREAD, uint32_t);
    block[0] = blockIdx.x, block[1] = blockIdx.y, block[2] = blockIdx.z;
    thread[0] = threadIdx.x, thread[1] = threadIdx.y, thread[2] = threadIdx.z;
    AT(r, GPUSAN_RECORD_SPACE, uint32_t) = GPUSAN_SPACE_GLOBAL;
    AT(r, GPUSAN_RECORD_ACCESS, uint32_t) = access;
    __threadfence_system();
}

// Memory in no entry (module variables, memory allocated before gpusan was loaded or by
// means it does not watch) is never judged, only counted: once per group of lanes that
// reach here together.
static __device__ __forceinline__ void untracked(const char *params) {
    unsigned lanes = __activemask();
    unsigned lane;
    asm("mov.u32 %0, %%laneid;" : "=r"(lane));
    if (lane == (unsigned)(__ffs(lanes) - 1)) {
        atomicAdd((unsigned long long *)&AT(params, GPUSAN_PARAMS_UNTRACKED, uint64_t), (unsigned long long)__popc(lanes));
    }
}

extern "C" __device__ __noinline__ SanitizerPatchResult GPUSAN_GLOBAL_ACCESS_PATCH(void *userdata, uint64_t pc, void *ptr,
                                                                                 uint32_t size, uint32_t flags,
                                                                                 const void *data) {
    (void)data;
    const char *params = (const char *)userdata;
    // A generic access into this thread's local or this block's (or cluster's) shared
    // window is no global memory: the table has nothing to say about it.
    if (!params || (flags & SANITIZER_MEMORY_DEVICE_FLAG_PREFETCH) || __isShared(ptr) || __isLocal(ptr) ||
        __isClusterShared(ptr)) {
        return SANITIZER_PATCH_SUCCESS;
    }
    const char *table = (const char *)AT(params, GPUSAN_PARAMS_TABLE, uint64_t);
    if (!table) {
        return SANITIZER_PATCH_SUCCESS;
    }
    uint64_t len = AT(table, GPUSAN_TABLE_HEADER_LEN, uint64_t);
    uint64_t addr = (uint64_t)ptr;
    bool inside;
    int64_t i = find(table, len, addr, &inside);
    if (i < 0) {
        untracked(params);
        return SANITIZER_PATCH_SUCCESS;
    }
    const char *e = table + GPUSAN_TABLE_HEADER_BYTES + GPUSAN_TABLE_ENTRY_BYTES * (uint64_t)i;
    uint64_t base = AT(e, GPUSAN_ENTRY_BASE, uint64_t), bytes = AT(e, GPUSAN_ENTRY_SIZE, uint64_t);
    uint32_t entry_flags = AT(e, GPUSAN_ENTRY_FLAGS, uint32_t);
    uint64_t id = AT(e, GPUSAN_ENTRY_ID, uint64_t);
    if (inside) {
        if ((entry_flags & GPUSAN_STATE_MASK) == GPUSAN_STATE_FREED) {
            record(params, pc, addr, size, flags, id, GPUSAN_CODE_USE_AFTER_FREE);
        } else if (size > bytes - (addr - base)) {
            // Starts inside, ends past the end (a vector access across it).
            record(params, pc, addr, size, flags, id, GPUSAN_CODE_OUT_OF_BOUNDS);
        }
        return SANITIZER_PATCH_SUCCESS;
    }
    // Past the entry's end: in the tail up to its kind's alignment no other allocation can
    // start, so the access overflows this one; beyond, it is memory gpusan did not see.
    uint64_t end = base + bytes;
    uint64_t slack_end = (end + GPUSAN_SLACK_BYTES - 1) & ~(GPUSAN_SLACK_BYTES - 1);
    uint32_t kind = (entry_flags >> GPUSAN_KIND_SHIFT) & 0xff;
    if (addr < slack_end && kind < 32 && ((GPUSAN_SLACK_KINDS >> kind) & 1)) {
        bool freed = (entry_flags & GPUSAN_STATE_MASK) == GPUSAN_STATE_FREED;
        record(params, pc, addr, size, flags, id, freed ? GPUSAN_CODE_USE_AFTER_FREE : GPUSAN_CODE_OUT_OF_BOUNDS);
        return SANITIZER_PATCH_SUCCESS;
    }
    untracked(params);
    return SANITIZER_PATCH_SUCCESS;
}

// Judges nothing: with it, a run measures what the API's call at every access costs by
// itself (`GPUSAN_BINARY_PATCH=empty`, measurement only).
extern "C" __device__ __noinline__ SanitizerPatchResult GPUSAN_EMPTY_ACCESS_PATCH(void *userdata, uint64_t pc, void *ptr,
                                                                                uint32_t size, uint32_t flags,
                                                                                const void *data) {
    (void)userdata, (void)pc, (void)ptr, (void)size, (void)flags, (void)data;
    return SANITIZER_PATCH_SUCCESS;
}
