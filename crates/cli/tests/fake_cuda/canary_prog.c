/* Canary mode (`gpusan run --mode canary`) with the fake driver (tests/canary.rs):
 *   canary_prog SCENARIO
 * The fake plays gpusan's canary kernels on the host (canary.c), so an overflow is a plain
 * store past an allocation's end; a kernel named "oob" is launched first so the finding can
 * name it.
 *   clean         a 1000-byte allocation used in bounds, 30 ms for scans, freed
 *   overflow      a byte 3 past its end overwritten, 30 ms, freed
 *   idle          as clean, idle 300 ms before the free (the guard backs off)
 *   edges         16 KiB; a byte in the middle of its 512-byte canary overwritten, then
 *                 one of its last (an underflow of the next allocation), 30 ms, freed
 *   overflow_exit overwritten, 30 ms, exit (nothing freed)
 *   overflow_free overwritten, then freed at once
 *   reset         overwritten, then the primary context reset
 *   pool          torch blocks A (1000 B) and B (512 B, at A + 1024) in a 64 KiB segment,
 *                 the stream synchronized; after 30 ms a byte 2 past A's end overwritten,
 *                 30 ms, blocks freed
 *   pool_clean    the same without the overwrite
 *   pool_nosync   pool_clean without the stream synchronized after the blocks, 80 ms
 *   pool_again    a 1000-byte block taken back and handed out again at the same place and
 *                 size, overwritten 2 past its end at once (no synchronization after)
 *   pool_padded   a 1024-byte block asked for with 32 bytes of padding (its slack, 512 B,
 *                 holds a canary), then a plain 512-byte one (no slack); a byte 2 past the
 *                 first's end overwritten after 30 ms
 *   pool_reuse    A freed and a 2048-byte block C handed out at its address, all of C
 *                 written (A's old slack among it), 30 ms, C freed
 *   pool_segment  the segment freed with A and B still handed out (`empty_cache` after a
 *                 leak), 30 ms
 *   async         1000 bytes from cuMemAllocAsync on a stream, overwritten 3 past its end,
 *                 30 ms, freed with cuMemFreeAsync, 30 ms
 *   async_evict   two such allocations, 30 launches 1 ms apart, both freed (the second free evicts the first
 *                 from a quarantine of 1500 bytes), 30 ms
 *   fault         an allocation, then a kernel named fault_me (the fake's sticky fault: every
 *                 later query of the context fails), 30 ms, exit
 *   many          3000 allocations of 100 bytes, 2000 freed, 50 ms, one byte past a live
 *                 one overwritten, 30 ms
 *   fork          overflow, then a child forked (it exits at once, running exit handlers),
 *                 waited for, 30 ms, freed
 *   fork_first    a child forked before CUDA is initialised runs `overflow` itself; the
 *                 parent only waits for it
 *   range         1000 bytes allocated; prints `asked=N range=M`: what the driver was asked
 *                 for and what cuMemGetAddressRange says
 *   threads       4 threads, each 300 rounds of allocating (random sizes), writing every
 *                 byte asked for, and freeing, while the guard scans
 *   capture       a stream captures in global mode; a torch block (1000 B) handed out on it,
 *                 20 ms (the guard runs); capture ended; 30 ms; a byte past the block
 *                 overwritten; 30 ms. Prints `invalidations=N`; appends `endcapture STREAM` to
 *                 $FAKE_CUDA_ORDER when the capture ended.
 * Prints `SCENARIO done rc=0`; the scenarios that overwrite `a + 1003` print
 * `overwrite_unix_us=T` (CLOCK_REALTIME read just before the store: no scan can see the
 * store earlier). */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef int CUresult;
CUresult cuInit(unsigned);
CUresult cuDevicePrimaryCtxRetain(void **, int);
CUresult cuDevicePrimaryCtxReset_v2(int);
CUresult cuMemAlloc_v2(uint64_t *, size_t);
CUresult cuMemFree_v2(uint64_t);
CUresult cuModuleLoadData(void **, const void *);
CUresult cuModuleGetFunction(void **, void *, const char *);
CUresult cuLaunchKernel(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *, void **,
                        void **);
