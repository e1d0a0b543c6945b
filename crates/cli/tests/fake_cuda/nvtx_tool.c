/* Another NVTX tool, for tests of gpusan's chaining (tests/pool_blocks.rs): the program
 * names it in NVTX_INJECTION64_PATH, and under `gpusan run` gpusan's library loads it and
 * forwards to it. It logs each call it gets to $NVTX_TOOL_LOG: "core" (its core
 * injection), "ext" (the memory extension's), "heap" (nvtxMemHeapRegister, answered with
 * the handle 0x7700), "regions N heap H" (nvtxMemRegionsRegister), "reset H". */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static void note(const char *fmt, unsigned long long a, unsigned long long b) {
    const char *path = getenv("NVTX_TOOL_LOG");
    FILE *f = path ? fopen(path, "a") : 0;
    if (!f) return;
    fprintf(f, fmt, a, b);
    fputc('\n', f);
    fclose(f);
}

struct segment { size_t id, count; intptr_t *slots; };
struct module { uint16_t ver, size, id, compat; size_t nsegments; struct segment *segments; void *get, *info; };
struct regions { uint16_t compat, size; uint32_t type; void *heap; size_t count, element_size; const void *elements; void **out; };

static void *heap_register(void *domain, const void *desc) {
    (void)domain, (void)desc;
    note("heap", 0, 0);
    return (void *)0x7700;
}
static void heap_reset(void *domain, void *heap) { (void)domain; note("reset %llx", (uintptr_t)heap, 0); }
static void regions_register(void *domain, const struct regions *r) {
    (void)domain;
    note("regions %llu heap %llx", r->count, (uintptr_t)r->heap);
}

int InitializeInjectionNvtx2(void *get_export_table) {
    (void)get_export_table;
    note("core", 0, 0);
    return 1;
}

int InitializeInjectionNvtxExtension(struct module *m) {
    note("ext", 0, 0);
    if (m->id != 1 || !m->nsegments) return 0;
    /* Segment id 1 (CUDA 13.0's headers): the CBIDs count from 0; id 0: from 1. */
    intptr_t *slots = m->segments[0].slots - (m->segments[0].id == 1);
    slots[1] = (intptr_t)heap_register;
    slots[3] = (intptr_t)heap_reset;
    slots[4] = (intptr_t)regions_register;
    return 1;
}
