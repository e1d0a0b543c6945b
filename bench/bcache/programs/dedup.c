/* dedup.c -- imitates PARSEC "dedup" (pthreads version: deduplicating compression pipeline).
 *
 * Kept: the pipeline's stages and their data structures.
 *   Fragment:        the main thread splits the input buffer (read-only, annotated with
 *                    GPUSAN_READ_ONLY) into coarse fragments of about 16 KB, ending each at a
 *                    content-defined anchor; the fragment descriptors form a linked list that
 *                    serves as the work queue (mutex-protected).
 *   FragmentRefine:  a worker takes a fragment and cuts it into chunks with a rolling hash over
 *                    a 32-byte window (buzhash with a 256-entry table, read-only), min/max
 *                    chunk sizes; every chunk is a malloc'd chunk_t linked into its fragment.
 *   Deduplicate:     each chunk gets a 128-bit fingerprint (a small SHA-like mixing function
 *                    over 8-byte words) and is looked up in a shared hash table: array of
 *                    bucket heads, chained malloc'd entries, one mutex per bucket. The first
 *                    occurrence inserts an entry; later ones point their chunk at the entry
 *                    (duplicate).
 *   Compress:        after a barrier, the workers take the new unique entries (produced by any
 *                    thread) from a shared queue and compress them with a run-length encoder
 *                    into a malloc'd buffer, shrunk with realloc.
 *   Reorder/Output:  the main thread walks fragments and chunks in input order and "writes"
 *                    the compressed data of the first occurrence of each entry and a
 *                    fingerprint reference for duplicates (into a checksum).
 * Lots of small mallocs (chunks, entries, compressed buffers) and pointer chasing (fragment
 * list, chunk lists, hash chains, chunk -> entry pointers).
 *
 * Left out: SHA-1 (replaced by a cheaper mix), gzip/bzip2 (replaced by RLE), file I/O, the
 * queues with condition variables between separate stage thread pools (here each worker runs
 * Refine+Deduplicate, then Compress after a barrier), the decompression mode.
 *
 * Input size: a 2 MB generated input with repeated segments (simsmall: a 10 MB file). The
 * result is independent of THREADS.
 *
 * Usage: ./dedup [THREADS]   (default 16)
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gpusan_cputrace.h"
#include "workload.h"

#define INPUT_SIZE (2u << 20)
#define NSEGMENTS 96
#define COARSE_SIZE (16u << 10)
#define WINDOW 32
#define CHUNK_MASK 0x1FFu /* anchor when (hash & mask) == mask: ~512-byte chunks */
#define COARSE_MASK 0xFFFu
#define MIN_CHUNK 64u
#define MAX_CHUNK 8192u
#define NBUCKETS 4096

typedef struct entry {
    uint64_t fp[2];          /* fingerprint */
    uint32_t len;
    const uint8_t *data;     /* first occurrence in the input */
    uint8_t *cdata;          /* compressed data (Compress stage) */
    uint32_t clen;
    uint32_t refs;           /* number of chunks with this content (under the bucket lock) */
    int written;             /* Output stage: already written once */
    struct entry *chain;     /* hash bucket chain */
    struct entry *next_new;  /* per-thread list of new entries to compress */
} entry_t;

typedef struct chunk {
    const uint8_t *start;
    uint32_t len;
    uint32_t seq;
    entry_t *ent;            /* the unique entry holding this content */
    int is_dup;              /* found in the table by this chunk */
    struct chunk *next;
} chunk_t;

typedef struct fragment {
    const uint8_t *start;
    uint32_t len;
    uint32_t seq;
    chunk_t *head, *tail;
    uint32_t nchunks;
    struct fragment *next;
} fragment_t;

typedef struct hashtable {
    entry_t **buckets;
    pthread_mutex_t *locks;
    unsigned nbuckets;
} hashtable_t;

typedef struct ThreadArg {
    pthread_t tid;
    int id;
    entry_t *new_head, *new_tail; /* entries this thread inserted */
    uint64_t nchunks, ndups, ncompressed;
} ThreadArg;

static const uint8_t *input;
static const uint64_t *buz;     /* rolling hash table, read-only */
static hashtable_t *table;

static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
static fragment_t *frag_queue;  /* next fragment to refine */
static ThreadArg *targs;
static int nthreads;
static int cq_thread;           /* compress queue: position in the threads' new lists */
static entry_t *cq_next;
static pthread_barrier_t barrier;

