/* streamcluster.c -- imitates PARSEC "streamcluster" (pthreads version, online k-median).
 *
 * Kept: the original's data structures and parallel algorithm.
 *   - struct Point { float weight; float *coord; long assign; float cost; } and
 *     struct Points { long num; int dim; Point *p; }: every point holds a pointer into one
 *     malloc'd coordinate block (coordinates are read-only, annotated with GPUSAN_READ_ONLY).
 *   - streamCluster(): the input is consumed chunk by chunk; localSearch() -> pkmedian() on each
 *     chunk, then contcenters()/copycenters() append the weighted medians to a `centers` Points
 *     (with its own coordinate block); a final localSearch() clusters the centers.
 *   - pkmedian(): hiz from per-thread partial sums, binary search on the facility cost z,
 *     pspeedy() (thread 0 draws which points open as facilities, all threads reassign their
 *     range), selectfeasible_fast(), pFL() calling pgain() ITER*kmax*log(kmax) times per round.
 *   - pgain(): per-thread blocks of a work_mem array malloc'd/freed by thread 0 on every call
 *     (stride padded to a cache line), center_table prefix sums, switch_membership/is_center
 *     arrays, gl_lower, the barriers between the steps, and point reassignment on a gain.
 *   - shuffle() swaps whole Point structs (including their coord pointers).
 * Thread 0's decisions use its own xorshift RNG (the original uses lrand48).
 *
 * Differences: the workers are created once (the original creates threads per localSearch);
 * pspeedy's condition-variable hand-off is replaced by two barriers per opened facility;
 * contcenters() averages into the copied centers instead of overwriting the points'
 * coordinates (so those stay read-only); a racy write in the original pgain's "no gain" branch
 * is avoided; no file output. Points are drawn around random cluster centres (the original's
 * SimStream draws uniform points).
 *
 * Input size: 448 points in one chunk, dim 32, kmin 10, kmax 20 (simsmall: 4,096 points in
 * one chunk, dim 32, kmin 10, kmax 20). The local search makes 537 pgain() calls.
 *
 * The result depends on THREADS (as in the original, partial sums are per-thread), but not
 * on the interleaving.
 *
 * Usage: ./streamcluster [THREADS]   (default 16)
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gpusan_cputrace.h"
#include "workload.h"

#define DIM 32
#define CHUNKSIZE 448
#define NCHUNKS 1
#define KMIN 10
#define KMAX 20
#define NCLUSTERS 12
#define ITER 3
#define SP 1
#define CACHE_LINE 64

typedef struct {
    float weight;
    float *coord;
    long assign; /* number of point where this one is assigned */
    float cost;  /* cost of that assignment, weight*distance */
} Point;

typedef struct {
    long num; /* number of points; may be N or N/2 or whatever */
    int dim;  /* dimensionality */
    Point *p; /* the array itself */
} Points;

static int nproc;
static pthread_barrier_t barrier;
static uint64_t rng0; /* thread 0's RNG (only thread 0 draws) */

/* per-localSearch arrays (allocated by thread 0) */
static char *switch_membership;
static char *is_center;
static int *center_table;

/* stream state */
static Points **chunks;
static Points *centers;
static long *centerIDs;
static float *centerBlock;
static double chunk_cost; /* sum of the chunks' local search costs */
static double final_cost;
static long final_k;

#define BARRIER() pthread_barrier_wait(&barrier)

static long lrand(void) /* thread 0 only */
{
    return (long)(xorshift64(&rng0) >> 33);
}

static float frand(void) /* thread 0 only, [0,1) */
{
    return (float)(xorshift64(&rng0) >> 40) / 16777216.0f;
}

/* compute Euclidean distance squared between two points */
static float dist(const Point *p1, const Point *p2, int dim)
{
    float result = 0.0f;
    for (int i = 0; i < dim; i++)
        result += (p1->coord[i] - p2->coord[i]) * (p1->coord[i] - p2->coord[i]);
    return result;
}

/* shuffle points into random order */
static void shuffle(Points *points)
{
    for (long i = 0; i < points->num - 1; i++) {
        long j = (lrand() % (points->num - i)) + i;
        Point temp = points->p[i];
        points->p[i] = points->p[j];
        points->p[j] = temp;
    }
}

