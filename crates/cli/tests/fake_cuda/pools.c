/* Part of the fake driver (included by libcuda.c, whose statics it shares): events, the
 * log of the calls stream-ordered memory makes, and the pools cuMemAllocAsync,
 * cuMemAllocFromPoolAsync and cuMemFreeAsync use outside a capture. */
/* Events, and a log of the calls stream-ordered frees make, for tests: each line
 * "create EVENT", "record EVENT STREAM", "wait STREAM EVENT", "sync EVENT", "streamsync
 * STREAM", "allocasync PTR RESULT", "freeasync PTR STREAM", "pooldestroy POOL OUTSTANDING"
 * is appended to $FAKE_CUDA_ORDER. */
static void order_log(const char *fmt, uintptr_t a, uintptr_t b) {
    const char *path = getenv("FAKE_CUDA_ORDER");
    FILE *f = path ? fopen(path, "a") : 0;
    if (!f) return;
    fprintf(f, fmt, a, b);
    fputc('\n', f);
    fclose(f);
}
/* An event belongs to the context current at its creation and goes with it: recording or
 * waiting for one of a destroyed context fails, as with the driver. */
#define MAX_EVENTS 256
static uintptr_t event_ctx[MAX_EVENTS];
static int n_events;
static int event_index(void *event) {
    uintptr_t e = (uintptr_t)event;
    if (e < 0xe010 || e >= 0xe010 + 0x10 * MAX_EVENTS) return -1;
    int i = (int)((e - 0xe010) / 0x10);
    return i < n_events && event_ctx[i] ? i : -1;
}
CUresult cuEventCreate(void **event, unsigned flags) {
    (void)flags;
    int i = __atomic_fetch_add(&n_events, 1, __ATOMIC_RELAXED);
    if (i >= MAX_EVENTS) return 2;
    event_ctx[i] = current_ctx;
    *event = (void *)(uintptr_t)(0xe000 + 0x10 * (i + 1));
    order_log("create %#lx", (uintptr_t)*event, 0);
    return 0;
}
CUresult cuEventRecord(void *event, void *stream) {
    if (event_index(event) < 0) return 400; /* CUDA_ERROR_INVALID_HANDLE */
    order_log("record %#lx %#lx", (uintptr_t)event, (uintptr_t)stream);
    return 0;
}
CUresult cuEventSynchronize(void *event) { order_log("sync %#lx %#lx", (uintptr_t)event, 0); return 0; }
CUresult cuEventDestroy_v2(void *event) {
    int i = event_index(event);
    if (i < 0) return 400;
    event_ctx[i] = 0;
    return 0;
}
CUresult cuStreamWaitEvent(void *stream, void *event, unsigned flags) {
    (void)flags;
    if (event_index(event) < 0) return 400;
    order_log("wait %#lx %#lx", (uintptr_t)stream, (uintptr_t)event);
    return 0;
}
/* Stream-ordered memory, as the driver's pools keep it: a block freed with cuMemFreeAsync
 * goes back to its pool, not to the system, and the next allocation of its size from that
 * pool gets the block freed last (the reuse that lets a stale pointer reach live data).
 * Pool 0 is the device's; cuMemPoolCreate makes 0x7001, 0x7002, … Blocks of a destroyed
 * pool or context are gone. FAKE_CUDA_ASYNC_LIMIT: bytes the pools may have allocated in
 * all (then CUDA_ERROR_OUT_OF_MEMORY, unless a freed block fits). */
#define MAX_POOL_BLOCKS 256
static struct { uint64_t ptr; size_t size; uintptr_t pool, ctx; int freed; unsigned long seq; } pool_blocks[MAX_POOL_BLOCKS];
static unsigned long pool_seq;
static int n_pools;
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static CUresult pool_alloc(uint64_t *dptr, size_t size, uintptr_t pool) {
    size_t rounded = (size + 255) / 256 * 256, total = 0;
    const char *limit = getenv("FAKE_CUDA_ASYNC_LIMIT");
    int best = -1, slot = -1, i;
    pthread_mutex_lock(&pool_lock);
    for (int k = 0; k < MAX_POOL_BLOCKS; k++) {
        if (!pool_blocks[k].ptr) { if (slot < 0) slot = k; continue; }
        total += pool_blocks[k].size;
        if (pool_blocks[k].freed && pool_blocks[k].pool == pool && pool_blocks[k].size == rounded
            && (best < 0 || pool_blocks[k].seq > pool_blocks[best].seq))
            best = k;
    }
    CUresult r = 0;
    if ((i = find(0)) < 0) {
        r = 2;
    } else if (best >= 0) {
        pool_blocks[best].freed = 0;
        *dptr = pool_blocks[best].ptr;
    } else if (slot < 0 || (limit && total + rounded > strtoull(limit, 0, 0))) {
        r = 2;
    } else {
        void *p = aligned_alloc(256, rounded);
        pool_blocks[slot].ptr = (uint64_t)(uintptr_t)p;
        pool_blocks[slot].size = rounded;
        pool_blocks[slot].pool = pool;
        pool_blocks[slot].freed = 0;
        *dptr = (uint64_t)(uintptr_t)p;
    }
    if (!r) {
        int b = best >= 0 ? best : slot;
        pool_blocks[b].ctx = current_ctx;
        live[i] = (uintptr_t)*dptr;
        live_bytes[i] = rounded;
        live_ctx[i] = current_ctx;
    }
    pthread_mutex_unlock(&pool_lock);
    order_log("allocasync %#lx %#lx", r ? 0 : (uintptr_t)*dptr, (uintptr_t)r);
    return r;
}
/* 1 when `dptr` is a block of a pool (then *r is the free's result). */
static int pool_free(uint64_t dptr, CUresult *r) {
    int found = 0;
    pthread_mutex_lock(&pool_lock);
    for (int k = 0; k < MAX_POOL_BLOCKS && !found; k++) {
        if (!dptr || pool_blocks[k].ptr != dptr) continue;
        found = 1;
        int i = find((uintptr_t)dptr);
        if (pool_blocks[k].freed || i < 0) { *r = 1; break; } /* CUDA_ERROR_INVALID_VALUE */
        if (live_ctx[i] != current_ctx) { wrong_context_frees++; *r = 201; break; }
        live[i] = 0;
        pool_blocks[k].freed = 1;
        pool_blocks[k].seq = ++pool_seq;
        *r = 0;
    }
    pthread_mutex_unlock(&pool_lock);
    return found;
}
/* Blocks of `pool` (or, for pool ~0, of context `ctx`) are gone; returns how many were still
 * allocated. */
