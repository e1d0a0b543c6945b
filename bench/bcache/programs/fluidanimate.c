/* fluidanimate.c -- imitates PARSEC "fluidanimate" (pthreads version, SPH fluid simulation).
 *
 * Kept: the SPH algorithm and constants of the original (kernel radius h = 1.695 /
 * restParticlesPerMeter, same density/pressure/viscosity coefficients, gravity, wall
 * collisions with stiffness and damping, leap-frog AdvanceParticles), the uniform grid of
 * cells of size >= h over the same domain, and the per-frame phase structure separated by
 * barriers: RebuildGrid -> ComputeDensities (+ self term, ComputeDensities2) -> ComputeForces
 * (+ ProcessCollisions) -> AdvanceParticles. Neighbour search visits the 27 surrounding cells.
 * The grid is double-buffered (cells / cells2, as in the original). Each thread owns a
 * contiguous range of cells (x-major order, i.e. slabs of the grid) and updates only the
 * particles of its cells.
 *
 * Memory/pointer behaviour: particles live in one malloc'd array; every cell holds a
 * malloc'd array of particle pointers (Particle **) that grows with realloc, so each
 * neighbour visit loads a cell's array pointer and then particle pointers from it. The rebuild
 * phase stores particle pointers into the new grid's arrays.
 *
 * Differences: the original stores particle data inside the cells (with overflow cells
 * chained by a `next` pointer) and computes each pair once with locks on border cells; here
 * each particle sums over its neighbours itself (no pair symmetry, hence no locks), and the
 * per-step displacement is limited to less than one cell so that a thread rebuilds its cells
 * by scanning only neighbouring old cells. No file input/output; the initial state (a resting
 * pool plus a falling cube) is generated. The result is independent of THREADS.
 *
 * Input size: 2,153 particles (a 26x26x3 pool plus a falling 5x5x5 cube) and 5 frames
 * (simsmall: 35K particles, 5 frames). Grid: 15 x 21 x 15 cells.
 *
 * Usage: ./fluidanimate [THREADS]   (default 16)
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gpusan_cputrace.h"
#include "workload.h"

#define NFRAMES 5
#define POOL_LAYERS 3
#define CUBE 5

typedef float fptype;

static const fptype timeStep = 0.001f;
static const fptype doubleRestDensity = 2000.0f;
static const fptype kernelRadiusMultiplier = 1.695f;
static const fptype stiffnessPressure = 3.0f;
static const fptype stiffnessCollisions = 30000.0f;
static const fptype damping = 128.0f;
static const fptype viscosity = 0.4f;
static const fptype parSize = 0.0002f;
static const fptype epsilon = 1e-10f;
static const fptype restParticlesPerMeter = 204.0f;
static const fptype externalAcceleration[3] = {0.0f, -9.8f, 0.0f};
static const fptype domainMin[3] = {-0.065f, -0.08f, -0.065f};
static const fptype domainMax[3] = {0.065f, 0.1f, 0.065f};

typedef struct Particle {
    fptype p[3], hv[3], v[3], a[3];
    fptype density;
    int cell; /* grid cell of the current position (set by AdvanceParticles) */
} Particle;

typedef struct Cell {
    Particle **parts; /* pointers to the particles in this cell */
    int n, cap;
} Cell;

typedef struct Sim {
    int nx, ny, nz, ncells;
    fptype h, hSq, delta[3];
    fptype densityCoeff, pressureCoeff, viscosityCoeff;
    int nparticles;
    Particle *particles;
    Cell *cells, *cells2;
    int nthreads;
} Sim; /* read-only once the workers start */

static pthread_barrier_t barrier;

typedef struct ThreadArg {
    pthread_t tid;
    int id;
    Sim *sim;
} ThreadArg;

static int cell_of(const Sim *s, const fptype *p)
{
    int ck[3];
    int dim[3] = {s->nx, s->ny, s->nz};
    for (int d = 0; d < 3; d++) {
        ck[d] = (int)((p[d] - domainMin[d]) / s->delta[d]);
        if (ck[d] < 0)
            ck[d] = 0;
        else if (ck[d] > dim[d] - 1)
            ck[d] = dim[d] - 1;
    }
    return (ck[0] * s->ny + ck[1]) * s->nz + ck[2];
}

static void cell_push(Cell *c, Particle *q)
{
    if (c->n == c->cap) {
        int ncap = c->cap ? 2 * c->cap : 4;
        Particle **np = realloc(c->parts, (size_t)ncap * sizeof(Particle *));
        if (!np) {
            perror("realloc");
            exit(1);
        }
        c->parts = np;
        c->cap = ncap;
    }
    c->parts[c->n++] = q;
}