/* shuffle an array of integers */
static void intshuffle(int *intarray, int length)
{
    for (int i = 0; i < length; i++) {
        int j = (int)(lrand() % (length - i)) + i;
        int temp = intarray[i];
        intarray[i] = intarray[j];
        intarray[j] = temp;
    }
}

static void my_range(const Points *points, int pid, long *k1, long *k2)
{
    long bsize = points->num / nproc;
    *k1 = bsize * pid;
    *k2 = *k1 + bsize;
    if (pid == nproc - 1)
        *k2 = points->num;
}

/* run speedy on the points, return total cost of solution */
static double pspeedy(Points *points, double z, long *kcenter, int pid)
{
    static double totalcost;
    static double *costs; /* cost for each thread */
    static long open_i;   /* the facility being opened, chosen by thread 0 */
    long k1, k2;
    my_range(points, pid, &k1, &k2);

    BARRIER(); /* the points may just have been shuffled */
    /* create center at first point, send it to itself */
    for (long k = k1; k < k2; k++) {
        float distance = dist(&points->p[k], &points->p[0], points->dim);
        points->p[k].cost = distance * points->p[k].weight;
        points->p[k].assign = 0;
    }
    if (pid == 0) {
        *kcenter = 1;
        costs = xmalloc(sizeof(double) * (size_t)nproc);
        open_i = 0;
    }
    BARRIER();
    for (;;) {
        if (pid == 0) {
            long i;
            for (i = open_i + 1; i < points->num; i++) {
                int to_open = frand() < (float)(points->p[i].cost / z);
                if (to_open)
                    break;
            }
            open_i = i;
            if (i < points->num)
                (*kcenter)++;
        }
        BARRIER();
        long i = open_i;
        if (i >= points->num)
            break;
        for (long k = k1; k < k2; k++) {
            float distance = dist(&points->p[i], &points->p[k], points->dim);
            if (distance * points->p[k].weight < points->p[k].cost) {
                points->p[k].cost = distance * points->p[k].weight;
                points->p[k].assign = i;
            }
        }
        BARRIER();
    }
    double mytotal = 0;
    for (long k = k1; k < k2; k++)
        mytotal += points->p[k].cost;
    costs[pid] = mytotal;
    BARRIER();
    /* aggregate costs from each thread */
    if (pid == 0) {
        totalcost = z * (double)(*kcenter);
        for (int i = 0; i < nproc; i++)
            totalcost += costs[i];
        free(costs);
    }
    BARRIER();
    return totalcost;
}

/* For a given point x, find the cost of the following operation: -- open a facility at x if
 * there isn't already one there, -- for points y such that the assignment distance of y
 * exceeds dist(y, x), make y a member of x, -- for facilities y such that reassigning y and
 * all its members to x would save cost, close y. The cost of opening is returned (negative
 * of savings), or 0 if no gain. */
