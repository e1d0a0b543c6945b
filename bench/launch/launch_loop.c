/* gpusan's host cost per kernel launch and per pool block, without a GPU, through the fake
 * driver (crates/cli/tests/fake_cuda/libcuda.c), whose cuLaunchKernel does almost nothing;
 * timed with CLOCK_MONOTONIC. Run natively and under `gpusan run` by
 * bench/launch-host-cost.sh: the difference is gpusan's own work.
 *   launch_loop launches [N] [THREADS]   N launches of one kernel (each thread N, on its own
 *                                        stream, at once: what contention costs)
 *   launch_loop blocks [N] [LIVE]        N pool blocks handed out and taken back (a tensor's
 *                                        allocation and free in PyTorch's caching allocator,
 *                                        through gpusan's C ABI, gpusan_pools.h) in a 64 MiB
 *                                        segment, LIVE (default 256) at once; natively the
 *                                        ABI is absent: 0 ns
 * Prints one JSON line: {"what":..,"n":N,"threads":T,"ns_per_op":X}. */
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef int CUresult;
CUresult cuInit(unsigned);
CUresult cuDevicePrimaryCtxRetain(void **, int);
CUresult cuStreamCreate(void **, unsigned);
CUresult cuModuleLoadData(void **, const void *);
CUresult cuModuleGetFunction(void **, void *, const char *);
CUresult cuMemAlloc_v2(uint64_t *, size_t);
CUresult cuLaunchKernel(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *, void **,
                        void **);

static const char ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k(.param .u64 p)\n{\nret;\n}\n";
static void *ctx, *function;
static long n = 200000;

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static void *loop(void *arg) {
    (void)arg;
    void *stream = 0;
    cuStreamCreate(&stream, 1);
    uint64_t p = 0;
    void *params[] = {&p};
    for (long i = 0; i < n; i++) {
        if (cuLaunchKernel(function, 1, 1, 1, 32, 1, 1, 0, stream, params, 0)) {
            fprintf(stderr, "launch %ld failed\n", i);
            exit(1);
        }
    }
    return 0;
}

/* Blocks as PyTorch's allocator hands them out: in a segment, each 4,000 bytes asked for at
 * a 4 KiB slot, `live` of them live at once. The slots start at a 4 KiB boundary, as the
 * caching allocator's do (the fake driver's allocations need not): canary mode guards only
 * blocks at the pool's alignment, so a misaligned segment would measure an unguarded path. */
static long live = 256;
static double blocks(void) {
    typedef int (*alloc_fn)(uint64_t, uint64_t, uint64_t, int, uint32_t);
    typedef int (*free_fn)(uint64_t, uint64_t, int, uint32_t);
    alloc_fn block_alloc = (alloc_fn)dlsym(RTLD_DEFAULT, "gpusan_pool_block_alloc");
    free_fn block_free = (free_fn)dlsym(RTLD_DEFAULT, "gpusan_pool_block_free");
    uint64_t seg = 0;
    if (cuMemAlloc_v2(&seg, 64u << 20)) {
        fprintf(stderr, "segment allocation failed\n");
        exit(1);
    }
    if (!block_alloc || !block_free) return 0;
    enum { SOURCE_TORCH = 1 };
    seg = (seg + 4095) & ~(uint64_t)4095;
    if (live < 1 || live > 8192) live = 256; /* 8192 slots fit the segment after its alignment */
    double t0 = now_ns();
    for (long i = 0; i < n; i++) {
        uint64_t at = seg + (uint64_t)(i % live) * 4096;
        if (i >= live) block_free(at, 0, 0, SOURCE_TORCH);
        block_alloc(at, 4000, 0, 0, SOURCE_TORCH);
    }
    return (now_ns() - t0) / n;
}

int main(int argc, char **argv) {
    const char *what = argc > 1 ? argv[1] : "launches";
    if (argc > 2) n = atol(argv[2]);
    int threads = argc > 3 ? atoi(argv[3]) : 1;
    void *module;
    if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0) || cuModuleLoadData(&module, ptx) ||
        cuModuleGetFunction(&function, module, "k")) {
        fprintf(stderr, "setup failed\n");
        return 1;
    }
    double ns;
    if (!strcmp(what, "blocks")) {
        if (argc > 3) live = atol(argv[3]);
        threads = 1;
        ns = blocks();
    } else {
        loop(0); /* warm-up: first launches pay for coverage entries, sites */
        pthread_t t[64];
        if (threads > 64) threads = 64;
        double t0 = now_ns();
        for (int i = 0; i < threads; i++) pthread_create(&t[i], 0, loop, 0);
        for (int i = 0; i < threads; i++) pthread_join(t[i], 0);
        ns = (now_ns() - t0) / n;
    }
    printf("{\"what\":\"%s\",\"n\":%ld,\"threads\":%d,\"ns_per_op\":%.1f}\n", what, n, threads, ns);
    return 0;
}
