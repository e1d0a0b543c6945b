// The binary route's judgement of one global or generic access: the body of
// `gpusan_global_access` (`gpusan_patches.cu`), in a header so that the host compiles the
// very same code in a test (`crates/inject/tests/patch_judgement.rs`) and holds it to the
// rule `gpusan_abi::binary` states, over random tables.
//
// Where the time goes: the Compute Sanitizer API calls the patch at every global or generic
// access of a patched kernel, so its common case (the access lies inside a live allocation
// the lookup cache names) is written to cost the least the table allows:
// - three dependent rounds of loads, all from global memory (`ld.global`, no generic
//   address resolution): the params block; the table's length and the cache slot; the
//   entry, 32 bytes as two 16-byte loads;
// - no space queries (`__isShared`, `__isLocal`, `__isClusterShared`): no allocation lies in
//   the shared or local windows, so an address inside a live entry is global memory;
//   they are asked only on the slow path, before anything is counted or cached;
// - the fewest saved registers: the patch ABI saves a function's registers in its prologue,
//   whatever path it takes, so the slow path is a call of its own (three registers saved
//   and restored at every access, against ten with everything inline before).
// Anything else (a cache miss, a freed entry, the tail past an entry's end, memory in no
// entry, a prefetch) takes the slow path, which judges exactly as the rule says.
//
// The includer defines, before including this header:
//   GPUSAN_INLINE                          the qualifiers of these functions
//   GPUSAN_SLOW                            the qualifiers of the slow path (not inlined on the device)
//   uint64_t gpusan_load_u64(const char *)  8 bytes of global memory (the params block, the header)
//   uint32_t gpusan_load_u32(const char *)  4 bytes (a cache slot)
//   void gpusan_load_2x64(const char *, uint64_t *, uint64_t *)  16 aligned bytes
//   void gpusan_store_u32(char *, uint32_t) a cache slot's new hint
//   bool gpusan_in_window(uint64_t)        a generic address in this thread's local or its
//                                          block's (or cluster's) shared window
//   void gpusan_report(const char *params, uint32_t pc, uint64_t addr, uint32_t size,
//                      uint32_t flags, uint64_t allocation, uint32_t code)  (pc: low 32 bits)
//   void gpusan_untracked(const char *params)  an access to memory in no entry, counted
// and includes gpusan_abi.h and the flag values of sanitizer_patching.h.
#pragma once

// One table entry, as its two 16-byte halves hold it.
struct gpusan_entry {
    uint64_t base, size, id;
    uint32_t flags;
};

static GPUSAN_INLINE gpusan_entry gpusan_load_entry(const char *e) {
    gpusan_entry r;
    uint64_t tail;
    gpusan_load_2x64(e + GPUSAN_ENTRY_BASE, &r.base, &r.size);
    gpusan_load_2x64(e + GPUSAN_ENTRY_ID, &r.id, &tail);
    r.flags = (uint32_t)tail;  // ENTRY_FLAGS is the low half of the second 8 bytes
    return r;
}

// The lookup cache's slot of `addr`: `gpusan_abi::table::lookup_cache_slot` of its page.
static GPUSAN_INLINE char *gpusan_cache_slot(const char *table, uint64_t addr) {
    uint64_t page = addr >> GPUSAN_CACHE_PAGE_BITS << GPUSAN_CACHE_PAGE_BITS;
    uint64_t slot = (page * GPUSAN_LOOKUP_CACHE_HASH) >> (64 - GPUSAN_LOOKUP_CACHE_BITS);
    return (char *)table - GPUSAN_LOOKUP_CACHE_BYTES + 4 * slot;
}

// The entry of the table holding `addr`, as `registry::device_lookup` finds it: the last
// entry whose base is at most `addr`; `-1` when none. The lookup cache names it first when
// the page of `addr` was searched before (trusted only if that entry contains `addr`); a
// search that finds `addr` inside an entry leaves its index there.
static GPUSAN_INLINE int64_t gpusan_find(const char *table, uint64_t len, uint64_t addr, bool *inside) {
    char *cache = gpusan_cache_slot(table, addr);
    uint32_t hint = gpusan_load_u32(cache);
    const char *entries = table + GPUSAN_TABLE_HEADER_BYTES;
    uint64_t base, size;
    if (hint < len) {
        gpusan_load_2x64(entries + GPUSAN_TABLE_ENTRY_BYTES * hint + GPUSAN_ENTRY_BASE, &base, &size);
        if (addr - base < size) {
            *inside = true;
            return hint;
        }
    }
    uint64_t lo = 0, hi = len;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (gpusan_load_u64(entries + GPUSAN_TABLE_ENTRY_BYTES * mid + GPUSAN_ENTRY_BASE) <= addr) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    if (lo == 0) {
        *inside = false;
        return -1;
    }
    gpusan_load_2x64(entries + GPUSAN_TABLE_ENTRY_BYTES * (lo - 1) + GPUSAN_ENTRY_BASE, &base, &size);
    *inside = addr - base < size;
    if (*inside) {
        gpusan_store_u32(cache, (uint32_t)(lo - 1));
    }
    return (int64_t)(lo - 1);
}

