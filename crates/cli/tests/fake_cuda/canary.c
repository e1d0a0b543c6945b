/* Part of the fake driver (included by libcuda.c, whose statics it shares): canary mode's
 * kernels, played on the host. The fake's device memory is host memory, so gpusan's write,
 * update and scan kernels (crates/inject/canary/gpusan_canary.cu, layouts in
 * gpusan_abi::canary) are recognized by name at cuLaunchKernel and done here with the same
 * hash: a test plants an overflow byte with a plain store and sees the finding end to end.
 * The batch kernel (a small batch's update and scan in one launch) logs one line, named
 * gpusan_canary_batch with the scan's count.
 * Also the priority streams the guard makes (refused under FAKE_CUDA_NO_PRIORITY_STREAMS). FAKE_CUDA_CANARY_LOG names a file each of
 * those launches appends a line to: `KERNEL stream_flags=F priority=P n=N stream=S`. A record
 * is stamped with CLOCK_REALTIME in nanoseconds, where the real scan reads %globaltimer. */

#include <time.h>

static int stream_priority[MAX_STREAMS];
CUresult cuCtxGetStreamPriorityRange(int *least, int *greatest) {
    if (least) *least = 0;
    if (greatest) *greatest = -5;
    return 0;
}
CUresult cuStreamCreateWithPriority(void **out, unsigned flags, int priority) {
    if (getenv("FAKE_CUDA_NO_PRIORITY_STREAMS")) return 801; /* CUDA_ERROR_NOT_SUPPORTED */
    pthread_mutex_lock(&streams_lock);
    for (int i = 0; i < MAX_STREAMS; i++)
        if (!streams[i].used) {
            streams[i] = (struct stream){.used = 1, .flags = (int)flags};
            stream_priority[i] = priority;
            *out = &streams[i];
            pthread_mutex_unlock(&streams_lock);
            return 0;
        }
    pthread_mutex_unlock(&streams_lock);
    return 2;
}

/* Every batch of gpusan's "took" 12 µs. */
CUresult cuEventElapsedTime(float *ms, void *start, void *end) {
    (void)start; (void)end;
    *ms = 0.012f;
    return 0;
}
CUresult cuEventElapsedTime_v2(float *ms, void *start, void *end) { return cuEventElapsedTime(ms, start, end); }

static uint64_t canary_mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static uint8_t canary_byte(uint64_t secret, uint64_t a, uint64_t end) {
    uint64_t w = canary_mix64(secret ^ (a & ~7ull) ^ ((end << 29) | (end >> 35)));
    return (uint8_t)(w >> (8 * (a & 7)));
}
struct canary_entry { uint64_t start; uint32_t len, generation; };
struct canary_command { uint32_t index, flags; struct canary_entry e; uint32_t cancelled, pad; };
struct canary_record {
    uint32_t index, generation;
    uint64_t address;
    uint32_t bad, scan;
    uint8_t expected, found, pad[6];
    uint64_t gpu_ns;
};

/* The fake's %globaltimer: CLOCK_REALTIME in nanoseconds (a real GPU's counts from an
 * epoch of its own). */
