// The binary route's patch functions: the Compute Sanitizer API calls them at the memory
// accesses of machine code gpusan cannot instrument (`crates/inject/src/routes/binary.rs`
// patches the modules; `gpusan_abi::binary` is the reference of what this file relies on).
// Built by `crates/inject/build.rs` with the pinned nvcc (`--compile-as-tools-patch`) and
// embedded in the injected library.
//
// Every global or generic access is judged (`gpusan_judge.h`, which the host tests compile
// too) against the SAME allocation table the instrumented PTX searches (with its lookup
// cache), and a bad one writes the SAME 64-byte error record into the SAME error buffer, so
// the runtime drains and reports both routes' findings alike. The access then proceeds (report): returning SANITIZER_PATCH_ERROR would
// exit the whole warp, which can leave a block's other warps waiting at a barrier.
#include <sanitizer_patching.h>
#include <stdint.h>

#include "gpusan_abi.h"

#define AT(base, offset, type) (*(type *)((char *)(base) + (offset)))

// What the judgement (`gpusan_judge.h`) reads and writes, on the device: global memory by
// global loads (every buffer it reads is device memory: no generic address resolution),
// the shared and local windows by the space queries.
static __device__ __forceinline__ uint64_t gpusan_load_u64(const char *p) {
    uint64_t v;
    asm("ld.global.u64 %0, [%1];" : "=l"(v) : "l"(p));
    return v;
}
static __device__ __forceinline__ uint32_t gpusan_load_u32(const char *p) {
    uint32_t v;
    asm("ld.global.u32 %0, [%1];" : "=r"(v) : "l"(p));
    return v;
}
static __device__ __forceinline__ void gpusan_load_2x64(const char *p, uint64_t *a, uint64_t *b) {
    asm("ld.global.v2.u64 {%0, %1}, [%2];" : "=l"(*a), "=l"(*b) : "l"(p));
}
static __device__ __forceinline__ void gpusan_store_u32(char *p, uint32_t v) {
    asm volatile("st.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
static __device__ __forceinline__ bool gpusan_in_window(uint64_t addr) {
    const void *p = (const void *)addr;
    return __isShared(p) || __isLocal(p) || __isClusterShared(p);
}
static __device__ __forceinline__ void gpusan_report(const char *params, uint32_t pc, uint64_t addr, uint32_t size,
                                                     uint32_t flags, uint64_t allocation, uint32_t code);
static __device__ __forceinline__ void gpusan_untracked(const char *params);

#define GPUSAN_INLINE __device__ __forceinline__
#define GPUSAN_SLOW __device__ __noinline__
#include "gpusan_judge.h"

// The entry of the table holding `addr` (`gpusan_find`): for the patches beside the
// global access's.
static __device__ __forceinline__ __attribute__((unused)) int64_t find(const char *table, uint64_t len, uint64_t addr,
                                                                       bool *inside) {
    return gpusan_find(table, len, addr, inside);
}

// A record in state space `space` (the global access's records, the shared window's, the
// device heap's).
static __device__ __noinline__ void record_in(const char *params, uint64_t pc, uint64_t addr, uint32_t size,
                                              uint32_t flags, uint64_t allocation, uint32_t code, uint32_t space) {
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
    AT(r, GPUSAN_RECORD_SPACE, uint32_t) = space;
    AT(r, GPUSAN_RECORD_ACCESS, uint32_t) = access;
    __threadfence_system();
}

static __device__ __forceinline__ void record(const char *params, uint64_t pc, uint64_t addr, uint32_t size,
                                              uint32_t flags, uint64_t allocation, uint32_t code) {
    record_in(params, pc, addr, size, flags, allocation, code, GPUSAN_SPACE_GLOBAL);
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
    gpusan_judge((const char *)userdata, pc, (uint64_t)ptr, size, flags);
    return SANITIZER_PATCH_SUCCESS;
}

// The judgement's hooks: a finding becomes a record, memory in no entry a count.
static __device__ __forceinline__ void gpusan_report(const char *params, uint32_t pc, uint64_t addr, uint32_t size,
                                                     uint32_t flags, uint64_t allocation, uint32_t code) {
    record(params, pc, addr, size, flags, allocation, code);
}
static __device__ __forceinline__ void gpusan_untracked(const char *params) {
    untracked(params);
}

// Judges nothing: with it, a run measures what the API's call at every access costs by
// itself (`GPUSAN_BINARY_PATCH=empty`, measurement only).
extern "C" __device__ __noinline__ SanitizerPatchResult GPUSAN_EMPTY_ACCESS_PATCH(void *userdata, uint64_t pc, void *ptr,
                                                                                uint32_t size, uint32_t flags,
                                                                                const void *data) {
    (void)userdata, (void)pc, (void)ptr, (void)size, (void)flags, (void)data;
    return SANITIZER_PATCH_SUCCESS;
}

// ---- other access kinds (see gpusan_abi::binary) -------------------------------------

// What the kinds' judgements (`gpusan_kinds.h`) use, on the device.
static __device__ __forceinline__ uint64_t gpusan_heap_cas_u64(char *p, uint64_t expected, uint64_t desired) {
    return atomicCAS((unsigned long long *)p, (unsigned long long)expected, (unsigned long long)desired);
}
static __device__ __forceinline__ uint32_t gpusan_heap_cas_u32(char *p, uint32_t expected, uint32_t desired) {
    return atomicCAS((unsigned *)p, expected, desired);
}
static __device__ __forceinline__ uint64_t gpusan_heap_load_u64(const char *p) { return *(volatile const uint64_t *)p; }
static __device__ __forceinline__ uint32_t gpusan_heap_load_u32(const char *p) { return *(volatile const uint32_t *)p; }
static __device__ __forceinline__ void gpusan_heap_store_u64(char *p, uint64_t v) { *(volatile uint64_t *)p = v; }
static __device__ __forceinline__ void gpusan_heap_store_u32(char *p, uint32_t v) { *(volatile uint32_t *)p = v; }
static __device__ __forceinline__ void gpusan_heap_fence() { __threadfence(); }
static __device__ __forceinline__ void gpusan_heap_report(const char *params, uint64_t pc, uint64_t addr,
                                                          uint64_t allocation, uint32_t code) {
    record_in(params, pc, addr, 0, SANITIZER_MEMORY_DEVICE_FLAG_READ, allocation, code, GPUSAN_SPACE_GLOBAL);
}

#include "gpusan_kinds.h"  // GPUSAN_INLINE as for gpusan_judge.h

// The block's shared window, in bytes from its start: the part the driver reserves, the
// static and the dynamic parts, rounded up to the allocation unit (%aggr_smem_size, sm_90).
// Whether the API's offsets count the reserved part or not, no access inside the window
// the program was given lies past it: at worst an overflow smaller than the reserved part
// and the rounding goes unseen.
static __device__ __forceinline__ uint32_t shared_window() {
    uint32_t n;
    asm("mov.u32 %0, %%aggr_smem_size;" : "=r"(n));
    return n;
}

// Whether `size` bytes at window address `address` run past the block's window.
static __device__ __forceinline__ bool past_window(uint64_t address, uint32_t size) {
    return gpusan_past_window(address, size, shared_window());
}

// A shared-space access (`ld.shared`, `st.shared`, `atom.shared`): `ptr` is its offset in
// the block's window. Generic accesses that land in shared memory come to the global patch
// instead, which leaves them alone.
extern "C" __device__ __noinline__ SanitizerPatchResult GPUSAN_SHARED_ACCESS_PATCH(void *userdata, uint64_t pc, void *ptr,
                                                                                 uint32_t size, uint32_t flags,
                                                                                 const void *data) {
    (void)data;
    const char *params = (const char *)userdata;
    if (params && !(flags & SANITIZER_MEMORY_DEVICE_FLAG_PREFETCH) && past_window((uint64_t)ptr, size)) {
        record_in(params, pc, (uint64_t)ptr, size, flags, 0, GPUSAN_CODE_SHARED_OUT_OF_BOUNDS, GPUSAN_SPACE_SHARED);
    }
    return SANITIZER_PATCH_SUCCESS;
}

// `cp.async` from global to shared: the destination's `size` bytes against the window
// (they are all written, zero-filled past what the source gave), the source as a global
// read of its first byte. The source may read fewer bytes than `size` (its `src-size`,
// which the API does not pass), so only a first byte out of bounds is certain; a null
// source reads nothing.
extern "C" __device__ __noinline__ SanitizerPatchResult GPUSAN_MEMCPY_ASYNC_PATCH(void *userdata, uint64_t pc, void *src,
                                                                                uint32_t dst, uint32_t size) {
    const char *params = (const char *)userdata;
    if (!params) {
        return SANITIZER_PATCH_SUCCESS;
    }
    if (past_window(dst, size)) {
        record_in(params, pc, dst, size, SANITIZER_MEMORY_DEVICE_FLAG_WRITE, 0, GPUSAN_CODE_SHARED_OUT_OF_BOUNDS,
                  GPUSAN_SPACE_SHARED);
    }
    if (src) {
        GPUSAN_GLOBAL_ACCESS_PATCH(userdata, pc, src, 1, SANITIZER_MEMORY_DEVICE_FLAG_READ, nullptr);
    }
    return SANITIZER_PATCH_SUCCESS;
}

// A bulk copy's global range, judged once per warp (every active lane is called with the
// same operands) as one access of all its bytes.
static __device__ __forceinline__ void bulk(void *userdata, uint64_t pc, uint64_t global, uint64_t bytes,
                                            uint32_t flags) {
    unsigned lane;
    asm("mov.u32 %0, %%laneid;" : "=r"(lane));
    if (!userdata || !bytes || lane != (unsigned)(__ffs(__activemask()) - 1)) {
        return;
    }
    uint32_t size = bytes > 0xffffffffull ? 0xffffffffu : (uint32_t)bytes;
    GPUSAN_GLOBAL_ACCESS_PATCH(userdata, pc, (void *)global, size, flags, nullptr);
}

// `cp.async.bulk` global → shared::cluster: bits 0–15 of `data` count its 16-byte blocks.
extern "C" __device__ __noinline__ SanitizerPatchResult GPUSAN_BULK_GLOBAL_TO_SHARED_PATCH(
    void *userdata, uint64_t pc, uint64_t src, uint32_t dst, uint32_t barrier, uint32_t data, uint32_t multicast) {
    (void)dst, (void)barrier, (void)multicast;
    bulk(userdata, pc, src, 16ull * (data & 0xffff), SANITIZER_MEMORY_DEVICE_FLAG_READ);
    return SANITIZER_PATCH_SUCCESS;
}

// `cp.async.bulk` shared::cta → global.
extern "C" __device__ __noinline__ SanitizerPatchResult GPUSAN_BULK_SHARED_TO_GLOBAL_PATCH(void *userdata, uint64_t pc,
                                                                                         uint64_t dst, uint32_t src,
                                                                                         uint32_t blocks) {
    (void)src;
    bulk(userdata, pc, dst, 16ull * blocks, SANITIZER_MEMORY_DEVICE_FLAG_WRITE);
    return SANITIZER_PATCH_SUCCESS;
}

// `cp.reduce.async.bulk` shared::cta → global: read and written, as an atomic.
extern "C" __device__ __noinline__ SanitizerPatchResult GPUSAN_BULK_REDUCTION_TO_GLOBAL_PATCH(void *userdata,
                                                                                            uint64_t pc, uint64_t dst,
                                                                                            uint32_t src,
                                                                                            uint32_t blocks) {
    (void)src;
    bulk(userdata, pc, dst, 16ull * blocks, SANITIZER_MEMORY_DEVICE_FLAG_READ | SANITIZER_MEMORY_DEVICE_FLAG_WRITE);
    return SANITIZER_PATCH_SUCCESS;
}

// ---- the device heap (gpusan_kinds.h) ---------------------------------------------------

// After a device-side `malloc` (and `__nv_aligned_device_malloc`): the block enters the table.
extern "C" __device__ __noinline__ SanitizerPatchResult GPUSAN_DEVICE_MALLOC_PATCH(void *userdata, uint64_t pc,
                                                                                 void *ptr, uint64_t size) {
    (void)pc;
    const char *params = (const char *)userdata;
    gpusan_heap_malloc(params ? (char *)AT(params, GPUSAN_PARAMS_HEAP, uint64_t) : nullptr, (uint64_t)ptr, size);
    return SANITIZER_PATCH_SUCCESS;
}

// Before a device-side `free`: a double or invalid free is reported; the free itself goes
// ahead, as it would natively.
extern "C" __device__ __noinline__ SanitizerPatchResult GPUSAN_DEVICE_FREE_PATCH(void *userdata, uint64_t pc, void *ptr) {
    const char *params = (const char *)userdata;
    gpusan_heap_free(params, params ? (char *)AT(params, GPUSAN_PARAMS_HEAP, uint64_t) : nullptr, pc, (uint64_t)ptr);
    return SANITIZER_PATCH_SUCCESS;
}

// ---- gpusan trace (issue 19) ------------------------------------------------------------

// One record per warp and access into the context's trace buffer (`gpusan_abi::binary`'s
// TRACE_* layout): the lanes' lowest address and highest end (each lane's offset from the
// first lane's clamped to ±2 GiB), the warp's number in its launch, the SM, the access
// (`gpusan_trace::Op`: space, kind, log2 of the width) and the lanes. The lanes that run
// the instruction together are the active mask here; the first of them writes. A full
// buffer counts what it drops (its cursor runs past its capacity).
static __device__ __forceinline__ void trace(const char *params, uint64_t pc, uint64_t addr, uint32_t size,
                                             uint32_t flags, uint32_t space) {
    if (!params) {
        return;
    }
    char *buf = (char *)gpusan_load_u64(params + GPUSAN_PARAMS_TRACE);
    if (!buf) {
        return;
    }
    unsigned mask = __activemask();
    unsigned lane;
    asm("mov.u32 %0, %%laneid;" : "=r"(lane));
    unsigned first = (unsigned)(__ffs(mask) - 1);
    unsigned long long base = __shfl_sync(mask, (unsigned long long)addr, first);
    long long from = (long long)(addr - base);
    long long to = from + (long long)size;
    const long long most = 0x7fffffffll, least = -0x80000000ll;
    int lo = (int)(from < least ? least : from > most ? most : from);
    int hi = (int)(to < least ? least : to > most ? most : to);
    // The warp's least and greatest (`redux` is not allowed in a tools patch): a butterfly
    // over a full warp, else every active lane's values fetched in turn.
    if (mask == 0xffffffffu) {
        for (int o = 16; o > 0; o >>= 1) {
            lo = min(lo, __shfl_xor_sync(mask, lo, o));
            hi = max(hi, __shfl_xor_sync(mask, hi, o));
        }
    } else {
        int least_lo = lo, most_hi = hi;
        for (unsigned m = mask; m; m &= m - 1) {
            int src = __ffs(m) - 1;
            least_lo = min(least_lo, __shfl_sync(mask, lo, src));
            most_hi = max(most_hi, __shfl_sync(mask, hi, src));
        }
        lo = least_lo, hi = most_hi;
    }
    if (lane != first) {
        return;
    }
    unsigned long long at = atomicAdd((unsigned long long *)(buf + GPUSAN_TRACE_CURSOR), 1ull);
    if (at >= *(volatile unsigned long long *)(buf + GPUSAN_TRACE_CAPACITY)) {
        return;
    }
    char *r = buf + GPUSAN_TRACE_HEADER_BYTES + at * GPUSAN_TRACE_RECORD_BYTES;
    unsigned threads = blockDim.x * blockDim.y * blockDim.z;
    unsigned thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    unsigned long long block = blockIdx.x + (unsigned long long)gridDim.x * (blockIdx.y + (unsigned long long)gridDim.y * blockIdx.z);
    unsigned sm;
    asm("mov.u32 %0, %%smid;" : "=r"(sm));
    // An atomic both reads and writes.
    bool reads = flags & SANITIZER_MEMORY_DEVICE_FLAG_READ, writes = flags & SANITIZER_MEMORY_DEVICE_FLAG_WRITE;
    uint32_t kind = reads && writes ? 2u : writes ? 1u : 0u;
    uint32_t width = size ? 31u - (uint32_t)__clz(size) : 0u;
    AT(r, GPUSAN_TRACE_LO, uint64_t) = base + (long long)lo;
    AT(r, GPUSAN_TRACE_HI, uint64_t) = base + (long long)hi;
    AT(r, GPUSAN_TRACE_WARP, uint32_t) = (uint32_t)(block * ((threads + 31) / 32) + thread / 32);
    AT(r, GPUSAN_TRACE_SM, uint32_t) = sm;
    AT(r, GPUSAN_TRACE_OP, uint8_t) = (uint8_t)(space | kind << 2 | (width > 15u ? 15u : width) << 4);
    AT(r, GPUSAN_TRACE_LANES, uint8_t) = (uint8_t)__popc(mask);
    AT(r, GPUSAN_TRACE_PC, uint32_t) = (uint32_t)pc - AT(params, GPUSAN_PARAMS_FUNCTION_PC, uint32_t);
}

// The spaces as `gpusan_trace::Space` numbers them.
#define GPUSAN_TRACE_GLOBAL_SPACE 0u
#define GPUSAN_TRACE_SHARED_SPACE 1u
#define GPUSAN_TRACE_LOCAL_SPACE 2u
#define GPUSAN_TRACE_OTHER_SPACE 3u

// A global or generic access: judged as gpusan_global_access judges it, then recorded (a
// generic one that lands in the shared or local window as that space).
extern "C" __device__ __noinline__ SanitizerPatchResult GPUSAN_TRACE_GLOBAL_PATCH(void *userdata, uint64_t pc, void *ptr,
                                                                                uint32_t size, uint32_t flags,
                                                                                const void *data) {
    GPUSAN_GLOBAL_ACCESS_PATCH(userdata, pc, ptr, size, flags, data);
    uint32_t space = __isShared(ptr) || __isClusterShared(ptr) ? GPUSAN_TRACE_SHARED_SPACE
                     : __isLocal(ptr)                          ? GPUSAN_TRACE_LOCAL_SPACE
                                                               : GPUSAN_TRACE_GLOBAL_SPACE;
    if (!(flags & SANITIZER_MEMORY_DEVICE_FLAG_PREFETCH)) {
        trace((const char *)userdata, pc, (uint64_t)ptr, size, flags, space);
    }
    return SANITIZER_PATCH_SUCCESS;
}

// A shared-space access: judged as gpusan_shared_access judges it, then recorded (its
// address is the offset in the block's window).
extern "C" __device__ __noinline__ SanitizerPatchResult GPUSAN_TRACE_SHARED_PATCH(void *userdata, uint64_t pc, void *ptr,
                                                                                uint32_t size, uint32_t flags,
                                                                                const void *data) {
    GPUSAN_SHARED_ACCESS_PATCH(userdata, pc, ptr, size, flags, data);
    if (!(flags & SANITIZER_MEMORY_DEVICE_FLAG_PREFETCH)) {
        trace((const char *)userdata, pc, (uint64_t)ptr, size, flags, GPUSAN_TRACE_SHARED_SPACE);
    }
    return SANITIZER_PATCH_SUCCESS;
}

// A local-space access: only recorded (the stack is the hardware's to bound).
extern "C" __device__ __noinline__ SanitizerPatchResult GPUSAN_TRACE_LOCAL_PATCH(void *userdata, uint64_t pc, void *ptr,
                                                                               uint32_t size, uint32_t flags,
                                                                               const void *data) {
    (void)data;
    trace((const char *)userdata, pc, (uint64_t)ptr, size, flags, GPUSAN_TRACE_LOCAL_SPACE);
    return SANITIZER_PATCH_SUCCESS;
}