static double pgain(long x, Points *points, double z, long *numcenters, int pid)
{
    static double *work_mem;
    static double gl_cost_of_opening_x;
    static int gl_number_of_centers_to_close;
    int number_of_centers_to_close = 0;
    int stride = (int)*numcenters + 2;
    /* make stride a multiple of the cache line */
    int cl = CACHE_LINE / (int)sizeof(double);
    if (stride % cl != 0)
        stride = cl * (stride / cl + 1);
    int K = stride - 2; /* K == *numcenters */
    double cost_of_opening_x = 0;
    long k1, k2;
    my_range(points, pid, &k1, &k2);

    if (pid == 0) {
        work_mem = xmalloc((size_t)stride * (size_t)(nproc + 1) * sizeof(double));
        gl_cost_of_opening_x = 0;
        gl_number_of_centers_to_close = 0;
    }
    BARRIER();
    /* each thread takes a block of working_mem */
    int count = 0;
    for (long i = k1; i < k2; i++)
        if (is_center[i])
            center_table[i] = count++;
    work_mem[pid * stride] = count;
    BARRIER();
    if (pid == 0) {
        int accum = 0;
        for (int p = 0; p < nproc; p++) {
            int tmp = (int)work_mem[p * stride];
            work_mem[p * stride] = accum;
            accum += tmp;
        }
    }
    BARRIER();
    for (long i = k1; i < k2; i++)
        if (is_center[i])
            center_table[i] += (int)work_mem[pid * stride];
    /* now we finish building the table; clear the working memory */
    if (k2 > k1)
        memset(switch_membership + k1, 0, (size_t)(k2 - k1) * sizeof(char));
    memset(work_mem + pid * stride, 0, (size_t)stride * sizeof(double));
    if (pid == 0)
        memset(work_mem + nproc * stride, 0, (size_t)stride * sizeof(double));
    BARRIER();

    double *lower = &work_mem[pid * stride];
    double *gl_lower = &work_mem[nproc * stride];
    for (long i = k1; i < k2; i++) {
        float x_cost = dist(&points->p[i], &points->p[x], points->dim) * points->p[i].weight;
        float current_cost = points->p[i].cost;
        if (x_cost < current_cost) {
            /* point i would save cost just by switching to x */
            switch_membership[i] = 1;
            cost_of_opening_x += x_cost - current_cost;
        } else {
            /* cost of assigning i to x is at least current assignment cost of i */
            long assign = points->p[i].assign;
            lower[center_table[assign]] += current_cost - x_cost;
        }
    }
    BARRIER();

    /* at this time, we can calculate the cost of opening a center at x */
    for (long i = k1; i < k2; i++) {
        if (is_center[i]) {
            double low = z;
            for (int p = 0; p < nproc; p++)
                low += work_mem[center_table[i] + p * stride];
            gl_lower[center_table[i]] = low;
            if (low > 0) {
                ++number_of_centers_to_close;
                cost_of_opening_x -= low;
            }
        }
    }
    /* use the rest of working memory to store the following */
    work_mem[pid * stride + K] = number_of_centers_to_close;
    work_mem[pid * stride + K + 1] = cost_of_opening_x;
    BARRIER();
    if (pid == 0) {
        gl_cost_of_opening_x = z;
        /* aggregate */
        for (int p = 0; p < nproc; p++) {
            gl_number_of_centers_to_close += (int)work_mem[p * stride + K];
            gl_cost_of_opening_x += work_mem[p * stride + K + 1];
        }
    }
    BARRIER();
    double gain = gl_cost_of_opening_x;
    /* Now, check whether opening x would save cost; if so, do it, and otherwise do nothing */
    if (gain < 0) {
        /* we'd save money by opening x; we'll do it */
        for (long i = k1; i < k2; i++) {
            int close_center = gl_lower[center_table[points->p[i].assign]] > 0;
            if (switch_membership[i] || close_center) {
                points->p[i].cost = points->p[i].weight * dist(&points->p[i], &points->p[x], points->dim);
                points->p[i].assign = x;
            }
        }
        for (long i = k1; i < k2; i++)
            if (is_center[i] && gl_lower[center_table[i]] > 0)
                is_center[i] = 0;
        if (x >= k1 && x < k2)
            is_center[x] = 1;
        if (pid == 0)
            *numcenters = *numcenters + 1 - gl_number_of_centers_to_close;
    }
    BARRIER();
    if (pid == 0)
        free(work_mem);
    return gain < 0 ? -gain : 0.0;
}

/* facility location on the points using local search; z is the facility cost, returns the
 * total cost and updates the number of centers k */
static double pFL(Points *points, int *feasible, int numfeasible, double z, long *k, double cost,
                  long iter, float e, int pid)
{
    double change = cost;
    /* continue until we hit our target */
    while (change / cost > 1.0 * e) {
        change = 0.0;
        /* randomize order in which centers are considered */
        if (pid == 0)
            intshuffle(feasible, numfeasible);
        BARRIER();
        for (long i = 0; i < iter; i++) {
            long x = i % numfeasible;
            change += pgain(feasible[x], points, z, k, pid);
        }
        cost -= change;
        BARRIER();
    }
    return cost;
}