static uint64_t canary_globaltimer(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void canary_log(const char *kernel, void *stream, unsigned n) {
    const char *path = getenv("FAKE_CUDA_CANARY_LOG");
    FILE *f = path ? fopen(path, "a") : 0;
    if (!f) return;
    struct stream *s = stream_of(stream);
    int i = s ? (int)(s - streams) : -1;
    fprintf(f, "%s stream_flags=%d priority=%d n=%u stream=%#lx\n", kernel, s ? s->flags : -1,
            i >= 0 ? stream_priority[i] : 99, n, (unsigned long)(uintptr_t)stream);
    fclose(f);
}

static void canary_write(uint64_t secret, uint64_t start, uint32_t len) {
    for (uint32_t i = 0; i < len; i++) ((volatile uint8_t *)(uintptr_t)start)[i] = canary_byte(secret, start + i, start);
}

static void canary_scan(uint64_t secret, const struct canary_entry *entries, uint32_t count, uint8_t *errors,
                        uint32_t scan) {
    for (uint32_t i = 0; i < count; i++) {
        struct canary_entry e = entries[i];
        if (!e.len) continue;
        uint32_t bad = 0;
        uint64_t first = 0;
        uint8_t want = 0, have = 0;
        for (uint32_t j = 0; j < e.len; j++) {
            /* Only the first and last 32 bytes (gpusan_abi::canary::checked). */
            if (j >= 32 && e.len - j > 32) continue;
            uint8_t w = canary_byte(secret, e.start + j, e.start), h = ((volatile uint8_t *)(uintptr_t)e.start)[j];
            if (w == h) continue;
            if (!bad++) { first = e.start + j; want = w; have = h; }
        }
        if (!bad) continue;
        uint32_t slot = __atomic_fetch_add((uint32_t *)errors, 1, __ATOMIC_RELAXED);
        if (slot >= 256) continue;
        struct canary_record *r = (struct canary_record *)(errors + 16 + 40 * slot);
        *r = (struct canary_record){.index = i, .generation = e.generation, .address = first, .bad = bad,
                                    .scan = scan, .expected = want, .found = have, .gpu_ns = canary_globaltimer()};
    }
}

/* The update kernel's work (its parameters first in the batch kernel's too). */
static void canary_update(void *stream, void **params) {
    uint64_t secret = *(uint64_t *)params[0];
    struct canary_entry *entries = (struct canary_entry *)(uintptr_t)*(uint64_t *)params[1];
    const struct canary_command *c = (const struct canary_command *)(uintptr_t)*(uint64_t *)params[2];
    uint32_t n = *(uint32_t *)params[3];
    uint32_t bytes = 0;
    for (uint32_t k = 0; k < n; k++) bytes += !c[k].cancelled && (c[k].flags & 1);
    /* Which updates write canary bytes (others only write entries). */
    if (bytes) canary_log("gpusan_canary_update_bytes", stream, bytes);
    for (uint32_t k = 0; k < n; k++) {
        if (c[k].cancelled) { entries[c[k].index] = (struct canary_entry){0, 0, 0}; continue; }
        if (c[k].flags & 1) canary_write(secret, c[k].e.start, c[k].e.len);
        entries[c[k].index] = c[k].e;
    }
}
/* gpusan's canary kernels, by name: done here, and 1 returned; 0 for any other kernel. */
static int canary_launch(void *f, void *stream, void **params) {
    uintptr_t p = (uintptr_t)f, i = (p - 0x4100) / 0x10;
    if (p < 0x4100 || p >= 0x4200 || (int)i >= kernel_count) return 0;
    const char *name = kernel_names[i];
    if (!strcmp(name, "gpusan_canary_write")) {
        canary_log(name, stream, *(uint32_t *)params[2]);
        canary_write(*(uint64_t *)params[0], *(uint64_t *)params[1], *(uint32_t *)params[2]);
        return 1;
    }
    if (!strcmp(name, "gpusan_canary_update")) {
        canary_log(name, stream, *(uint32_t *)params[3]);
        canary_update(stream, params);
        return 1;
    }
    if (!strcmp(name, "gpusan_canary_batch")) {
        /* The update's first four parameters, then the scan's count, errors and number. */
        canary_log(name, stream, *(uint32_t *)params[4]);
        canary_update(stream, params);
        canary_scan(*(uint64_t *)params[0], (const struct canary_entry *)(uintptr_t)*(uint64_t *)params[1],
                    *(uint32_t *)params[4], (uint8_t *)(uintptr_t)*(uint64_t *)params[5], *(uint32_t *)params[6]);
        return 1;
    }
    if (!strcmp(name, "gpusan_canary_scan")) {
        uint32_t n = *(uint32_t *)params[2];
        canary_log(name, stream, n);
        canary_scan(*(uint64_t *)params[0], (const struct canary_entry *)(uintptr_t)*(uint64_t *)params[1], n,
                    (uint8_t *)(uintptr_t)*(uint64_t *)params[3], *(uint32_t *)params[4]);
        return 1;
    }
    return 0;
}