CUresult cuCtxSynchronize(void);
CUresult cuGetProcAddress_v2(const char *, void **, int, uint64_t, int *);
CUresult cuModuleGetGlobal_v2(uint64_t *, size_t *, void *, const char *);
CUresult cuLibraryGetGlobal(uint64_t *, size_t *, void *, const char *);
CUresult cuLibraryLoadData(void **, const void *, int *, void **, unsigned, int *, void **, unsigned);
CUresult cuStreamCreate(void **, unsigned);
CUresult cuMemAllocAsync(uint64_t *, size_t, void *);
CUresult cuMemFreeAsync(uint64_t, void *);
CUresult cuStreamBeginCapture_v2(void *, int);
CUresult cuStreamEndCapture(void *, void **);
int fake_capture_invalidations(void);
size_t fake_alloc_asked(uint64_t);
CUresult cuMemGetAddressRange_v2(uint64_t *, size_t *, uint64_t);
void fake_set_context(uintptr_t);

static void *churn(void *arg) {
    unsigned seed = (unsigned)(uintptr_t)arg;
    int rc = 0;
    for (int i = 0; i < 300; i++) {
        size_t n = 1 + rand_r(&seed) % 5000;
        uint64_t p;
        rc |= cuMemAlloc_v2(&p, n);
        if (!rc) memset((void *)(uintptr_t)p, 0x33, n);
        rc |= cuMemFree_v2(p);
    }
    return (void *)(uintptr_t)rc;
}

static void sleep_ms(int ms) {
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&t, 0);
}

static void launch_oob(void) {
    static const char ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry oob() { ret; }\n";
    void *module, *f;
    cuModuleLoadData(&module, ptx);
    cuModuleGetFunction(&f, module, "oob");
    cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, 0, 0, 0);
}

static void overwrite(uint64_t at) { *(volatile uint8_t *)(uintptr_t)at ^= 0xff; }

/* CLOCK_REALTIME in microseconds, as a finding's times are. */
static uint64_t unix_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (uint64_t)t.tv_sec * 1000000u + (uint64_t)t.tv_nsec / 1000u;
}

typedef int (*block_alloc_fn)(uint64_t, uint64_t, uint64_t, int, unsigned);
typedef int (*block_free_fn)(uint64_t, uint64_t, int, unsigned);

