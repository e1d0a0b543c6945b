// The binary route's judgements of the access kinds beyond global memory
// (`crates/inject/src/routes/binary_kinds.rs`): the shared window's bound and the device
// heap's table, in a header so that the host compiles the very same code in a test
// (`crates/inject/tests/patch_kinds.rs`) and holds it to the rule over random programs.
//
// The includer defines, before including this header:
//   GPUSAN_INLINE                                   the qualifiers of these functions
//   uint64_t gpusan_heap_cas_u64(char *, uint64_t expected, uint64_t desired)  returns the old value
//   uint32_t gpusan_heap_cas_u32(char *, uint32_t expected, uint32_t desired)  returns the old value
//   uint64_t gpusan_heap_load_u64(const char *)     a load another thread's store may change (volatile)
//   uint32_t gpusan_heap_load_u32(const char *)
//   void gpusan_heap_store_u64(char *, uint64_t), gpusan_heap_store_u32(char *, uint32_t)
//   void gpusan_heap_fence(void)                    orders this thread's heap stores (device scope)
//   void gpusan_heap_report(const char *params, uint64_t pc, uint64_t addr, uint64_t allocation, uint32_t code)
// and includes gpusan_abi.h.
#pragma once

// Whether `size` bytes at shared-window address `address` run past a window of `window`
// bytes. Above GPUSAN_SHARED_OFFSET_BITS an address may carry the block's rank in its
// cluster (sm_90), which is no offset.
static GPUSAN_INLINE bool gpusan_past_window(uint64_t address, uint32_t size, uint32_t window) {
    uint64_t offset = address & ((1ull << GPUSAN_SHARED_OFFSET_BITS) - 1);
    return offset + size > window;
}

// ---- the device heap: the context's table of blocks (gpusan_abi::heap's layout) --------

static GPUSAN_INLINE char *gpusan_heap_entry(char *heap, uint64_t h) {
    return heap + GPUSAN_HEAP_HEADER_BYTES + GPUSAN_HEAP_ENTRY_BYTES * h;
}

// The first slot of `base`'s probe sequence: the Fibonacci hash of `base >> 4`.
static GPUSAN_INLINE uint64_t gpusan_heap_slot(uint64_t base) {
    return ((base >> 4) * GPUSAN_LOOKUP_CACHE_HASH) >> (64 - GPUSAN_HEAP_BITS);
}

// The entry whose key is `base`, or null (an empty slot ends the probe: keys are never
// removed).
static GPUSAN_INLINE char *gpusan_heap_find(char *heap, uint64_t base) {
    uint64_t h = gpusan_heap_slot(base);
    for (uint32_t n = 0; n < GPUSAN_HEAP_PROBES; n++, h = (h + 1) & (GPUSAN_HEAP_CAPACITY - 1)) {
        char *e = gpusan_heap_entry(heap, h);
        uint64_t key = gpusan_heap_load_u64(e + GPUSAN_HEAP_ENTRY_BASE);
        if (key == base) {
            return e;
        }
        if (key == 0) {
            return nullptr;
        }
    }
    return nullptr;
}

// After a device-side `malloc` returned `base` for `size` bytes: the block enters the table
// live (a base the heap handed out before reuses its entry). A full table sets the overflow
// word; the block is then unknown, and no free of it is judged.
static GPUSAN_INLINE void gpusan_heap_malloc(char *heap, uint64_t base, uint64_t size) {
    if (!heap || !base) {
        return;
    }
    uint64_t h = gpusan_heap_slot(base);
    for (uint32_t n = 0; n < GPUSAN_HEAP_PROBES; n++, h = (h + 1) & (GPUSAN_HEAP_CAPACITY - 1)) {
        char *e = gpusan_heap_entry(heap, h);
        uint64_t old = gpusan_heap_cas_u64(e + GPUSAN_HEAP_ENTRY_BASE, 0, base);
        if (old == 0 || old == base) {
            gpusan_heap_store_u64(e + GPUSAN_HEAP_ENTRY_SIZE, size);
            gpusan_heap_fence();
            gpusan_heap_store_u32(e + GPUSAN_HEAP_ENTRY_STATE, GPUSAN_STATE_LIVE);
            return;
        }
    }
    gpusan_heap_store_u32(heap + GPUSAN_HEAP_OVERFLOW, 1);
}

// Before a device-side `free(ptr)`: a block of the table already freed is a double free (of
// two threads freeing one live block, one wins the exchange, the other's is the double
// free); a pointer inside a live block, or one the heap cannot have returned (not 16-byte
// aligned), an invalid free. Pointers the table does not know (blocks of modules this route
// did not patch) and null are left alone.
static GPUSAN_INLINE void gpusan_heap_free(const char *params, char *heap, uint64_t pc, uint64_t ptr) {
    if (!heap || !ptr) {
        return;
    }
    char *e = gpusan_heap_find(heap, ptr);
    if (e) {
        uint32_t old = gpusan_heap_cas_u32(e + GPUSAN_HEAP_ENTRY_STATE, GPUSAN_STATE_LIVE, GPUSAN_STATE_FREED);
        gpusan_heap_fence();
        if (old == GPUSAN_STATE_FREED) {
            gpusan_heap_report(params, pc, ptr, ptr | GPUSAN_HEAP_BLOCK_TAG, GPUSAN_CODE_DOUBLE_FREE);
        }
        return;
    }
    uint64_t v = ptr & ~(GPUSAN_HEAP_ALIGN - 1);
    for (uint32_t m = 0; m < GPUSAN_HEAP_SEARCH_STEPS && v; m++, v -= GPUSAN_HEAP_ALIGN) {
        char *b = gpusan_heap_find(heap, v);
        if (b && gpusan_heap_load_u32(b + GPUSAN_HEAP_ENTRY_STATE) == GPUSAN_STATE_LIVE &&
            ptr - v < gpusan_heap_load_u64(b + GPUSAN_HEAP_ENTRY_SIZE)) {
            gpusan_heap_report(params, pc, ptr, v | GPUSAN_HEAP_BLOCK_TAG, GPUSAN_CODE_INVALID_FREE);
            return;
        }
    }
    if (ptr & (GPUSAN_HEAP_ALIGN - 1)) {
        gpusan_heap_report(params, pc, ptr, 0, GPUSAN_CODE_INVALID_FREE);
    }
}
