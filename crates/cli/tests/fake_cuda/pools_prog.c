/* Stream-ordered allocations for tests of gpusan's quarantine of `cuMemFreeAsync`, with the
 * fake driver (its pools hand the block freed last out again at the next allocation of its
 * size, unless gpusan holds it):
 *   pools_prog reuse     allocates p on a stream, frees it there, allocates q of the same
 *                        size: prints `reused=1` when q == p
 *   pools_prog evict     p and then r allocated and freed on a stream (the order of the
 *                        driver calls is in $FAKE_CUDA_ORDER)
 *   pools_prog double    frees p twice on its stream; prints both results
 *   pools_prog stale     frees p, allocates q of its size, copies from p to the host
 *   pools_prog many      100 blocks allocated and freed on one stream
 *   pools_prog oom       frees p, then allocates q of its size (run with a pool limit of
 *                        one block: only p's memory can serve it)
 *   pools_prog destroy   p from a pool of the program's, freed, then the pool destroyed
 *   pools_prog sync_free p freed by cuMemFree (not stream-ordered), then 8 KiB allocated
 *                        and freed by cuMemFree; prints the bytes the driver still has out
 *   pools_prog ptsz      p allocated and freed by the _ptsz functions on the null stream
 *   pools_prog reset     p freed, the primary context reset and retained again, then q
 *                        freed and r of its size allocated: prints `reused=1` when r == q
 *   pools_prog handle_reuse  p freed on a stream, the stream destroyed, a new one made
 *                        (the fake gives it the same handle), q freed on it
 *   pools_prog threads_ptsz  p freed by the _ptsz function on the null stream, and q so in
 *                        another thread
 * Prints `SCENARIO done rc=N`. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef int CUresult;
CUresult cuInit(unsigned);
CUresult cuDevicePrimaryCtxRetain(void **, int);
CUresult cuStreamCreate(void **, unsigned);
CUresult cuMemAllocAsync(uint64_t *, size_t, void *);
CUresult cuMemFreeAsync(uint64_t, void *);
CUresult cuStreamSynchronize(void *);
CUresult cuMemcpyDtoH_v2(void *, uint64_t, size_t);
CUresult cuMemAlloc_v2(uint64_t *, size_t);
CUresult cuMemFree_v2(uint64_t);
CUresult cuMemPoolCreate(void **, const void *);
CUresult cuMemPoolDestroy(void *);
CUresult cuMemAllocFromPoolAsync(uint64_t *, size_t, void *, void *);
CUresult cuMemAllocAsync_ptsz(uint64_t *, size_t, void *);
CUresult cuMemFreeAsync_ptsz(uint64_t, void *);
CUresult cuDevicePrimaryCtxReset_v2(int);
CUresult cuStreamDestroy_v2(void *);

/* `threads_ptsz`'s other thread. */
static void *ptsz_thread(void *arg) {
    uint64_t q = 0;
    *(int *)arg = cuMemAllocAsync_ptsz(&q, 4096, 0) | cuMemFreeAsync_ptsz(q, 0);
    return 0;
}
uint64_t fake_alloc_live_bytes(void);

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    const char *s = argv[1];
    void *ctx = 0, *st = 0;
    uint64_t p = 0, q = 0, r = 0;
    int rc = cuInit(0) | cuDevicePrimaryCtxRetain(&ctx, 0) | cuStreamCreate(&st, 0);
    if (!strcmp(s, "destroy")) {
        void *pool = 0;
        rc |= cuMemPoolCreate(&pool, 0) | cuMemAllocFromPoolAsync(&p, 4096, pool, st);
        printf("p=%#lx\n", (unsigned long)p);
        rc |= cuMemFreeAsync(p, st) | cuMemPoolDestroy(pool) | cuStreamSynchronize(st);
        printf("%s done rc=%d\n", s, rc);
        return rc != 0;
    }
    if (!strcmp(s, "threads_ptsz")) {
        pthread_t t;
        int other = 1;
        rc |= cuMemAllocAsync_ptsz(&p, 4096, 0) | cuMemFreeAsync_ptsz(p, 0);
        rc |= pthread_create(&t, 0, ptsz_thread, &other) | pthread_join(t, 0);
        printf("%s done rc=%d\n", s, rc | other);
        return (rc | other) != 0;
    }
    if (!strcmp(s, "ptsz")) {
        rc |= cuMemAllocAsync_ptsz(&p, 4096, 0) | cuMemFreeAsync_ptsz(p, 0);
        printf("p=%#lx\n%s done rc=%d\n", (unsigned long)p, s, rc);
        return rc != 0;
    }
    rc |= cuMemAllocAsync(&p, 4096, st);
    printf("p=%#lx\n", (unsigned long)p);
    if (!strcmp(s, "reuse")) {
        rc |= cuMemFreeAsync(p, st) | cuMemAllocAsync(&q, 4096, st);
        printf("reused=%d\n", q == p);
        rc |= cuMemFreeAsync(q, st);
    } else if (!strcmp(s, "evict")) {
        rc |= cuMemFreeAsync(p, st) | cuMemAllocAsync(&r, 8192, st) | cuMemFreeAsync(r, st);
    } else if (!strcmp(s, "double")) {
        int first = cuMemFreeAsync(p, st), second = cuMemFreeAsync(p, st);
        printf("first=%d second=%d\n", first, second);
        rc |= first;
    } else if (!strcmp(s, "stale")) {
        char host[64];
        rc |= cuMemFreeAsync(p, st) | cuMemAllocAsync(&q, 4096, st);
        printf("reused=%d\n", q == p);
        rc |= cuMemcpyDtoH_v2(host, p, sizeof host) | cuMemFreeAsync(q, st);
    } else if (!strcmp(s, "many")) {
        rc |= cuMemFreeAsync(p, st);
        for (int i = 0; i < 100; i++) rc |= cuMemAllocAsync(&q, 256 * (1 + i % 5), st) | cuMemFreeAsync(q, st);
    } else if (!strcmp(s, "oom")) {
        rc |= cuMemFreeAsync(p, st) | cuMemAllocAsync(&q, 4096, st) | cuMemFreeAsync(q, st);
    } else if (!strcmp(s, "sync_free")) {
        rc |= cuMemFree_v2(p) | cuMemAlloc_v2(&r, 8192) | cuMemFree_v2(r);
        printf("driver has %lu bytes out\n", (unsigned long)fake_alloc_live_bytes());
    } else if (!strcmp(s, "handle_reuse")) {
        void *again = 0;
        rc |= cuMemFreeAsync(p, st) | cuStreamDestroy_v2(st) | cuStreamCreate(&again, 0);
        printf("same handle=%d\n", again == st);
        st = again;
        rc |= cuMemAllocAsync(&q, 4096, st) | cuMemFreeAsync(q, st);
    } else if (!strcmp(s, "reset")) {
        rc |= cuMemFreeAsync(p, st) | cuDevicePrimaryCtxReset_v2(0) | cuDevicePrimaryCtxRetain(&ctx, 0);
        rc |= cuMemAllocAsync(&q, 4096, st) | cuMemFreeAsync(q, st) | cuMemAllocAsync(&r, 4096, st);
        printf("reused=%d\n", r == q);
        rc |= cuMemFreeAsync(r, st);
    } else {
        return 2;
    }
    rc |= cuStreamSynchronize(st);
    printf("%s done rc=%d\n", s, rc);
    return rc != 0;
}
