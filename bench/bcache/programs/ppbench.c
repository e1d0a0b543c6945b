/* ppbench.c -- imitates the BCache paper's ParallelPointerBench (section V-A).
 *
 * The paper: "spawns threads as many as the number of cores and generates total 2,000 global
 * and thread-specific pointers. Each thread accesses pointers 2,000 times at random"; its
 * synthetic traces use 3 % writes.
 *
 * Kept: 2,000 pointers in total, each to its own heap object (16-byte header + 1..30 words,
 * i.e. 24..256 bytes). 1,000 are global: created by the main thread, their pointer array is
 * shared by all threads and read-only after setup. 1,000 are thread-specific, split evenly
 * among the threads; each thread mallocs its own objects and keeps them in its own pointer
 * array. Each thread makes 2,000 random accesses: it picks a pointer (global or one of its own
 * slots, 50/50), loads the pointer from the pointer array in memory, then
 *   - 3 %: writes a field of the object (read-modify-write of one word),
 *   - 2 %: copies the pointer into one of its own slots (a pointer store; afterwards own slots
 *          may point at global objects, so pointer copies of both kinds exist),
 *   - otherwise: reads a field of the object.
 * Global objects may be reached by all threads, so their data words are accessed under a
 * striped mutex (the object headers are never written after creation).
 *
 * Left out: nothing of the paper's description; the paper gives no object sizes, so they are
 * chosen at random. Input size: as in the paper (2,000 pointers, 2,000 accesses per thread);
 * PARSEC input classes do not apply.
 *
 * Checksum: final contents of all objects (updates are additions, so the result does not
 * depend on the interleaving), plus each thread's sum of reads from its own objects and the
 * access counts. Values read from global objects depend on the interleaving and are not part
 * of the checksum.
 *
 * Usage: ./ppbench [THREADS]   (default 16)
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "gpusan_cputrace.h"
#include "workload.h"

#define NPTRS 2000
#define NGLOBAL (NPTRS / 2)
#define NACCESS 2000
#define NLOCKS 64
#define WRITE_PERMILLE 30 /* 3 % writes */
#define COPY_PERMILLE 20  /* 2 % pointer copies */

typedef struct Obj {
    uint64_t id;     /* < NGLOBAL: global object */
    uint64_t nwords; /* number of data words, 1..30 */
    uint64_t w[];
} Obj;

typedef struct Thread {
    pthread_t tid;
    int idx;
    int nown;
    uint64_t first_id;
    uint64_t rng;
    Obj **own;   /* objects this thread created (freed at the end) */
    Obj **slots; /* the thread-specific pointers (may receive copies) */
    uint64_t own_read_sum, own_final, nreads, nwrites, ncopies, nglobal;
    uint64_t global_read_sink; /* interleaving-dependent, not in the checksum */
} Thread;

static Obj **gslots;            /* global pointer array, read-only after setup */
static pthread_mutex_t *glocks; /* striped locks for the global objects' data */
static pthread_barrier_t start_barrier;

static inline uint64_t mix(uint64_t a, uint64_t b)
{
    uint64_t x = a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull);
    x ^= x >> 29;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 32;
    return x;
}

static Obj *new_obj(uint64_t id, uint64_t *rng)
{
    uint64_t nw = 1 + xorshift64(rng) % 30;
    Obj *o = malloc(sizeof(Obj) + nw * sizeof(uint64_t));
    if (!o) {
        perror("malloc");
        exit(1);
    }
    o->id = id;
    o->nwords = nw;
    for (uint64_t k = 0; k < nw; k++)
        o->w[k] = mix(id, k);
    return o;
}

static uint64_t obj_sum(const Obj *o)
{
    uint64_t s = o->id * 31;
    for (uint64_t k = 0; k < o->nwords; k++)
        s += o->w[k] ^ (k << 7);
    return s;
}