static int pool_blocks_gone(uintptr_t pool, uintptr_t ctx) {
    int outstanding = 0;
    pthread_mutex_lock(&pool_lock);
    for (int k = 0; k < MAX_POOL_BLOCKS; k++) {
        if (!pool_blocks[k].ptr || (pool != ~(uintptr_t)0 ? pool_blocks[k].pool != pool : pool_blocks[k].ctx != ctx))
            continue;
        int i = find((uintptr_t)pool_blocks[k].ptr);
        if (!pool_blocks[k].freed) outstanding++;
        /* Still allocated: a later free of it counts as a free of dead memory. */
        if (i >= 0 && n_dead < MAX_DEAD) dead[n_dead++] = live[i];
        if (i >= 0) live[i] = 0;
        free((void *)(uintptr_t)pool_blocks[k].ptr);
        pool_blocks[k].ptr = 0;
    }
    pthread_mutex_unlock(&pool_lock);
    return outstanding;
}
CUresult cuMemAllocAsync(uint64_t *dptr, size_t size, void *stream) {
    int captured;
    CUresult r = captured_alloc(dptr, size, stream, &captured);
    return captured ? r : pool_alloc(dptr, size, 0);
}
CUresult cuMemAllocAsync_ptsz(uint64_t *dptr, size_t size, void *stream) { return cuMemAllocAsync(dptr, size, stream); }
CUresult cuMemFreeAsync(uint64_t dptr, void *stream) {
    order_log("freeasync %#lx %#lx", (uintptr_t)dptr, (uintptr_t)stream);
    int captured;
    CUresult r = captured_free(dptr, stream, &captured);
    if (captured) return r;
    if (capturing) return 0;
    return pool_free(dptr, &r) ? r : mem_free(dptr);
}
CUresult cuMemFreeAsync_ptsz(uint64_t dptr, void *stream) { return cuMemFreeAsync(dptr, stream); }
CUresult cuMemPoolCreate(void **pool, const void *props) {
    (void)props;
    *pool = (void *)(uintptr_t)(0x7000 + __atomic_add_fetch(&n_pools, 1, __ATOMIC_RELAXED));
    return 0;
}
CUresult cuMemPoolDestroy(void *pool) {
    int outstanding = pool_blocks_gone((uintptr_t)pool, 0);
    order_log("pooldestroy %#lx %#lx", (uintptr_t)pool, (uintptr_t)outstanding);
    return 0;
}
CUresult cuPointerGetAttribute(void *data, int attribute, uint64_t ptr) {
    if (attribute != 17) return 1; /* only CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE */
    CUresult r = 1;
    pthread_mutex_lock(&pool_lock);
    for (int k = 0; k < MAX_POOL_BLOCKS; k++)
        if (pool_blocks[k].ptr == ptr) { *(void **)data = (void *)pool_blocks[k].pool; r = 0; break; }
    pthread_mutex_unlock(&pool_lock);
    return r;
}
/* Memory pools: under capture an allocation node of the capture's graph, else a block of
 * the pool (see pool_alloc). */
CUresult cuMemAllocFromPoolAsync(uint64_t *dptr, size_t size, void *pool, void *stream) {
    int captured;
    CUresult r = captured_alloc(dptr, size, stream, &captured);
    return captured ? r : pool_alloc(dptr, size, (uintptr_t)pool);
}
CUresult cuMemAllocFromPoolAsync_ptsz(uint64_t *dptr, size_t size, void *pool, void *stream) {
    return cuMemAllocFromPoolAsync(dptr, size, pool, stream);
}