static int selectfeasible_fast(Points *points, int **feasible, int kmin)
{
    int numfeasible = (int)points->num;
    if (numfeasible > (ITER * kmin * log((double)kmin)))
        numfeasible = (int)(ITER * kmin * log((double)kmin));
    *feasible = xmalloc((size_t)numfeasible * sizeof(int));

    /* not many points, all will be feasible */
    if (numfeasible == points->num) {
        for (int i = 0; i < numfeasible; i++)
            (*feasible)[i] = i;
        return numfeasible;
    }
    float *accumweight = xmalloc(sizeof(float) * (size_t)points->num);
    accumweight[0] = points->p[0].weight;
    for (long i = 1; i < points->num; i++)
        accumweight[i] = accumweight[i - 1] + points->p[i].weight;
    float totalweight = accumweight[points->num - 1];

    for (int i = 0; i < numfeasible; i++) {
        float w = frand() * totalweight;
        /* binary search */
        long l = 0, r = points->num - 1;
        if (accumweight[0] > w) {
            (*feasible)[i] = 0;
            continue;
        }
        while (l + 1 < r) {
            long b = (l + r) / 2;
            if (accumweight[b] > w)
                r = b;
            else
                l = b;
        }
        (*feasible)[i] = (int)r;
    }
    free(accumweight);
    return numfeasible;
}

/* compute approximate kmedian on the points */
static double pkmedian(Points *points, long kmin, long kmax, long *kfinal, int pid)
{
    static long k;
    static int *feasible;
    static int numfeasible;
    static double *hizs;
    double cost, hiz = 0.0, loz = 0.0, z;
    long k1, k2;
    my_range(points, pid, &k1, &k2);

    if (pid == 0)
        hizs = calloc((size_t)nproc, sizeof(double));
    BARRIER();
    double myhiz = 0;
    for (long kk = k1; kk < k2; kk++)
        myhiz += dist(&points->p[kk], &points->p[0], points->dim) * points->p[kk].weight;
    hizs[pid] = myhiz;
    BARRIER();
    for (int i = 0; i < nproc; i++)
        hiz += hizs[i];
    loz = 0.0;
    z = (hiz + loz) / 2.0;

    /* NEW: check whether more centers than points! */
    if (points->num <= kmax) {
        /* just return all points as facilities */
        for (long kk = k1; kk < k2; kk++) {
            points->p[kk].assign = kk;
            points->p[kk].cost = 0;
        }
        BARRIER();
        if (pid == 0) {
            free(hizs);
            *kfinal = points->num;
        }
        return 0;
    }
    BARRIER(); /* everyone has read hizs[] and p[0] */
    if (pid == 0)
        shuffle(points);
    cost = pspeedy(points, z, &k, pid);
    int i = 0;
    /* give speedy SP chances to get at least kmin/2 facilities */
    while ((k < kmin) && (i < SP)) {
        cost = pspeedy(points, z, &k, pid);
        i++;
    }
    /* if still not enough facilities, assume z is too high */
    while (k < kmin) {
        if (i >= SP) {
            hiz = z;
            z = (hiz + loz) / 2.0;
            i = 0;
        }
        BARRIER();
        if (pid == 0)
            shuffle(points);
        cost = pspeedy(points, z, &k, pid);
        i++;
    }
    /* now we begin the binary search for real; must designate some points as feasible
     * centers */
    if (pid == 0) {
        numfeasible = selectfeasible_fast(points, &feasible, (int)kmin);
        for (long j = 0; j < points->num; j++)
            is_center[points->p[j].assign] = 1;
    }
    BARRIER();

    for (;;) {
        /* first get a rough estimate on the FL solution */
        cost = pFL(points, feasible, numfeasible, z, &k, cost,
                   (long)(ITER * kmax * log((double)kmax)), 0.1f, pid);
        /* if number of centers seems good, try a more accurate FL */
        if (((k <= (1.1) * kmax) && (k >= (0.9) * kmin)) || ((k <= kmax + 2) && (k >= kmin - 2))) {
            /* may need to run a little longer here before halting without improvement */
            cost = pFL(points, feasible, numfeasible, z, &k, cost,
                       (long)(ITER * kmax * log((double)kmax)), 0.001f, pid);
        }
        if (k > kmax) {
            /* facilities too cheap; increase facility cost and up the cost accordingly */
            loz = z;
            z = (hiz + loz) / 2.0;
            cost += (z - loz) * (double)k;
        }
        if (k < kmin) {
            /* facilities too expensive; decrease facility cost and reduce the cost
             * accordingly */
            hiz = z;
            z = (hiz + loz) / 2.0;
            cost += (z - hiz) * (double)k;
        }
        /* if k is good, return the result; if we're stuck, just give up */
        if (((k <= kmax) && (k >= kmin)) || ((loz >= (0.999) * hiz)))
            break;
        BARRIER();
    }
    BARRIER();
    if (pid == 0) {
        free(feasible);
        free(hizs);
        *kfinal = k;
    }
    return cost;
}