static void *worker(void *arg)
{
    Thread *t = arg;
    uint64_t rng = t->rng;
    int nown = t->nown;

    /* generate the thread-specific pointers */
    t->own = malloc((size_t)(nown ? nown : 1) * sizeof(Obj *));
    t->slots = malloc((size_t)(nown ? nown : 1) * sizeof(Obj *));
    for (int i = 0; i < nown; i++) {
        Obj *o = new_obj(t->first_id + (uint64_t)i, &rng);
        t->own[i] = o;
        t->slots[i] = o;
    }
    pthread_barrier_wait(&start_barrier);

    uint64_t own_sum = 0, gsink = 0, nreads = 0, nwrites = 0, ncopies = 0, nglobal = 0;
    for (int a = 0; a < NACCESS; a++) {
        uint64_t r = xorshift64(&rng);
        Obj *o;
        if ((r & 1) || nown == 0) {
            o = gslots[(r >> 1) % NGLOBAL]; /* pointer load: global array */
            nglobal++;
        } else {
            o = t->slots[(r >> 1) % (uint64_t)nown]; /* pointer load: own array */
        }
        int is_global = o->id < NGLOBAL;
        uint64_t k = (r >> 20) % o->nwords;
        uint64_t op = (r >> 40) % 1000;
        if (op < WRITE_PERMILLE) {
            uint64_t v = (r >> 8) | 1;
            if (is_global) {
                pthread_mutex_t *m = &glocks[o->id % NLOCKS];
                pthread_mutex_lock(m);
                o->w[k] += v;
                pthread_mutex_unlock(m);
            } else {
                o->w[k] += v;
            }
            nwrites++;
        } else if (op < WRITE_PERMILLE + COPY_PERMILLE && nown > 0) {
            t->slots[(r >> 50) % (uint64_t)nown] = o; /* pointer store */
            ncopies++;
        } else {
            if (is_global) {
                pthread_mutex_t *m = &glocks[o->id % NLOCKS];
                pthread_mutex_lock(m);
                gsink += o->w[k];
                pthread_mutex_unlock(m);
            } else {
                own_sum += o->w[k] * (k + 1);
            }
            nreads++;
        }
    }

    /* own objects are reachable from this thread only: summarise and free them */
    uint64_t fin = 0;
    for (int i = 0; i < nown; i++) {
        fin += obj_sum(t->own[i]);
        free(t->own[i]);
    }
    free(t->own);
    free(t->slots);
    t->own = t->slots = NULL;
    t->own_read_sum = own_sum;
    t->own_final = fin;
    t->global_read_sink = gsink;
    t->nreads = nreads;
    t->nwrites = nwrites;
    t->ncopies = ncopies;
    t->nglobal = nglobal;
    return NULL;
}

int main(int argc, char **argv)
{
    int nthreads = threads_arg(argc, argv);

    uint64_t rng = 0x5EED0001ull;
    gslots = malloc(NGLOBAL * sizeof(Obj *));
    glocks = malloc(NLOCKS * sizeof(pthread_mutex_t));
    if (!gslots || !glocks) {
        perror("malloc");
        return 1;
    }
    for (int i = 0; i < NLOCKS; i++)
        pthread_mutex_init(&glocks[i], NULL);
    for (int i = 0; i < NGLOBAL; i++)
        gslots[i] = new_obj((uint64_t)i, &rng);
    GPUSAN_READ_ONLY(gslots, NGLOBAL * sizeof(Obj *));

    Thread *th = calloc((size_t)nthreads, sizeof(Thread));
    if (!th) {
        perror("calloc");
        return 1;
    }
    int nspecific = NPTRS - NGLOBAL;
    uint64_t next_id = NGLOBAL;
    for (int i = 0; i < nthreads; i++) {
        th[i].idx = i;
        th[i].nown = nspecific / nthreads + (i < nspecific % nthreads);
        th[i].first_id = next_id;
        next_id += (uint64_t)th[i].nown;
        th[i].rng = mix(0xC0FFEEull, (uint64_t)i) | 1;
    }
    pthread_barrier_init(&start_barrier, NULL, (unsigned)nthreads);
    for (int i = 0; i < nthreads; i++)
        if (pthread_create(&th[i].tid, NULL, worker, &th[i])) {
            perror("pthread_create");
            return 1;
        }
    for (int i = 0; i < nthreads; i++)
        pthread_join(th[i].tid, NULL);

    uint64_t sum = 0, nreads = 0, nwrites = 0, ncopies = 0, nglobal = 0;
    for (int i = 0; i < NGLOBAL; i++) {
        sum += obj_sum(gslots[i]);
        free(gslots[i]);
    }
    for (int i = 0; i < nthreads; i++) {
        sum = mix(sum, th[i].own_read_sum) + th[i].own_final;
        nreads += th[i].nreads;
        nwrites += th[i].nwrites;
        ncopies += th[i].ncopies;
        nglobal += th[i].nglobal;
    }
    printf("ppbench: threads=%d pointers=%d accesses=%d global=%llu reads=%llu writes=%llu "
           "copies=%llu checksum=%016llx\n",
           nthreads, NPTRS, NACCESS * nthreads, (unsigned long long)nglobal,
           (unsigned long long)nreads, (unsigned long long)nwrites, (unsigned long long)ncopies,
           (unsigned long long)sum);

    pthread_barrier_destroy(&start_barrier);
    for (int i = 0; i < NLOCKS; i++)
        pthread_mutex_destroy(&glocks[i]);
    free(glocks);
    free(gslots);
    free(th);
    return 0;
}
