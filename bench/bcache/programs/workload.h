/* What every workload program shares: its generator, its allocation that cannot fail
 * quietly, and its one argument. Header-only, so that each program stays one file to build. */
#ifndef BCACHE_WORKLOAD_H
#define BCACHE_WORKLOAD_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Seeded xorshift: the same numbers on every run, whatever the libc. */
static inline uint64_t xorshift64(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *s = x;
    return x;
}

static inline void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        perror("malloc");
        exit(1);
    }
    return p;
}

/* `prog [THREADS]`: 16 by default; anything under 1 ends the program with its usage. */
static inline int threads_arg(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 16;
    if (n < 1) {
        fprintf(stderr, "usage: %s [THREADS]\n", argv[0]);
        exit(1);
    }
    return n;
}
#endif
