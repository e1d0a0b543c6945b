/* Stream-ordered allocations for tests of gpusan's quarantine of `cuMemFreeAsync`, with the
 * fake driver (its async allocations are aligned_alloc'd, so a freed block's address comes
 * back at the next allocation of its size unless it is held):
 *   pools_prog reuse     allocates p on a stream, frees it there, allocates q of the same
 *                        size: prints `reused=1` when q == p
 *   pools_prog evict     p and then r allocated and freed on a stream (the order of the
 *                        driver calls is in $FAKE_CUDA_ORDER)
 *   pools_prog double    frees p twice on its stream; prints both results
 * Prints `SCENARIO done rc=N`. */
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

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    const char *s = argv[1];
    void *ctx = 0, *st = 0;
    uint64_t p = 0, q = 0, r = 0;
    int rc = cuInit(0) | cuDevicePrimaryCtxRetain(&ctx, 0) | cuStreamCreate(&st, 0);
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
    } else {
        return 2;
    }
    rc |= cuStreamSynchronize(st);
    printf("%s done rc=%d\n", s, rc);
    return rc != 0;
}
