// The binary route's judgements of other access kinds (`crates/inject/patches/gpusan_kinds.h`)
// compiled for the host: the very code the device patches run, on host memory, so that
// `tests/patch_kinds.rs` can hold it to the rule over random programs.
//
// stdin: one operation a line, until the end:
//   `w ADDRESS SIZE WINDOW`  a shared access: prints `past` or `inside`
//   `m BASE SIZE`            a device-side malloc's result: prints `ok`
//   `f PTR PC`               a device-side free: prints `fine` or `report CODE ALLOCATION PC`
//   `n PTR`                  a free with no heap table: prints `fine` or `report …`
//   `o`                      prints `overflow=N`: the table's overflow word
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "gpusan_abi.h"

static char verdict[160];

static uint64_t gpusan_heap_cas_u64(char *p, uint64_t expected, uint64_t desired) {
    uint64_t old;
    memcpy(&old, p, 8);
    if (old == expected) memcpy(p, &desired, 8);
    return old;
}
static uint32_t gpusan_heap_cas_u32(char *p, uint32_t expected, uint32_t desired) {
    uint32_t old;
    memcpy(&old, p, 4);
    if (old == expected) memcpy(p, &desired, 4);
    return old;
}
static uint64_t gpusan_heap_load_u64(const char *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}
static uint32_t gpusan_heap_load_u32(const char *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
static void gpusan_heap_store_u64(char *p, uint64_t v) { memcpy(p, &v, 8); }
static void gpusan_heap_store_u32(char *p, uint32_t v) { memcpy(p, &v, 4); }
static void gpusan_heap_fence() {}
static void gpusan_heap_report(const char *, uint64_t pc, uint64_t, uint64_t allocation, uint32_t code) {
    snprintf(verdict, sizeof verdict, "report %u %llu %llu", code, (unsigned long long)allocation,
             (unsigned long long)pc);
}

#define GPUSAN_INLINE inline
#include "gpusan_kinds.h"

int main() {
    std::vector<uint64_t> memory(GPUSAN_HEAP_HEADER_BYTES / 8 + GPUSAN_HEAP_CAPACITY * GPUSAN_HEAP_ENTRY_BYTES / 8);
    char *heap = (char *)memory.data();
    const char params[8] = {0};
    char op;
    while (scanf(" %c", &op) == 1) {
        unsigned long long a = 0, b = 0, c = 0;
        snprintf(verdict, sizeof verdict, "fine");
        if (op == 'w' && scanf("%llu %llu %llu", &a, &b, &c) == 3) {
            printf("%s\n", gpusan_past_window(a, (uint32_t)b, (uint32_t)c) ? "past" : "inside");
        } else if (op == 'm' && scanf("%llu %llu", &a, &b) == 2) {
            gpusan_heap_malloc(heap, a, b);
            printf("ok\n");
        } else if (op == 'f' && scanf("%llu %llu", &a, &b) == 2) {
            gpusan_heap_free(params, heap, b, a);
            printf("%s\n", verdict);
        } else if (op == 'n' && scanf("%llu", &a) == 1) {
            gpusan_heap_free(params, nullptr, 0, a);
            printf("%s\n", verdict);
        } else if (op == 'o') {
            printf("overflow=%u\n", gpusan_heap_load_u32(heap + GPUSAN_HEAP_OVERFLOW));
        } else {
            return 2;
        }
    }
    return 0;
}