static inline uint64_t rotl(uint64_t x, int r)
{
    return (x << r) | (x >> (64 - r));
}

/* small SHA-like fingerprint: two lanes, 8-byte words, rounds of add-rotate-xor */
static void fingerprint(const uint8_t *p, uint32_t len, uint64_t out[2])
{
    uint64_t a = 0x6A09E667F3BCC908ull ^ len, b = 0xBB67AE8584CAA73Bull;
    uint32_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        a += w;
        b ^= rotl(a, 23);
        a = rotl(a, 17) * 0x9E3779B97F4A7C15ull;
        b = b * 0xC2B2AE3D27D4EB4Full + w;
    }
    uint64_t tail = 0;
    for (; i < len; i++)
        tail = (tail << 8) | p[i];
    a ^= tail;
    for (int r = 0; r < 4; r++) {
        a += b;
        b = rotl(b, 29) ^ a;
        a = rotl(a, 41) * 0xFF51AFD7ED558CCDull;
    }
    out[0] = a;
    out[1] = b;
}

/* run-length encoding: (count, byte) pairs for runs, literals as (0x80|n, n bytes) */
static uint8_t *rle_compress(const uint8_t *p, uint32_t len, uint32_t *outlen)
{
    uint8_t *out = xmalloc(2 * (size_t)len + 2);
    uint32_t o = 0, i = 0;
    while (i < len) {
        uint32_t run = 1;
        while (i + run < len && p[i + run] == p[i] && run < 127)
            run++;
        if (run >= 3) {
            out[o++] = (uint8_t)run;
            out[o++] = p[i];
            i += run;
        } else {
            uint32_t lit = 0;
            uint32_t at = o++;
            while (i < len && lit < 127) {
                if (i + 2 < len && p[i] == p[i + 1] && p[i] == p[i + 2])
                    break;
                out[o++] = p[i++];
                lit++;
            }
            out[at] = (uint8_t)(0x80 | lit);
        }
    }
    uint8_t *shrunk = realloc(out, o ? o : 1);
    *outlen = o;
    return shrunk ? shrunk : out;
}

static chunk_t *new_chunk(fragment_t *f, const uint8_t *start, uint32_t len)
{
    chunk_t *c = xmalloc(sizeof(chunk_t));
    c->start = start;
    c->len = len;
    c->seq = f->nchunks++;
    c->ent = NULL;
    c->is_dup = 0;
    c->next = NULL;
    if (f->tail)
        f->tail->next = c;
    else
        f->head = c;
    f->tail = c;
    return c;
}

/* Deduplicate: look the chunk up, insert it if new */
static void dedup_chunk(ThreadArg *t, chunk_t *c)
{
    uint64_t fp[2];
    fingerprint(c->start, c->len, fp);
    unsigned b = (unsigned)(fp[0] % table->nbuckets);
    pthread_mutex_lock(&table->locks[b]);
    entry_t *e = table->buckets[b];
    while (e && !(e->fp[0] == fp[0] && e->fp[1] == fp[1] && e->len == c->len))
        e = e->chain;
    if (e) {
        e->refs++;
        c->is_dup = 1;
    } else {
        e = xmalloc(sizeof(entry_t));
        e->fp[0] = fp[0];
        e->fp[1] = fp[1];
        e->len = c->len;
        e->data = c->start;
        e->cdata = NULL;
        e->clen = 0;
        e->refs = 1;
        e->written = 0;
        e->chain = table->buckets[b];
        e->next_new = NULL;
        table->buckets[b] = e;
    }
    pthread_mutex_unlock(&table->locks[b]);
    c->ent = e;
    if (!c->is_dup) { /* hand it to the Compress stage */
        if (t->new_tail)
            t->new_tail->next_new = e;
        else
            t->new_head = e;
        t->new_tail = e;
    } else {
        t->ndups++;
    }
    t->nchunks++;
}

/* FragmentRefine: content-defined chunking of one coarse fragment */
static void refine(ThreadArg *t, fragment_t *f)
{
    const uint8_t *p = f->start;
    uint32_t n = f->len, begin = 0;
    uint64_t h = 0;
    for (uint32_t i = 0; i < n; i++) {
        h = rotl(h, 1) ^ buz[p[i]];
        if (i >= WINDOW)
            h ^= rotl(buz[p[i - WINDOW]], WINDOW % 64);
        uint32_t clen = i + 1 - begin;
        if ((clen >= MIN_CHUNK && (h & CHUNK_MASK) == CHUNK_MASK) || clen >= MAX_CHUNK) {
            dedup_chunk(t, new_chunk(f, p + begin, clen));
            begin = i + 1;
        }
    }
    if (begin < n)
        dedup_chunk(t, new_chunk(f, p + begin, n - begin));
}

