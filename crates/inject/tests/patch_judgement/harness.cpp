// The binary route's judgement (`crates/inject/patches/gpusan_judge.h`) compiled for the
// host: the very code the device patch runs, with its loads, window query, records and
// counts played on host memory, so that `tests/patch_judgement.rs` can hold it to the rule
// over random tables and count what its common case costs.
//
// stdin: `seed window_lo window_hi params_null table_null entries accesses`, then per entry
// `base size id flags`, then per access `addr size flags pc`. The lookup cache below the
// table starts as random garbage (from `seed`: the runtime never initializes it).
// stdout, per access: `fine`, `untracked` or `report CODE ALLOCATION PC SIZE FLAGS`, then
// ` loads=N windows=W`: the loads and window queries the judgement made.
#include <sanitizer_patching.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "gpusan_abi.h"

static unsigned loads, windows;
static uint64_t window_lo, window_hi;
static char verdict[160];

static uint64_t gpusan_load_u64(const char *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    loads++;
    return v;
}
static uint32_t gpusan_load_u32(const char *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    loads++;
    return v;
}
static void gpusan_load_2x64(const char *p, uint64_t *a, uint64_t *b) {
    memcpy(a, p, 8);
    memcpy(b, p + 8, 8);
    loads++;
}
static void gpusan_store_u32(char *p, uint32_t v) { memcpy(p, &v, 4); }
static bool gpusan_in_window(uint64_t addr) {
    windows++;
    return addr >= window_lo && addr < window_hi;
}
static void gpusan_report(const char *, uint32_t pc, uint64_t addr, uint32_t size, uint32_t flags, uint64_t allocation,
                          uint32_t code) {
    (void)addr;
    snprintf(verdict, sizeof verdict, "report %u %llu %u %u %u", code, (unsigned long long)allocation, pc, size, flags);
}
static void gpusan_untracked(const char *) { snprintf(verdict, sizeof verdict, "untracked"); }

#define GPUSAN_INLINE inline
#define GPUSAN_SLOW
#include "gpusan_judge.h"

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

int main() {
    unsigned long long seed, lo, hi, n, m;
    int params_null, table_null;
    if (scanf("%llu %llu %llu %d %d %llu %llu", &seed, &lo, &hi, &params_null, &table_null, &n, &m) != 7) return 2;
    window_lo = lo, window_hi = hi;
    // The cache, then the header, then the entries, as the runtime lays them out.
    std::vector<uint64_t> memory((GPUSAN_LOOKUP_CACHE_BYTES + GPUSAN_TABLE_HEADER_BYTES + GPUSAN_TABLE_ENTRY_BYTES * n) / 8 + 4);
    char *cache = (char *)memory.data();
    char *table = cache + GPUSAN_LOOKUP_CACHE_BYTES;
    uint64_t s = seed;
    for (uint64_t i = 0; i < GPUSAN_LOOKUP_CACHE_BYTES / 4; i++) {
        uint64_t r = splitmix(&s);
        // Mostly indices of entries (some one past the end), some garbage.
        uint32_t hint = r % 4 ? (uint32_t)((r >> 8) % (n + 2)) : (uint32_t)(r >> 32);
        memcpy(cache + 4 * i, &hint, 4);
    }
    memcpy(table + GPUSAN_TABLE_HEADER_LEN, &n, 8);
    for (uint64_t i = 0; i < n; i++) {
        unsigned long long base, size, id;
        unsigned flags;
        if (scanf("%llu %llu %llu %u", &base, &size, &id, &flags) != 4) return 2;
        char *e = table + GPUSAN_TABLE_HEADER_BYTES + GPUSAN_TABLE_ENTRY_BYTES * i;
        uint64_t b = base, z = size, d = id;
        memcpy(e + GPUSAN_ENTRY_BASE, &b, 8);
        memcpy(e + GPUSAN_ENTRY_SIZE, &z, 8);
        memcpy(e + GPUSAN_ENTRY_ID, &d, 8);
        memcpy(e + GPUSAN_ENTRY_FLAGS, &flags, 4);
    }
    uint64_t params[4] = {table_null ? 0 : (uint64_t)table, 0, 0, 0};
    for (uint64_t k = 0; k < m; k++) {
        unsigned long long addr, pc;
        unsigned size, flags;
        if (scanf("%llu %u %u %llu", &addr, &size, &flags, &pc) != 4) return 2;
        loads = windows = 0;
        snprintf(verdict, sizeof verdict, "fine");
        gpusan_judge(params_null ? nullptr : (const char *)params, pc, addr, size, flags);
        printf("%s loads=%u windows=%u\n", verdict, loads, windows);
    }
    return 0;
}