/* thread 0: append the weighted medians of points to centers (contcenters + copycenters) */
static void contcopycenters(Points *points, long offset)
{
    char *is_a_median = calloc((size_t)points->num, sizeof(char));
    long *slot = xmalloc((size_t)points->num * sizeof(long));
    if (!is_a_median) {
        perror("calloc");
        exit(1);
    }
    /* mark the centers */
    for (long i = 0; i < points->num; i++)
        is_a_median[points->p[i].assign] = 1;
    long k = centers->num;
    for (long i = 0; i < points->num; i++) {
        if (is_a_median[i]) {
            memcpy(centers->p[k].coord, points->p[i].coord, (size_t)points->dim * sizeof(float));
            centers->p[k].weight = points->p[i].weight;
            centerIDs[k] = i + offset;
            slot[i] = k;
            k++;
        }
    }
    centers->num = k;
    /* compute the weighted centroid of each cluster */
    for (long i = 0; i < points->num; i++) {
        if (points->p[i].assign != i) {
            Point *c = &centers->p[slot[points->p[i].assign]];
            float relweight = c->weight + points->p[i].weight;
            relweight = points->p[i].weight / relweight;
            for (int ii = 0; ii < points->dim; ii++) {
                c->coord[ii] *= 1.0f - relweight;
                c->coord[ii] += points->p[i].coord[ii] * relweight;
            }
            c->weight += points->p[i].weight;
        }
    }
    free(slot);
    free(is_a_median);
}

static double localSearch(Points *points, long kmin, long kmax, long *kfinal, int pid)
{
    if (pid == 0) {
        is_center = calloc((size_t)points->num, sizeof(char));
        switch_membership = xmalloc((size_t)points->num * sizeof(char));
        center_table = xmalloc((size_t)points->num * sizeof(int));
        if (!is_center) {
            perror("calloc");
            exit(1);
        }
    }
    BARRIER();
    double cost = pkmedian(points, kmin, kmax, kfinal, pid);
    BARRIER();
    if (pid == 0) {
        free(is_center);
        free(switch_membership);
        free(center_table);
    }
    return cost;
}