static void *worker(void *arg)
{
    ThreadArg *t = arg;

    /* stage 1+2: FragmentRefine + Deduplicate */
    for (;;) {
        pthread_mutex_lock(&queue_lock);
        fragment_t *f = frag_queue;
        if (f)
            frag_queue = f->next;
        pthread_mutex_unlock(&queue_lock);
        if (!f)
            break;
        refine(t, f);
    }
    pthread_barrier_wait(&barrier);
    if (t->id == 0) {
        cq_thread = 0;
        cq_next = targs[0].new_head;
    }
    pthread_barrier_wait(&barrier);

    /* stage 3: Compress the new entries of all threads */
    for (;;) {
        pthread_mutex_lock(&queue_lock);
        while (!cq_next && cq_thread + 1 < nthreads)
            cq_next = targs[++cq_thread].new_head;
        entry_t *e = cq_next;
        if (e)
            cq_next = e->next_new;
        pthread_mutex_unlock(&queue_lock);
        if (!e)
            break;
        e->cdata = rle_compress(e->data, e->len, &e->clen);
        t->ncompressed++;
    }
    return NULL;
}

/* input: segments drawn from a pool of recurring segments, with runs and noise */
static uint8_t *make_input(size_t size, uint64_t *rng)
{
    uint8_t **seg = xmalloc(NSEGMENTS * sizeof(uint8_t *));
    uint32_t *seglen = xmalloc(NSEGMENTS * sizeof(uint32_t));
    for (int s = 0; s < NSEGMENTS; s++) {
        uint32_t len = 512 + (uint32_t)(xorshift64(rng) % 8192);
        seg[s] = xmalloc(len);
        seglen[s] = len;
        uint32_t i = 0;
        while (i < len) {
            uint64_t r = xorshift64(rng);
            uint32_t n = 1 + (uint32_t)((r >> 8) % 24);
            if (i + n > len)
                n = len - i;
            if (r & 1) { /* a run */
                memset(seg[s] + i, (int)((r >> 32) & 0x3F) + 'A', n);
            } else { /* text-like random bytes */
                for (uint32_t k = 0; k < n; k++)
                    seg[s][i + k] = (uint8_t)(' ' + (xorshift64(rng) >> 58) + (k & 31));
            }
            i += n;
        }
    }
    uint8_t *buf = xmalloc(size);
    size_t pos = 0;
    while (pos < size) {
        uint64_t r = xorshift64(rng);
        if ((r & 7) == 0) { /* fresh random bytes */
            uint32_t n = 64 + (uint32_t)((r >> 3) % 1024);
            for (uint32_t k = 0; k < n && pos < size; k++)
                buf[pos++] = (uint8_t)(xorshift64(rng) >> 56);
        } else { /* a recurring segment (skewed popularity) */
            uint64_t a = (r >> 3) % NSEGMENTS, b = (r >> 20) % NSEGMENTS;
            int s = (int)(a < b ? a : b);
            uint32_t n = seglen[s];
            if (pos + n > size)
                n = (uint32_t)(size - pos);
            memcpy(buf + pos, seg[s], n);
            pos += n;
        }
    }
    for (int s = 0; s < NSEGMENTS; s++)
        free(seg[s]);
    free(seg);
    free(seglen);
    return buf;
}