int main(int argc, char **argv) {
    const char *s = argc > 1 ? argv[1] : "clean";
    void *ctx;
    if (!strcmp(s, "fork_first")) {
        fflush(stdout);
        pid_t child = fork();
        if (child == 0) {
            char *args[] = {argv[0], "overflow", 0};
            main(2, args);
            exit(0);
        }
        int status = 0;
        waitpid(child, &status, 0);
        printf("%s done rc=%d\n", s, !WIFEXITED(status) || WEXITSTATUS(status));
        return 0;
    }
    int rc = cuInit(0) | cuDevicePrimaryCtxRetain(&ctx, 0);
    uint64_t a = 0;
    if (!strcmp(s, "capture")) {
        block_alloc_fn alloc = (block_alloc_fn)dlsym(RTLD_DEFAULT, "gpusan_pool_block_alloc");
        uint64_t seg;
        void *st, *graph;
        rc |= cuMemAlloc_v2(&seg, 64 << 10) | !alloc | cuStreamCreate(&st, 0);
        if (rc) goto done;
        uint64_t base = (seg + 511) & ~511ull;
        rc |= cuStreamBeginCapture_v2(st, 0 /* CU_STREAM_CAPTURE_MODE_GLOBAL */);
        rc |= alloc(base, 1000, (uint64_t)(uintptr_t)st, 0, 1);
        sleep_ms(20);
        rc |= cuStreamEndCapture(st, &graph);
        const char *log = getenv("FAKE_CUDA_ORDER");
        FILE *f = log ? fopen(log, "a") : 0;
        if (f) { fprintf(f, "endcapture %#lx\n", (unsigned long)(uintptr_t)st); fclose(f); }
        sleep_ms(30);
        overwrite(base + 1001);
        sleep_ms(30);
        printf("invalidations=%d\n", fake_capture_invalidations());
    } else if (!strncmp(s, "pool", 4)) {
        block_alloc_fn alloc = (block_alloc_fn)dlsym(RTLD_DEFAULT, "gpusan_pool_block_alloc");
        block_free_fn release = (block_free_fn)dlsym(RTLD_DEFAULT, "gpusan_pool_block_free");
        uint64_t seg;
        rc |= cuMemAlloc_v2(&seg, 64 << 10) | !alloc | !release;
        if (rc) goto done;
        uint64_t base = (seg + 511) & ~511ull;
        if (!strcmp(s, "pool_again")) {
            /* A 1000-byte block, its canary written (the stream synchronized), taken back
             * and handed out again at the same place and size; its new user writes a byte 2
             * past its end at once, with no synchronization after. */
            rc |= alloc(base, 1000, 0, 0, 1);
            rc |= cuStreamSynchronize(0);
            sleep_ms(20);
            rc |= release(base, 0, 0, 1) | alloc(base, 1000, 0, 0, 1);
            launch_oob();
            overwrite(base + 1002);
            sleep_ms(20);
            release(base, 0, 0, 1);
            rc |= cuMemFree_v2(seg);
            goto done;
        }
        if (!strcmp(s, "pool_padded")) {
            /* A 1024-byte block the pool was asked 32 bytes more for (GPUSAN_POOL_PADDED):
             * its block ends at 1536, where a plain 512-byte block follows. */
            rc |= alloc(base, 1024, 0, 0, 1u | (32u << 16)) | alloc(base + 1536, 512, 0, 0, 1);
            launch_oob();
            rc |= cuStreamSynchronize(0);
            sleep_ms(30);
            overwrite(base + 1024 + 2);
            sleep_ms(30);
            release(base, 0, 0, 1);
            release(base + 1536, 0, 0, 1);
            rc |= cuMemFree_v2(seg);
            goto done;
        }
        rc |= alloc(base, 1000, 0, 0, 1) | alloc(base + 1024, 512, 0, 0, 1);
        launch_oob();
        // As PyTorch at every `.item()`: the blocks' canaries are written after it, with no
        // event of gpusan's in the stream. Without it, they wait 32 rounds for one.
        if (!strcmp(s, "pool_ctxsync")) {
            /* cudaDeviceSynchronize as CUDA 13's cudart makes it: the driver's function for
             * `cuCtxSynchronize` at version 13000 (cuCtxSynchronize_v2), on no context. */
            CUresult (*sync)(void *) = 0;
            int found = 0;
            rc |= cuGetProcAddress_v2("cuCtxSynchronize", (void **)&sync, 13000, 0, &found) | !sync;
            if (sync) rc |= sync(0);
            sleep_ms(30);
        } else if (strcmp(s, "pool_nosync")) {
            rc |= cuStreamSynchronize(0);
            sleep_ms(30);
        } else {
            sleep_ms(80);
        }
        if (!strcmp(s, "pool")) overwrite(base + 1002);
        if (!strcmp(s, "pool_segment")) {
            rc |= cuMemFree_v2(seg);
            sleep_ms(30);
            goto done;
        }
        if (!strcmp(s, "pool_reuse")) {
            rc |= release(base, 0, 0, 1) | alloc(base, 2048 - 1024, 0, 0, 1);
            memset((void *)(uintptr_t)base, 0x5a, 1024);
        }
        sleep_ms(30);
        release(base, 0, 0, 1);
        release(base + 1024, 0, 0, 1);
        rc |= cuMemFree_v2(seg);
    } else if (!strcmp(s, "async")) {
        void *st;
        rc |= cuStreamCreate(&st, 1) | cuMemAllocAsync(&a, 1000, st);
        if (rc) goto done;
        launch_oob();
        overwrite(a + 1003);
        sleep_ms(30);
        rc |= cuMemFreeAsync(a, st);
        sleep_ms(30);
    } else if (!strcmp(s, "heap") || !strcmp(s, "heap_library")) {
        /* A module whose kernel calls the device heap: gpusan loads it rewritten
         * (gpusan_passes::canary_heap) and sets its secret and records' buffer. The fake
         * runs no PTX: this program writes the record gpusan's `free` would write for a
         * 100-byte block whose canary's 4th byte was overwritten with 0x5a. */
        static const char heap_ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
            ".extern .func (.param .b64 func_retval0) malloc(.param .b64 malloc_param_0);\n"
            ".extern .func free(.param .b64 free_param_0);\n"
            ".visible .entry k(.param .u64 n)\n{\n\t.reg .b64 %rd<4>;\n\tld.param.u64 %rd1, [n];\n"
            "\t{\n\t.param .b64 param0;\n\tst.param.b64 [param0], %rd1;\n\t.param .b64 retval0;\n"
            "\tcall.uni (retval0), malloc, (param0);\n\tld.param.b64 %rd2, [retval0];\n\t}\n"
            "\tst.u8 [%rd2], 1;\n"
            "\t{\n\t.param .b64 param0;\n\tst.param.b64 [param0], %rd2;\n\tcall.uni free, (param0);\n\t}\n"
            "\tret;\n}\n";
        /* heap_library: as cudart 13 loads a program's kernels (cuLibraryLoadData). */
        int library = !strcmp(s, "heap_library");
        void *module;
        uint64_t at = 0, secret = 0, errors = 0;
        size_t bytes = 0;
        CUresult (*get)(uint64_t *, size_t *, void *, const char *) = library ? cuLibraryGetGlobal : cuModuleGetGlobal_v2;
        rc |= library ? cuLibraryLoadData(&module, heap_ptx, 0, 0, 0, 0, 0, 0) : cuModuleLoadData(&module, heap_ptx);
        rc |= get(&at, &bytes, module, "__gpusan_canary_heap_secret");
        if (!rc) secret = *(uint64_t *)(uintptr_t)at;
        rc |= get(&at, &bytes, module, "__gpusan_canary_heap_errors");
        if (!rc) errors = *(uint64_t *)(uintptr_t)at;
        printf("secret=%llu errors_set=%d\n", (unsigned long long)secret, errors != 0);
        if (rc || !errors) goto done;
        static unsigned char block[256];
        unsigned char *r = (unsigned char *)(uintptr_t)errors;
        unsigned idx = __atomic_fetch_add((unsigned *)r, 1, __ATOMIC_RELAXED);
        unsigned char *rec = r + 16 + 32 * idx;
        uint64_t base = (uint64_t)(uintptr_t)block, size = 100;
        unsigned first = 3, bad = 1, found = 0x5a;
        memcpy(rec, &base, 8);
        memcpy(rec + 8, &size, 8);
        memcpy(rec + 16, &first, 4);
        memcpy(rec + 20, &bad, 4);
        memcpy(rec + 28, &found, 4);
        __atomic_store_n((unsigned *)(rec + 24), 1u, __ATOMIC_RELEASE);
        printf("base=%llu\n", (unsigned long long)base);
        sleep_ms(30);
    } else if (!strcmp(s, "edges")) {
        /* 16 KiB (no slack: the canary fills a granule more, 512 bytes); a byte in its middle
         * overwritten (not checked), then one of its last bytes (what an underflow of the
         * allocation after it would meet). */
        rc |= cuMemAlloc_v2(&a, 16384);
        if (rc) goto done;
        launch_oob();
        overwrite(a + 16384 + 200);
        sleep_ms(20);
        overwrite(a + 16384 + 510);
        sleep_ms(30);
        rc |= cuMemFree_v2(a);
    } else if (!strcmp(s, "async_evict")) {
        void *st;
        uint64_t b;
        rc |= cuStreamCreate(&st, 1) | cuMemAllocAsync(&a, 1000, st) | cuMemAllocAsync(&b, 1000, st);
        // Busy (a launch a millisecond): the guard keeps a scan in flight, as it does while
        // a program works.
        for (int i = 0; i < 30; i++) {
            launch_oob();
            sleep_ms(1);
        }
        rc |= cuMemFreeAsync(a, st) | cuMemFreeAsync(b, st);
        sleep_ms(30);
    } else if (!strcmp(s, "fault")) {
        static const char ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry fault_me() { ret; }\n";
        void *module, *f;
        rc |= cuMemAlloc_v2(&a, 1000) | cuModuleLoadData(&module, ptx) | cuModuleGetFunction(&f, module, "fault_me");
        cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, 0, 0, 0);
        sleep_ms(30);
    } else if (!strcmp(s, "two_devices")) {
        /* An allocation on each of two devices (contexts 0x1000 and 0x2000; FAKE_CUDA_DEVICES=2
         * puts 0x2000 on device 1), a kernel launched on device 0 only, and a store past each
         * end (device 1's through peer access): each context's guard scans its own
         * allocation, and device 0's kernel is named for both. */
        uint64_t c = 0;
        rc |= cuMemAlloc_v2(&a, 1000);
        fake_set_context(0x2000);
        rc |= cuMemAlloc_v2(&c, 2000);
        fake_set_context(0x1000);
        launch_oob();
        if (rc) goto done;
        overwrite(a + 1003);
        overwrite(c + 2001);
        sleep_ms(40);
        rc |= cuMemFree_v2(a);
        fake_set_context(0x2000);
        rc |= cuMemFree_v2(c);
        fake_set_context(0x1000);
    } else if (!strcmp(s, "range")) {
        uint64_t base = 0;
        size_t size = 0;
        rc |= cuMemAlloc_v2(&a, 1000) | cuMemGetAddressRange_v2(&base, &size, a + 10);
        printf("asked=%zu range=%zu base_ok=%d\n", fake_alloc_asked(a), size, base == a);
    } else if (!strcmp(s, "threads")) {
        pthread_t t[4];
        for (int i = 0; i < 4; i++) pthread_create(&t[i], 0, churn, (void *)(uintptr_t)(i + 1));
        for (int i = 0; i < 4; i++) {
            void *r;
            pthread_join(t[i], &r);
            rc |= (int)(uintptr_t)r;
        }
    } else if (!strcmp(s, "many")) {
        static uint64_t p[3000];
        for (int i = 0; i < 3000; i++) rc |= cuMemAlloc_v2(&p[i], 100);
        for (int i = 0; i < 3000; i++)
            if (i % 3) rc |= cuMemFree_v2(p[i]);
        launch_oob();
        sleep_ms(50);
        overwrite(p[2400] + 100);
        sleep_ms(30);
    } else {
        rc |= cuMemAlloc_v2(&a, 1000);
        if (rc) goto done;
        launch_oob();
        memset((void *)(uintptr_t)a, 1, 1000);
        if (strcmp(s, "clean") && strcmp(s, "idle")) {
            uint64_t t = unix_us();
            overwrite(a + 1003);
            printf("overwrite_unix_us=%llu\n", (unsigned long long)t);
        }
        if (!strcmp(s, "fork")) {
            fflush(stdout);
            pid_t child = fork();
            if (child == 0) exit(0);
            int status = 0;
            waitpid(child, &status, 0);
            rc |= !WIFEXITED(status) || WEXITSTATUS(status);
        }
        if (!strcmp(s, "clean") || !strcmp(s, "overflow") || !strcmp(s, "fork")) {
            sleep_ms(30);
            rc |= cuMemFree_v2(a);
        } else if (!strcmp(s, "idle")) {
            sleep_ms(300);
            rc |= cuMemFree_v2(a);
        } else if (!strcmp(s, "overflow_exit")) {
            sleep_ms(30);
        } else if (!strcmp(s, "overflow_free")) {
            rc |= cuMemFree_v2(a);
        } else if (!strcmp(s, "reset")) {
            rc |= cuDevicePrimaryCtxReset_v2(0);
        }
    }
done:
    printf("%s done rc=%d\n", s, rc);
    return 0;
}