static void *worker(void *arg)
{
    int pid = (int)(intptr_t)arg;
    long kfinal = 0;
    /* streamCluster */
    for (int c = 0; c < NCHUNKS; c++) {
        double cost = localSearch(chunks[c], KMIN, KMAX, &kfinal, pid);
        if (pid == 0) {
            chunk_cost += cost;
            contcopycenters(chunks[c], (long)c * CHUNKSIZE);
        }
        BARRIER();
    }
    double cost = localSearch(centers, KMIN, KMAX, &kfinal, pid);
    if (pid == 0) {
        final_cost = cost;
        final_k = kfinal;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    nproc = threads_arg(argc, argv);
    uint64_t rng = 0x57C1A57E4ull;
    rng0 = 0x5EED5EEDull;

    /* the stream: all points of all chunks, coordinates in one block */
    long total = (long)NCHUNKS * CHUNKSIZE;
    float *ctr = xmalloc((size_t)NCLUSTERS * DIM * sizeof(float));
    for (int i = 0; i < NCLUSTERS * DIM; i++)
        ctr[i] = (float)(xorshift64(&rng) >> 40) / 16777216.0f;
    float *block = xmalloc((size_t)total * DIM * sizeof(float));
    for (long i = 0; i < total; i++) {
        int cl = (int)(xorshift64(&rng) % NCLUSTERS);
        for (int d = 0; d < DIM; d++) {
            float noise = ((float)(xorshift64(&rng) >> 40) / 16777216.0f - 0.5f) * 0.25f;
            block[i * DIM + d] = ctr[cl * DIM + d] + noise;
        }
    }
    free(ctr);
    GPUSAN_READ_ONLY(block, (size_t)total * DIM * sizeof(float));

    chunks = xmalloc(NCHUNKS * sizeof(Points *));
    for (int c = 0; c < NCHUNKS; c++) {
        Points *pts = xmalloc(sizeof(Points));
        pts->num = CHUNKSIZE;
        pts->dim = DIM;
        pts->p = xmalloc(CHUNKSIZE * sizeof(Point));
        for (long i = 0; i < CHUNKSIZE; i++) {
            pts->p[i].weight = 1.0f;
            pts->p[i].coord = &block[((long)c * CHUNKSIZE + i) * DIM];
            pts->p[i].assign = 0;
            pts->p[i].cost = 0.0f;
        }
        chunks[c] = pts;
    }
    long clustersize = total;
    centers = xmalloc(sizeof(Points));
    centers->num = 0;
    centers->dim = DIM;
    centers->p = xmalloc((size_t)clustersize * sizeof(Point));
    centerBlock = xmalloc((size_t)clustersize * DIM * sizeof(float));
    centerIDs = xmalloc((size_t)clustersize * sizeof(long));
    for (long i = 0; i < clustersize; i++) {
        centers->p[i].coord = &centerBlock[i * DIM];
        centers->p[i].weight = 1.0f;
        centers->p[i].assign = 0;
        centers->p[i].cost = 0.0f;
    }

    pthread_barrier_init(&barrier, NULL, (unsigned)nproc);
    pthread_t *tids = xmalloc((size_t)nproc * sizeof(pthread_t));
    for (int i = 0; i < nproc; i++)
        if (pthread_create(&tids[i], NULL, worker, (void *)(intptr_t)i)) {
            perror("pthread_create");
            return 1;
        }
    for (int i = 0; i < nproc; i++)
        pthread_join(tids[i], NULL);

    /* outcenterIDs: the medians of the final clustering */
    char *is_a_median = calloc((size_t)centers->num, sizeof(char));
    if (!is_a_median) {
        perror("calloc");
        return 1;
    }
    for (long i = 0; i < centers->num; i++)
        is_a_median[centers->p[i].assign] = 1;
    uint64_t h = 0xcbf29ce484222325ull;
    double wsum = 0.0, csum = 0.0;
    long nmed = 0;
    for (long i = 0; i < centers->num; i++) {
        if (!is_a_median[i])
            continue;
        nmed++;
        wsum += centers->p[i].weight;
        h = (h ^ (uint64_t)centerIDs[i]) * 0x100000001b3ull;
        for (int d = 0; d < DIM; d++) {
            uint32_t bits;
            memcpy(&bits, &centers->p[i].coord[d], sizeof bits);
            h = (h ^ bits) * 0x100000001b3ull;
            csum += centers->p[i].coord[d];
        }
    }
    printf("streamcluster: threads=%d points=%ld dim=%d chunks=%d centers=%ld medians=%ld "
           "chunk_cost=%.4f final_cost=%.4f coord_sum=%.6f weight_sum=%.1f checksum=%016llx\n",
           nproc, total, DIM, NCHUNKS, centers->num, nmed, chunk_cost, final_cost, csum, wsum,
           (unsigned long long)h);
    (void)final_k;

    free(is_a_median);
    free(tids);
    pthread_barrier_destroy(&barrier);
    for (int c = 0; c < NCHUNKS; c++) {
        free(chunks[c]->p);
        free(chunks[c]);
    }
    free(chunks);
    free(centers->p);
    free(centers);
    free(centerBlock);
    free(centerIDs);
    free(block);
    return 0;
}