int main(int argc, char **argv)
{
    nthreads = threads_arg(argc, argv);
    uint64_t rng = 0xDED0F00Dull;
    uint8_t *in = make_input(INPUT_SIZE, &rng);
    uint64_t *bz = xmalloc(256 * sizeof(uint64_t));
    for (int i = 0; i < 256; i++)
        bz[i] = xorshift64(&rng);
    input = in;
    buz = bz;
    GPUSAN_READ_ONLY(in, INPUT_SIZE);
    GPUSAN_READ_ONLY(bz, 256 * sizeof(uint64_t));

    table = xmalloc(sizeof(hashtable_t));
    table->nbuckets = NBUCKETS;
    table->buckets = calloc(NBUCKETS, sizeof(entry_t *));
    table->locks = xmalloc(NBUCKETS * sizeof(pthread_mutex_t));
    if (!table->buckets) {
        perror("calloc");
        return 1;
    }
    for (int i = 0; i < NBUCKETS; i++)
        pthread_mutex_init(&table->locks[i], NULL);

    /* Fragment: coarse fragments ending at content anchors */
    fragment_t *frags = NULL, *ftail = NULL;
    uint32_t nfrags = 0, pos = 0;
    while (pos < INPUT_SIZE) {
        uint32_t end = pos + COARSE_SIZE;
        if (end >= INPUT_SIZE) {
            end = INPUT_SIZE;
        } else {
            /* scan at most COARSE_SIZE further for an anchor */
            uint64_t h = 0;
            uint32_t i0 = end - WINDOW, limit = end + COARSE_SIZE, i;
            if (limit > INPUT_SIZE)
                limit = INPUT_SIZE;
            for (i = i0; i < limit; i++) {
                h = rotl(h, 1) ^ buz[input[i]];
                if (i >= i0 + WINDOW)
                    h ^= rotl(buz[input[i - WINDOW]], WINDOW % 64);
                if (i >= end && (h & COARSE_MASK) == COARSE_MASK)
                    break;
            }
            end = i < limit ? i + 1 : limit;
        }
        fragment_t *f = xmalloc(sizeof(fragment_t));
        f->start = input + pos;
        f->len = end - pos;
        f->seq = nfrags++;
        f->head = f->tail = NULL;
        f->nchunks = 0;
        f->next = NULL;
        if (ftail)
            ftail->next = f;
        else
            frags = f;
        ftail = f;
        pos = end;
    }
    frag_queue = frags;

    targs = calloc((size_t)nthreads, sizeof(ThreadArg));
    if (!targs) {
        perror("calloc");
        return 1;
    }
    pthread_barrier_init(&barrier, NULL, (unsigned)nthreads);
    for (int i = 0; i < nthreads; i++) {
        targs[i].id = i;
        if (pthread_create(&targs[i].tid, NULL, worker, &targs[i])) {
            perror("pthread_create");
            return 1;
        }
    }
    uint64_t nchunks = 0, ncompressed = 0;
    for (int i = 0; i < nthreads; i++) {
        pthread_join(targs[i].tid, NULL);
        nchunks += targs[i].nchunks;
        ncompressed += targs[i].ncompressed;
    }

    /* Reorder + Output: first occurrence in input order writes the compressed data */
    uint64_t hsh = 0xcbf29ce484222325ull, out_bytes = 0, unique = 0, dup_bytes = 0;
    for (fragment_t *f = frags; f; f = f->next)
        for (chunk_t *c = f->head; c; c = c->next) {
            entry_t *e = c->ent;
            if (!e->written) {
                for (uint32_t k = 0; k < e->clen; k++)
                    hsh = (hsh ^ e->cdata[k]) * 0x100000001b3ull;
                out_bytes += e->clen + 1;
                e->written = 1;
                unique++;
            } else {
                hsh = (hsh ^ e->fp[0] ^ e->fp[1]) * 0x100000001b3ull;
                out_bytes += 17;
                dup_bytes += c->len;
            }
        }
    printf("dedup: threads=%d input=%u fragments=%u chunks=%llu unique=%llu dup_bytes=%llu "
           "out_bytes=%llu checksum=%016llx\n",
           nthreads, INPUT_SIZE, nfrags, (unsigned long long)nchunks,
           (unsigned long long)unique, (unsigned long long)dup_bytes,
           (unsigned long long)out_bytes, (unsigned long long)hsh);
    if (unique != ncompressed)
        fprintf(stderr, "dedup: %llu entries but %llu compressed\n", (unsigned long long)unique,
                (unsigned long long)ncompressed);

    /* free everything */
    for (fragment_t *f = frags; f;) {
        for (chunk_t *c = f->head; c;) {
            chunk_t *cn = c->next;
            free(c);
            c = cn;
        }
        fragment_t *fn = f->next;
        free(f);
        f = fn;
    }
    for (unsigned b = 0; b < table->nbuckets; b++) {
        for (entry_t *e = table->buckets[b]; e;) {
            entry_t *en = e->chain;
            free(e->cdata);
            free(e);
            e = en;
        }
        pthread_mutex_destroy(&table->locks[b]);
    }
    free(table->buckets);
    free(table->locks);
    free(table);
    pthread_barrier_destroy(&barrier);
    free(targs);
    free(bz);
    free(in);
    return 0;
}