// What the slow path found: a record's code, or one of these.
#define GPUSAN_VERDICT_FINE 0u
#define GPUSAN_VERDICT_UNTRACKED 0xffffffffu

// Everything but the common case, judged by the rule of `gpusan_abi::binary`; one finding
// is reported from one place. Called, not inlined (`GPUSAN_SLOW`): inlined, its registers
// made the patch save five of the caller's on the local stack at every access, where the
// call costs three. Only the low 32 bits of the pc come: a record holds the access's offset
// in its kernel.
static GPUSAN_SLOW void gpusan_judge_slow(const char *params, uint32_t pc, uint64_t addr, uint32_t size,
                                          uint32_t flags) {
    // A generic access into this thread's local or this block's (or cluster's) shared
    // window is no global memory: the table has nothing to say about it.
    if ((flags & SANITIZER_MEMORY_DEVICE_FLAG_PREFETCH) || gpusan_in_window(addr)) {
        return;
    }
    const char *table = (const char *)gpusan_load_u64(params + GPUSAN_PARAMS_TABLE);
    uint64_t len = gpusan_load_u64(table + GPUSAN_TABLE_HEADER_LEN);
    bool inside;
    int64_t i = gpusan_find(table, len, addr, &inside);
    uint32_t verdict = GPUSAN_VERDICT_UNTRACKED;
    uint64_t id = 0;
    if (i >= 0) {
        gpusan_entry e = gpusan_load_entry(table + GPUSAN_TABLE_HEADER_BYTES + GPUSAN_TABLE_ENTRY_BYTES * (uint64_t)i);
        id = e.id;
        bool freed = (e.flags & GPUSAN_STATE_MASK) == GPUSAN_STATE_FREED;
        if (inside && freed) {
            verdict = GPUSAN_CODE_USE_AFTER_FREE;
        } else if (inside) {
            // Starts inside, ends past the end (a vector access across it), or fine.
            verdict = size > e.size - (addr - e.base) ? GPUSAN_CODE_OUT_OF_BOUNDS : GPUSAN_VERDICT_FINE;
        } else {
            // Past the entry's end: over its red zone (bytes the runtime padded the
            // allocation with, `--redzone`) and up to its kind's alignment no other
            // allocation can start, so the access overflows this one; beyond, it is memory
            // gpusan did not see.
            uint64_t redzone = (uint64_t)(e.flags >> GPUSAN_REDZONE_SHIFT) * GPUSAN_REDZONE_UNIT;
            uint64_t slack_end = (e.base + e.size + redzone + GPUSAN_SLACK_BYTES - 1) & ~(GPUSAN_SLACK_BYTES - 1);
            uint32_t kind = (e.flags >> GPUSAN_KIND_SHIFT) & 0xff;
            if (addr < slack_end && kind < 32 && ((GPUSAN_SLACK_KINDS >> kind) & 1)) {
                verdict = freed ? GPUSAN_CODE_USE_AFTER_FREE : GPUSAN_CODE_OUT_OF_BOUNDS;
            }
        }
    }
    if (verdict == GPUSAN_VERDICT_UNTRACKED) {
        gpusan_untracked(params);
    } else if (verdict != GPUSAN_VERDICT_FINE) {
        gpusan_report(params, pc, addr, size, flags, id, verdict);
    }
}

// The judgement of one access: nothing to say (the common case returns after three rounds
// of loads), or a record or a count by the slow path.
static GPUSAN_INLINE void gpusan_judge(const char *params, uint64_t pc, uint64_t addr, uint32_t size, uint32_t flags) {
    if (!params) {
        return;
    }
    const char *table = (const char *)gpusan_load_u64(params + GPUSAN_PARAMS_TABLE);
    if (!table) {
        return;
    }
    // Length and hint load side by side; the hint is trusted only below the length (the
    // cache is never initialized) and only for an entry that holds the whole access.
    uint64_t len = gpusan_load_u64(table + GPUSAN_TABLE_HEADER_LEN);
    uint32_t hint = gpusan_load_u32(gpusan_cache_slot(table, addr));
    if (hint < len) {
        gpusan_entry e = gpusan_load_entry(table + GPUSAN_TABLE_HEADER_BYTES + GPUSAN_TABLE_ENTRY_BYTES * hint);
        uint64_t offset = addr - e.base;
        if (offset < e.size && size <= e.size - offset && (e.flags & GPUSAN_STATE_MASK) == GPUSAN_STATE_LIVE) {
            return;
        }
    }
    gpusan_judge_slow(params, (uint32_t)pc, addr, size, flags);
}
