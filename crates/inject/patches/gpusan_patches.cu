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
