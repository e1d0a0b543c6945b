/* Pool blocks for tests of gpusan's per-tensor bounds inside a pool's segment
 * (tests/pool_blocks.rs), with the fake driver:
 *   pool_blocks_prog SCENARIO
 * A 64 KiB segment is cuMemAlloc'd; blocks of it are described to gpusan, either through
 * its C functions (found with dlsym, as a pool would: absent without gpusan) or, for the
 * `nvtx_*` scenarios, through NVTX's memory API (the vendored NVTX v3 headers, which find
 * the tool through NVTX_INJECTION64_PATH). Block A is 4000 bytes at the segment's start,
 * block B 512 bytes at +4096. Then a module declaring gpusan's device ABI is launched and
 * the program plays its checked kernel: a 4-byte read through a pointer to A (the root) at
 * an address, judged as an instrumented kernel does against the table gpusan uploaded
 * before the launch (the root's entry: freed is a use after free, past its end out of
 * bounds), the finding written as an error record.
 *   past      reads A + 4000: past A, in the pool's slack
 *   inside    reads A + 3996: in bounds
 *   neighbour reads A + 4100: past A, inside B
 *   uaf       A freed (stream 0), then reads A + 8
 *   realloc   A freed, a block of 4000 bytes allocated at A again, then reads A + 8
 *   nvtx_past / nvtx_inside   A and B as NVTX regions of a heap over the segment; reads
 *             A + 4000 / A + 3996
 *   nvtx_reset  the heap reset, the context synchronized, then reads A + 8
 *   stream_free A (of the torch allocator) allocated and freed on a non-blocking stream;
 *             reads A + 8 after a first and after a second launch on that stream
 * Prints `SCENARIO done rc=N found=F` (F: whether the played kernel found an error). */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <nvtx3/nvToolsExtMem.h> /* the pinned nvidia-nvtx wheel (CUDA 13.0) */

typedef int CUresult;
CUresult cuInit(unsigned);
CUresult cuDevicePrimaryCtxRetain(void **, int);
CUresult cuMemAlloc_v2(uint64_t *, size_t);
CUresult cuMemFree_v2(uint64_t);
CUresult cuModuleLoadData(void **, const void *);
CUresult cuModuleGetGlobal_v2(uint64_t *, size_t *, void *, const char *);
CUresult cuLaunchKernel(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *, void **,
                        void **);
CUresult cuCtxSynchronize(void);
CUresult cuStreamCreate(void **, unsigned);

static const char *abi_ptx =
    ".version 9.0\n.target sm_90\n.address_size 64\n.file 1 \"pool.cu\"\n"
    ".visible .global .align 8 .u64 __gpusan_table;\n.visible .global .align 8 .u64 __gpusan_errors;\n"
    ".visible .global .align 4 .u32 __gpusan_module;\n"
    ".visible .entry pool_read()\n{\n\t.loc 1 3 3\n\tret;\n}\n";

static uint64_t global_value(void *m, const char *name) {
    uint64_t addr = 0;
    size_t size = 0;
    if (cuModuleGetGlobal_v2(&addr, &size, m, name)) return 0;
    return size == 4 ? *(uint32_t *)(uintptr_t)addr : *(uint64_t *)(uintptr_t)addr;
}

/* The checked kernel: a `size`-byte read at `addr` through a pointer derived from `root`,
 * judged against the table as the check pass's code does (the last entry whose base is at
 * most the root, if the root lies inside it). Returns whether it found an error. */
static int play_read(void *m, uint64_t root, uint64_t addr, uint32_t size) {
    const unsigned char *t = (const unsigned char *)(uintptr_t)global_value(m, "__gpusan_table");
    unsigned char *errors = (unsigned char *)(uintptr_t)global_value(m, "__gpusan_errors");
    uint32_t module = (uint32_t)global_value(m, "__gpusan_module");
    if (!t || memcmp(t, "GSAT", 4) || !errors || !module) return -1;
    uint64_t len, lo = 0, hi;
    memcpy(&len, t + 8, 8);
    hi = len;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2, base;
        memcpy(&base, t + 32 + 32 * mid, 8);
        if (base <= root) lo = mid + 1;
        else hi = mid;
    }
    if (lo == 0) return 0; /* memory gpusan did not see: never judged */
    const unsigned char *e = t + 32 + 32 * (lo - 1);
    uint64_t base, esize, id;
    uint32_t flags;
    memcpy(&base, e, 8), memcpy(&esize, e + 8, 8), memcpy(&id, e + 16, 8), memcpy(&flags, e + 24, 4);
    if (root - base >= esize) return 0;
    uint32_t code = (flags & 0xff) == 2 ? 2 : (addr - base > esize - size || addr < base) ? 1 : 0;
    if (!code) return 0;
    uint32_t i = (*(uint32_t *)errors)++;
    unsigned char *r = errors + 16 + 64 * i;
    /* kernel, code, size, PTX line 9, block 0, thread 1, global space, a read */
    uint32_t f[12] = {module << 16 | 0, code, size, 9, 0, 0, 0, 1, 0, 0, 0, 0};
    memcpy(r, &addr, 8);
    memcpy(r + 8, &id, 8);
    memcpy(r + 16, f, sizeof f);
    return 1;
}