/* neighbour cells of cell index ci (including itself), in a fixed order */
static int neighbours(const Sim *s, int ci, int *out)
{
    int ix = ci / (s->ny * s->nz), iy = (ci / s->nz) % s->ny, iz = ci % s->nz;
    int n = 0;
    for (int dx = -1; dx <= 1; dx++)
        for (int dy = -1; dy <= 1; dy++)
            for (int dz = -1; dz <= 1; dz++) {
                int x = ix + dx, y = iy + dy, z = iz + dz;
                if (x < 0 || x >= s->nx || y < 0 || y >= s->ny || z < 0 || z >= s->nz)
                    continue;
                out[n++] = (x * s->ny + y) * s->nz + z;
            }
    return n;
}

static void *worker(void *arg)
{
    ThreadArg *ta = arg;
    Sim *s = ta->sim;
    int lo = (int)((long)s->ncells * ta->id / s->nthreads);
    int hi = (int)((long)s->ncells * (ta->id + 1) / s->nthreads);
    int reach = s->ny * s->nz + s->nz + 1; /* largest linear distance to a neighbour cell */
    Cell *cells = s->cells, *cells2 = s->cells2;
    const fptype h = s->h, hSq = s->hSq;
    const fptype tc = hSq * hSq * hSq;
    int nb[27];

    for (int frame = 0; frame < NFRAMES; frame++) {
        /* ComputeDensities + ComputeDensities2 */
        for (int ci = lo; ci < hi; ci++) {
            Cell *c = &cells[ci];
            int nn = neighbours(s, ci, nb);
            for (int i = 0; i < c->n; i++) {
                Particle *pi = c->parts[i];
                fptype dens = 0.0f;
                for (int k = 0; k < nn; k++) {
                    Cell *nc = &cells[nb[k]];
                    for (int j = 0; j < nc->n; j++) {
                        Particle *pj = nc->parts[j];
                        if (pj == pi)
                            continue;
                        fptype dx = pi->p[0] - pj->p[0], dy = pi->p[1] - pj->p[1],
                               dz = pi->p[2] - pj->p[2];
                        fptype distSq = dx * dx + dy * dy + dz * dz;
                        if (distSq < hSq) {
                            fptype t = hSq - distSq;
                            dens += t * t * t;
                        }
                    }
                }
                pi->density = (dens + tc) * s->densityCoeff;
            }
        }
        pthread_barrier_wait(&barrier);

        /* ComputeForces + ProcessCollisions */
        for (int ci = lo; ci < hi; ci++) {
            Cell *c = &cells[ci];
            int nn = neighbours(s, ci, nb);
            for (int i = 0; i < c->n; i++) {
                Particle *pi = c->parts[i];
                fptype acc[3] = {externalAcceleration[0], externalAcceleration[1],
                                 externalAcceleration[2]};
                for (int k = 0; k < nn; k++) {
                    Cell *nc = &cells[nb[k]];
                    for (int j = 0; j < nc->n; j++) {
                        Particle *pj = nc->parts[j];
                        if (pj == pi)
                            continue;
                        fptype disp[3] = {pi->p[0] - pj->p[0], pi->p[1] - pj->p[1],
                                          pi->p[2] - pj->p[2]};
                        fptype distSq = disp[0] * disp[0] + disp[1] * disp[1] + disp[2] * disp[2];
                        if (distSq < hSq) {
                            fptype dist = sqrtf(distSq > 1e-12f ? distSq : 1e-12f);
                            fptype hmr = h - dist;
                            fptype pterm = s->pressureCoeff * (hmr * hmr / dist) *
                                           (pi->density + pj->density - doubleRestDensity);
                            fptype vterm = s->viscosityCoeff * hmr;
                            fptype inv = 1.0f / (pi->density * pj->density);
                            for (int d = 0; d < 3; d++)
                                acc[d] += (disp[d] * pterm + (pj->v[d] - pi->v[d]) * vterm) * inv;
                        }
                    }
                }
                /* ProcessCollisions */
                for (int d = 0; d < 3; d++) {
                    fptype pos = pi->p[d] + pi->hv[d] * timeStep;
                    fptype diff = parSize - (pos - domainMin[d]);
                    if (diff > epsilon)
                        acc[d] += stiffnessCollisions * diff - damping * pi->v[d];
                    diff = parSize - (domainMax[d] - pos);
                    if (diff > epsilon)
                        acc[d] -= stiffnessCollisions * diff + damping * pi->v[d];
                }
                pi->a[0] = acc[0];
                pi->a[1] = acc[1];
                pi->a[2] = acc[2];
            }
        }
        pthread_barrier_wait(&barrier);

        /* AdvanceParticles */
        for (int ci = lo; ci < hi; ci++) {
            Cell *c = &cells[ci];
            for (int i = 0; i < c->n; i++) {
                Particle *pi = c->parts[i];
                for (int d = 0; d < 3; d++) {
                    fptype v_half = pi->hv[d] + pi->a[d] * timeStep;
                    fptype dp = v_half * timeStep;
                    fptype lim = 0.99f * s->delta[d]; /* at most one cell per step */
                    if (dp > lim)
                        dp = lim;
                    else if (dp < -lim)
                        dp = -lim;
                    pi->p[d] += dp;
                    pi->v[d] = (pi->hv[d] + v_half) * 0.5f;
                    pi->hv[d] = v_half;
                }
                pi->cell = cell_of(s, pi->p);
            }
        }
        pthread_barrier_wait(&barrier);

        /* RebuildGrid: fill my cells of the other grid from the neighbouring old cells */
        for (int ci = lo; ci < hi; ci++)
            cells2[ci].n = 0;
        int from = lo - reach < 0 ? 0 : lo - reach;
        int to = hi + reach > s->ncells ? s->ncells : hi + reach;
        if (lo < hi)
            for (int oc = from; oc < to; oc++) {
                Cell *c = &cells[oc];
                for (int i = 0; i < c->n; i++) {
                    Particle *q = c->parts[i];
                    int nc = q->cell;
                    if (nc >= lo && nc < hi)
                        cell_push(&cells2[nc], q);
                }
            }
        pthread_barrier_wait(&barrier);
        Cell *tmp = cells;
        cells = cells2;
        cells2 = tmp;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int nthreads = threads_arg(argc, argv);
    Sim *s = xmalloc(sizeof(Sim));
    memset(s, 0, sizeof *s);
    s->nthreads = nthreads;

    /* InitSim */
    const double pi = 3.14159265358979;
    s->h = kernelRadiusMultiplier / restParticlesPerMeter;
    s->hSq = s->h * s->h;
    fptype coeff1 = (fptype)(315.0 / (64.0 * pi * pow(s->h, 9.0)));
    fptype coeff2 = (fptype)(15.0 / (pi * pow(s->h, 6.0)));
    fptype coeff3 = (fptype)(45.0 / (pi * pow(s->h, 6.0)));
    fptype particleMass = (fptype)(0.5 * doubleRestDensity /
                                   (restParticlesPerMeter * restParticlesPerMeter *
                                    restParticlesPerMeter));
    s->densityCoeff = particleMass * coeff1;
    s->pressureCoeff = 3.0f * coeff2 * 0.5f * stiffnessPressure * particleMass;
    s->viscosityCoeff = viscosity * coeff3 * particleMass;
    s->nx = (int)((domainMax[0] - domainMin[0]) / s->h);
    s->ny = (int)((domainMax[1] - domainMin[1]) / s->h);
    s->nz = (int)((domainMax[2] - domainMin[2]) / s->h);
    s->delta[0] = (domainMax[0] - domainMin[0]) / (fptype)s->nx;
    s->delta[1] = (domainMax[1] - domainMin[1]) / (fptype)s->ny;
    s->delta[2] = (domainMax[2] - domainMin[2]) / (fptype)s->nz;
    s->ncells = s->nx * s->ny * s->nz;

    /* initial state: a resting pool on the floor plus a cube of fluid above it */
    fptype spacing = 1.0f / restParticlesPerMeter;
    int fx = (int)((domainMax[0] - domainMin[0] - 2 * parSize) / spacing);
    int fz = (int)((domainMax[2] - domainMin[2] - 2 * parSize) / spacing);
    s->nparticles = fx * fz * POOL_LAYERS + CUBE * CUBE * CUBE;
    s->particles = xmalloc((size_t)s->nparticles * sizeof(Particle));
    uint64_t rng = 0xF1D0A41Aull;
    int np = 0;
    for (int y = 0; y < POOL_LAYERS; y++)
        for (int x = 0; x < fx; x++)
            for (int z = 0; z < fz; z++) {
                Particle *q = &s->particles[np++];
                q->p[0] = domainMin[0] + 2 * parSize + ((fptype)x + 0.5f) * spacing;
                q->p[1] = domainMin[1] + 2 * parSize + ((fptype)y + 0.5f) * spacing;
                q->p[2] = domainMin[2] + 2 * parSize + ((fptype)z + 0.5f) * spacing;
            }
    for (int x = 0; x < CUBE; x++)
        for (int y = 0; y < CUBE; y++)
            for (int z = 0; z < CUBE; z++) {
                Particle *q = &s->particles[np++];
                q->p[0] = ((fptype)x - CUBE / 2.0f) * spacing;
                q->p[1] = domainMin[1] + 0.06f + (fptype)y * spacing;
                q->p[2] = ((fptype)z - CUBE / 2.0f) * spacing;
            }
    for (int i = 0; i < s->nparticles; i++) {
        Particle *q = &s->particles[i];
        for (int d = 0; d < 3; d++) {
            /* small jitter (< 1 % of the spacing) and an initial velocity */
            q->p[d] += spacing * 0.01f * ((fptype)(xorshift64(&rng) >> 40) / 16777216.0f - 0.5f);
            q->hv[d] = q->v[d] = 0.0f;
            q->a[d] = 0.0f;
        }
        if (i >= fx * fz * POOL_LAYERS)
            q->hv[1] = q->v[1] = -0.5f; /* the cube is falling */
        q->density = 0.0f;
        q->cell = cell_of(s, q->p);
    }

    s->cells = xmalloc((size_t)s->ncells * sizeof(Cell));
    s->cells2 = xmalloc((size_t)s->ncells * sizeof(Cell));
    for (int i = 0; i < s->ncells; i++) {
        s->cells[i].parts = xmalloc(4 * sizeof(Particle *));
        s->cells[i].n = 0;
        s->cells[i].cap = 4;
        s->cells2[i].parts = xmalloc(4 * sizeof(Particle *));
        s->cells2[i].n = 0;
        s->cells2[i].cap = 4;
    }
    for (int i = 0; i < s->nparticles; i++)
        cell_push(&s->cells[s->particles[i].cell], &s->particles[i]);

    GPUSAN_READ_ONLY(s, sizeof *s);
    pthread_barrier_init(&barrier, NULL, (unsigned)nthreads);
    ThreadArg *ta = xmalloc((size_t)nthreads * sizeof(ThreadArg));
    for (int i = 0; i < nthreads; i++) {
        ta[i].id = i;
        ta[i].sim = s;
        if (pthread_create(&ta[i].tid, NULL, worker, &ta[i])) {
            perror("pthread_create");
            return 1;
        }
    }
    for (int i = 0; i < nthreads; i++)
        pthread_join(ta[i].tid, NULL);
    /* the workers swapped their grid pointers NFRAMES times */
    Cell *final = NFRAMES % 2 ? s->cells2 : s->cells;

    /* checksum: particle state in particle order, and the grid occupancy */
    double psum = 0.0, dsum = 0.0;
    uint64_t hsh = 0xcbf29ce484222325ull;
    for (int i = 0; i < s->nparticles; i++) {
        Particle *q = &s->particles[i];
        psum += (double)q->p[0] + q->p[1] + q->p[2];
        dsum += q->density;
        uint32_t bits[4];
        memcpy(bits, q->p, 3 * sizeof(fptype));
        memcpy(&bits[3], &q->density, sizeof(fptype));
        for (int k = 0; k < 4; k++)
            hsh = (hsh ^ bits[k]) * 0x100000001b3ull;
    }
    long placed = 0;
    int used = 0;
    for (int i = 0; i < s->ncells; i++) {
        placed += final[i].n;
        used += final[i].n > 0;
        hsh = (hsh ^ (uint64_t)final[i].n) * 0x100000001b3ull;
    }
    printf("fluidanimate: threads=%d particles=%d frames=%d cells=%d used=%d placed=%ld "
           "pos_sum=%.6f density_sum=%.3f checksum=%016llx\n",
           nthreads, s->nparticles, NFRAMES, s->ncells, used, placed, psum, dsum,
           (unsigned long long)hsh);

    for (int i = 0; i < s->ncells; i++) {
        free(s->cells[i].parts);
        free(s->cells2[i].parts);
    }
    free(s->cells);
    free(s->cells2);
    free(s->particles);
    free(ta);
    pthread_barrier_destroy(&barrier);
    free(s);
    return 0;
}