typedef int (*block_alloc_fn)(uint64_t, uint64_t, uint64_t, int32_t, uint32_t);
typedef int (*block_free_fn)(uint64_t, uint64_t, int32_t, uint32_t);

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    const char *s = argv[1];
    void *ctx = 0, *m = 0;
    uint64_t seg = 0;
    int rc = cuInit(0) | cuDevicePrimaryCtxRetain(&ctx, 0) | cuMemAlloc_v2(&seg, 64 << 10);
    /* Loaded first: gpusan keeps a table on the GPU from here on, so frees wait to be shown. */
    rc |= cuModuleLoadData(&m, abi_ptx);
    uint64_t a = seg, b = seg + 4096, at = a + 8;
    if (!strncmp(s, "nvtx_", 5)) {
        nvtxDomainHandle_t domain = nvtxDomainCreateA("pool");
        nvtxMemVirtualRangeDesc_t range = {64 << 10, (void *)(uintptr_t)seg};
        nvtxMemHeapDesc_t heap_desc = {NVTX_EXT_COMPATID_MEM, sizeof heap_desc, 0, NVTX_MEM_HEAP_USAGE_TYPE_SUB_ALLOCATOR,
                                       NVTX_MEM_TYPE_VIRTUAL_ADDRESS, sizeof range, &range};
        nvtxMemHeapHandle_t heap = nvtxMemHeapRegister(domain, &heap_desc);
        nvtxMemVirtualRangeDesc_t regions[2] = {{4000, (void *)(uintptr_t)a}, {512, (void *)(uintptr_t)b}};
        nvtxMemRegionHandle_t handles[2] = {0, 0};
        nvtxMemRegionsRegisterBatch_t batch = {NVTX_EXT_COMPATID_MEM, sizeof batch, NVTX_MEM_TYPE_VIRTUAL_ADDRESS, heap,
                                               2, sizeof regions[0], regions, handles};
        nvtxMemRegionsRegister(domain, &batch);
        if (!strcmp(s, "nvtx_reset")) {
            nvtxMemHeapReset(domain, heap);
            rc |= cuCtxSynchronize();
        }
        at = !strcmp(s, "nvtx_past") ? a + 4000 : !strcmp(s, "nvtx_inside") ? a + 3996 : a + 8;
    } else if (!strcmp(s, "stream_free")) {
        block_alloc_fn alloc = (block_alloc_fn)dlsym(RTLD_DEFAULT, "gpusan_pool_block_alloc");
        block_free_fn free_ = (block_free_fn)dlsym(RTLD_DEFAULT, "gpusan_pool_block_free");
        void *stream = 0;
        rc |= cuStreamCreate(&stream, 1 /* CU_STREAM_NON_BLOCKING */);
        if (alloc && free_) rc |= alloc(a, 4000, (uint64_t)(uintptr_t)stream, 0, 1) | free_(a, (uint64_t)(uintptr_t)stream, 0, 1);
        /* The first launch after the free records gpusan's event on the stream; a kernel it
         * starts may still be one the free's stream ordered before: it sees A live. */
        rc |= cuLaunchKernel(0, 1, 1, 1, 32, 1, 1, 0, stream, 0, 0);
        int first = play_read(m, a, a + 8, 4);
        /* The next launch finds the event done: A is freed to it. */
        rc |= cuLaunchKernel(0, 1, 1, 1, 32, 1, 1, 0, stream, 0, 0);
        int second = play_read(m, a, a + 8, 4);
        rc |= cuCtxSynchronize() | cuMemFree_v2(seg);
        printf("%s done rc=%d found=%d,%d\n", s, rc, first, second);
        return rc;
    } else {
        block_alloc_fn alloc = (block_alloc_fn)dlsym(RTLD_DEFAULT, "gpusan_pool_block_alloc");
        block_free_fn free_ = (block_free_fn)dlsym(RTLD_DEFAULT, "gpusan_pool_block_free");
        if (alloc && free_) {
            rc |= alloc(a, 4000, 0, 0, 5) | alloc(b, 512, 0, 0, 5);
            if (!strcmp(s, "uaf") || !strcmp(s, "realloc")) rc |= free_(a, 0, 0, 5);
            if (!strcmp(s, "realloc")) rc |= alloc(a, 4000, 0, 0, 5);
        }
        at = !strcmp(s, "past") ? a + 4000 : !strcmp(s, "inside") ? a + 3996 : !strcmp(s, "neighbour") ? a + 4100 : a + 8;
    }
    rc |= cuLaunchKernel(0, 1, 1, 1, 32, 1, 1, 0, 0, 0, 0);
    int found = play_read(m, a, at, 4);
    rc |= found < 0;
    rc |= cuCtxSynchronize();
    rc |= cuMemFree_v2(seg);
    printf("%s done rc=%d found=%d\n", s, rc, found);
    return rc;
}
