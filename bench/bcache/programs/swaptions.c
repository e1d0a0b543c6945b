/* swaptions.c -- imitates PARSEC "swaptions" (pthreads version, HJM Monte Carlo pricing).
 *
 * Kept: the original's algorithm and its allocation pattern.
 *   - Matrices are Numerical-Recipes style dmatrix(): an array of row pointers (double **)
 *     plus one contiguous block for the elements, so every element access loads a row pointer
 *     first; vectors are dvector().
 *   - main() builds the array of `parm` structs (one per swaption: strike, maturity, tenor,
 *     ..., a pdYield vector and a ppdFactors matrix, each malloc'd) with the original's
 *     factor-volatility table and random strikes/maturities; the yield vectors and factor
 *     matrices are read-only after setup (GPUSAN_READ_ONLY). Swaptions are split into
 *     contiguous ranges, one per thread; each thread writes the price and standard error into
 *     its swaptions' parm structs.
 *   - HJM_Swaption_Blocking(): per swaption it allocates the path matrix, drifts, forward
 *     curve, discounting and swap vectors (about 12 allocations), computes
 *     HJM_Yield_to_Forward() and HJM_Drifts(), then for every block of BLOCK_SIZE trials runs
 *     HJM_SimPath_Forward_Blocking() (allocating and freeing the pdZ/randZ matrices each
 *     time), Discount_Factors_Blocking() twice (allocating and freeing pdexpRes each time)
 *     and accumulates the discounted swaption payoffs. Random numbers: uniform deviates
 *     turned into normals with CumNormalInv() (Moro's algorithm, same constants).
 *
 * Differences: the uniform generator is a per-swaption xorshift (the original uses a
 * Park-Miller RanUnif per swaption); no command line options beyond THREADS.
 *
 * Input size: 16 swaptions (as simsmall) but 512 trials each (simsmall: 5,000 trials), with
 * BLOCK_SIZE 16, iN = 11, iFactors = 3 as in the original. The result is independent of
 * THREADS.
 *
 * Usage: ./swaptions [THREADS]   (default 16)
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gpusan_cputrace.h"
#include "workload.h"

#define NSWAPTIONS 16
#define NTRIALS 512
#define BLOCK_SIZE 16
#define NR_END 0

typedef double FTYPE;

typedef struct {
    int Id;
    FTYPE dSimSwaptionMeanPrice;
    FTYPE dSimSwaptionStdError;
    FTYPE dStrike;
    FTYPE dCompounding;
    FTYPE dMaturity;
    FTYPE dTenor;
    FTYPE dPaymentInterval;
    int iN;
    FTYPE dYears;
    int iFactors;
    FTYPE *pdYield;
    FTYPE **ppdFactors;
} parm;

typedef struct ThreadArg {
    pthread_t tid;
    int id;
} ThreadArg;

static parm *swaptions;
static int nThreads;
static long NUM_TRIALS = NTRIALS;
static int nSwaptions = NSWAPTIONS;

static void nrerror(const char *error_text)
{
    fprintf(stderr, "run-time error: %s\n", error_text);
    exit(1);
}

/* allocate a FTYPE vector with subscript range v[nl..nh] */
static FTYPE *dvector(long nl, long nh)
{
    FTYPE *v = (FTYPE *)malloc((size_t)((nh - nl + 1 + NR_END) * sizeof(FTYPE)));
    if (!v)
        nrerror("allocation failure in dvector()");
    return v - nl + NR_END;
}

static void free_dvector(FTYPE *v, long nl, long nh)
{
    (void)nh;
    free(v + nl - NR_END);
}

/* allocate a FTYPE matrix with subscript range m[nrl..nrh][ncl..nch] */
static FTYPE **dmatrix(long nrl, long nrh, long ncl, long nch)
{
    long i, nrow = nrh - nrl + 1, ncol = nch - ncl + 1;
    FTYPE **m;

    /* allocate pointers to rows */
    m = (FTYPE **)malloc((size_t)((nrow + NR_END) * sizeof(FTYPE *)));
    if (!m)
        nrerror("allocation failure 1 in dmatrix()");
    m += NR_END;
    m -= nrl;

    /* allocate rows and set pointers to them */
    m[nrl] = (FTYPE *)malloc((size_t)((nrow * ncol + NR_END) * sizeof(FTYPE)));
    if (!m[nrl])
        nrerror("allocation failure 2 in dmatrix()");
    m[nrl] += NR_END;
    m[nrl] -= ncl;

    for (i = nrl + 1; i <= nrh; i++)
        m[i] = m[i - 1] + ncol;

    /* return pointer to array of pointers to rows */
    return m;
}

static void free_dmatrix(FTYPE **m, long nrl, long nrh, long ncl, long nch)
{
    (void)nrh;
    (void)nch;
    free(m[nrl] + ncl - NR_END);
    free(m + nrl - NR_END);
}

static FTYPE RanUnif(uint64_t *s)
{
    /* uniform in (0,1) */
    return ((FTYPE)(xorshift64(s) >> 11) + 0.5) / 9007199254740992.0;
}

static FTYPE dMax(FTYPE dA, FTYPE dB)
{
    return dA > dB ? dA : dB;
}

static FTYPE a[4] = {2.50662823884, -18.61500062529, 41.39119773534, -25.44106049637};
static FTYPE b[4] = {-8.47351093090, 23.08336743743, -21.06224101826, 3.13082909833};
static FTYPE c[9] = {0.3374754822726147, 0.9761690190917186, 0.1607979714918209,
                     0.0276438810333863, 0.0038405729373609, 0.0003951896511919,
                     0.0000321767881768, 0.0000002888167364, 0.0000003960315187};

static FTYPE CumNormalInv(FTYPE u)
{
    /* Returns the inverse of cumulative normal distribution function.
     * Reference: Moro, B., 1995, "The Full Monte," RISK (February), 57-58. */
    FTYPE x, r;
    x = u - 0.5;
    if (fabs(x) < 0.42) {
        r = x * x;
        r = x * (((a[3] * r + a[2]) * r + a[1]) * r + a[0]) /
            ((((b[3] * r + b[2]) * r + b[1]) * r + b[0]) * r + 1.0);
        return (r);
    }
    r = u;
    if (x > 0.0)
        r = 1.0 - u;
    r = log(-log(r));
    r = c[0] +
        r * (c[1] + r * (c[2] + r * (c[3] + r * (c[4] + r * (c[5] + r * (c[6] + r * (c[7] + r * c[8])))))));
    if (x < 0.0)
        r = -r;
    return (r);
}

static int HJM_Yield_to_Forward(FTYPE *pdForward, int iN, FTYPE *pdYield)
{
    /* forward curve from the zero-coupon yield curve */
    pdForward[0] = pdYield[0];
    for (int i = 1; i <= iN - 1; ++i)
        pdForward[i] = (i + 1) * pdYield[i] - i * pdYield[i - 1];
    return 1;
}

static int HJM_Drifts(FTYPE *pdTotalDrift, FTYPE **ppdDrifts, int iN, int iFactors, FTYPE dYears,
                      FTYPE **ppdFactors)
{
    int i, j, l;
    FTYPE ddelt = (FTYPE)(dYears / iN);
    FTYPE dSumVol;

    /* computation of factor drifts for shortest maturity */
    for (i = 0; i <= iFactors - 1; ++i)
        ppdDrifts[i][0] = 0.5 * ddelt * (ppdFactors[i][0]) * (ppdFactors[i][0]);

    /* computation of factor drifts for other maturities */
    for (i = 0; i <= iFactors - 1; ++i)
        for (j = 1; j <= iN - 2; ++j) {
            ppdDrifts[i][j] = 0;
            for (l = 0; l <= j - 1; ++l)
                ppdDrifts[i][j] -= ppdDrifts[i][l];
            dSumVol = 0;
            for (l = 0; l <= j; ++l)
                dSumVol += ppdFactors[i][l];
            ppdDrifts[i][j] += 0.5 * ddelt * (dSumVol) * (dSumVol);
        }

    /* computation of total drifts for all maturities */
    for (i = 0; i <= iN - 2; ++i) {
        pdTotalDrift[i] = 0;
        for (j = 0; j <= iFactors - 1; ++j)
            pdTotalDrift[i] += ppdDrifts[j][i];
    }
    return 1;
}

static void serialB(FTYPE **pdZ, FTYPE **randZ, int BLOCKSIZE, int iN, int iFactors)
{
    for (int l = 0; l <= iFactors - 1; ++l)
        for (int b_ = 0; b_ < BLOCKSIZE; b_++)
            for (int j = 1; j <= iN - 1; ++j)
                pdZ[l][BLOCKSIZE * j + b_] = CumNormalInv(randZ[l][BLOCKSIZE * j + b_]);
}

static int HJM_SimPath_Forward_Blocking(FTYPE **ppdHJMPath, int iN, int iFactors, FTYPE dYears,
                                        FTYPE *pdForward, FTYPE *pdTotalDrift,
                                        FTYPE **ppdFactors, uint64_t *lRndSeed, int BLOCKSIZE)
{
    int i, j, l;
    FTYPE dTotalShock;
    FTYPE ddelt, sqrt_ddelt;
    FTYPE **pdZ;   /* standard normal numbers */
    FTYPE **randZ; /* uniform numbers */

    ddelt = (FTYPE)(dYears / iN);
    sqrt_ddelt = sqrt(ddelt);

    pdZ = dmatrix(0, iFactors - 1, 0, iN * BLOCKSIZE - 1);
    randZ = dmatrix(0, iFactors - 1, 0, iN * BLOCKSIZE - 1);

    /* t=0 forward curve stored iN first row of ppdHJMPath */
    for (int b_ = 0; b_ < BLOCKSIZE; b_++) {
        for (j = 0; j <= iN - 1; j++)
            ppdHJMPath[0][BLOCKSIZE * j + b_] = pdForward[j];
        for (i = 1; i <= iN - 1; ++i)
            for (j = 0; j <= iN - 1; ++j)
                ppdHJMPath[i][BLOCKSIZE * j + b_] = 0; /* initializing HJMPath to zero */
    }

    /* sequentially generating random numbers */
    for (int b_ = 0; b_ < BLOCKSIZE; b_++)
        for (int s = 0; s < 1; s++)
            for (j = 1; j <= iN - 1; ++j)
                for (l = 0; l <= iFactors - 1; ++l)
                    randZ[l][BLOCKSIZE * j + b_ + s] = RanUnif(lRndSeed);

    /* shocks to hit various factors for forward curve at t */
    serialB(pdZ, randZ, BLOCKSIZE, iN, iFactors);

    /* generation of HJM path */
    for (int b_ = 0; b_ < BLOCKSIZE; b_++) {
        for (j = 1; j <= iN - 1; ++j) {
            for (l = 0; l <= iN - (j + 1); ++l) {
                dTotalShock = 0;
                for (i = 0; i <= iFactors - 1; ++i)
                    dTotalShock += ppdFactors[i][l] * pdZ[i][BLOCKSIZE * j + b_];
                ppdHJMPath[j][BLOCKSIZE * l + b_] = ppdHJMPath[j - 1][BLOCKSIZE * (l + 1) + b_] +
                                                    pdTotalDrift[l] * ddelt +
                                                    sqrt_ddelt * dTotalShock;
            }
        }
    }

    free_dmatrix(pdZ, 0, iFactors - 1, 0, iN * BLOCKSIZE - 1);
    free_dmatrix(randZ, 0, iFactors - 1, 0, iN * BLOCKSIZE - 1);
    return 1;
}

static int Discount_Factors_Blocking(FTYPE *pdDiscountFactors, int iN, FTYPE dYears,
                                     FTYPE *pdRatePath, int BLOCKSIZE)
{
    int i, j, b_;
    FTYPE ddelt = (FTYPE)(dYears / iN);
    FTYPE *pdexpRes = dvector(0, (iN - 1) * BLOCKSIZE - 1);

    /* precompute the exponentials */
    for (j = 0; j <= (iN - 1) * BLOCKSIZE - 1; ++j)
        pdexpRes[j] = -pdRatePath[j] * ddelt;
    for (j = 0; j <= (iN - 1) * BLOCKSIZE - 1; ++j)
        pdexpRes[j] = exp(pdexpRes[j]);

    /* initializing the discount factor vector */
    for (i = 0; i < iN * BLOCKSIZE; ++i)
        pdDiscountFactors[i] = 1.0;

    for (i = 1; i <= iN - 1; ++i)
        for (b_ = 0; b_ < BLOCKSIZE; b_++)
            for (j = 0; j <= i - 1; ++j)
                pdDiscountFactors[i * BLOCKSIZE + b_] *= pdexpRes[j * BLOCKSIZE + b_];

    free_dvector(pdexpRes, 0, (iN - 1) * BLOCKSIZE - 1);
    return 1;
}

static int HJM_Swaption_Blocking(FTYPE *pdSwaptionPrice, FTYPE dStrike, FTYPE dCompounding,
                                 FTYPE dMaturity, FTYPE dTenor, FTYPE dPaymentInterval, int iN,
                                 int iFactors, FTYPE dYears, FTYPE *pdYield, FTYPE **ppdFactors,
                                 uint64_t iRndSeed, long lTrials, int BLOCKSIZE)
{
    int i, b_;
    long l;
    FTYPE ddelt = (FTYPE)(dYears / iN);
    int iFreqRatio = (int)(dPaymentInterval / ddelt + 0.5);
    FTYPE dStrikeCont;
    if (dCompounding == 0)
        dStrikeCont = dStrike;
    else
        dStrikeCont = (1 / dCompounding) * log(1 + dStrike * dCompounding);

    int iSwapVectorLength;
    FTYPE **ppdHJMPath = dmatrix(0, iN - 1, 0, iN * BLOCKSIZE - 1);
    FTYPE *pdForward = dvector(0, iN - 1);
    FTYPE **ppdDrifts = dmatrix(0, iFactors - 1, 0, iN - 2);
    FTYPE *pdTotalDrift = dvector(0, iN - 2);
    FTYPE *pdDiscountingRatePath = dvector(0, iN * BLOCKSIZE - 1);
    FTYPE *pdPayoffDiscountFactors = dvector(0, iN * BLOCKSIZE - 1);
    FTYPE *pdSwapRatePath;
    FTYPE *pdSwapDiscountFactors;
    FTYPE *pdSwapPayoffs;
    int iSwapStartTimeIndex;
    int iSwapTimePoints;
    FTYPE dSwapVectorYears;
    FTYPE dSwaptionPayoff;
    FTYPE dDiscSwaptionPayoff;
    FTYPE dFixedLegValue;
    FTYPE dSumSimSwaptionPrice;
    FTYPE dSumSquareSimSwaptionPrice;
    FTYPE dSimSwaptionMeanPrice;
    FTYPE dSimSwaptionStdError;
    uint64_t seed = iRndSeed;

    iSwapVectorLength = (int)(iN - dMaturity / ddelt + 0.5);
    pdSwapRatePath = dvector(0, iSwapVectorLength * BLOCKSIZE - 1);
    pdSwapDiscountFactors = dvector(0, iSwapVectorLength * BLOCKSIZE - 1);
    pdSwapPayoffs = dvector(0, iSwapVectorLength - 1);

    iSwapStartTimeIndex = (int)(dMaturity / ddelt + 0.5);
    iSwapTimePoints = (int)(dTenor / ddelt + 0.5);
    dSwapVectorYears = (FTYPE)(iSwapVectorLength * ddelt);

    /* payoffs of the swap: the fixed leg cash flows */
    for (i = 0; i <= iSwapVectorLength - 1; ++i)
        pdSwapPayoffs[i] = 0.0;
    for (i = iFreqRatio; i <= iSwapTimePoints; i += iFreqRatio) {
        if (i >= iSwapVectorLength)
            break;
        if (i != iSwapTimePoints)
            pdSwapPayoffs[i] = exp(dStrikeCont * dPaymentInterval) - 1;
        if (i == iSwapTimePoints)
            pdSwapPayoffs[i] = exp(dStrikeCont * dPaymentInterval);
    }

    /* forward curve and drifts */
    HJM_Yield_to_Forward(pdForward, iN, pdYield);
    HJM_Drifts(pdTotalDrift, ppdDrifts, iN, iFactors, dYears, ppdFactors);

    dSumSimSwaptionPrice = 0.0;
    dSumSquareSimSwaptionPrice = 0.0;

    /* simulations */
    for (l = 0; l <= lTrials - 1; l += BLOCKSIZE) {
        HJM_SimPath_Forward_Blocking(ppdHJMPath, iN, iFactors, dYears, pdForward, pdTotalDrift,
                                     ppdFactors, &seed, BLOCKSIZE);

        for (i = 0; i <= iN * BLOCKSIZE - 1; ++i) {
            pdDiscountingRatePath[i] = 0.0;
            pdPayoffDiscountFactors[i] = 0.0;
        }
        for (i = 0; i <= iSwapVectorLength * BLOCKSIZE - 1; ++i) {
            pdSwapRatePath[i] = 0.0;
            pdSwapDiscountFactors[i] = 0.0;
        }

        /* the short rate path: first column of the forward curves */
        for (i = 0; i <= iN - 1; ++i)
            for (b_ = 0; b_ < BLOCKSIZE; b_++)
                pdDiscountingRatePath[BLOCKSIZE * i + b_] = ppdHJMPath[i][0 + b_];
        Discount_Factors_Blocking(pdPayoffDiscountFactors, iN, dYears, pdDiscountingRatePath,
                                  BLOCKSIZE);

        /* the forward curve at swap start */
        for (i = 0; i <= iSwapVectorLength - 1; ++i)
            for (b_ = 0; b_ < BLOCKSIZE; b_++)
                pdSwapRatePath[i * BLOCKSIZE + b_] =
                    ppdHJMPath[iSwapStartTimeIndex][i * BLOCKSIZE + b_];
        Discount_Factors_Blocking(pdSwapDiscountFactors, iSwapVectorLength, dSwapVectorYears,
                                  pdSwapRatePath, BLOCKSIZE);

        /* valuation */
        for (b_ = 0; b_ < BLOCKSIZE; b_++) {
            dFixedLegValue = 0.0;
            for (i = 0; i <= iSwapVectorLength - 1; ++i)
                dFixedLegValue += pdSwapPayoffs[i] * pdSwapDiscountFactors[i * BLOCKSIZE + b_];
            dSwaptionPayoff = dMax(dFixedLegValue - 1.0, 0);
            dDiscSwaptionPayoff =
                dSwaptionPayoff * pdPayoffDiscountFactors[iSwapStartTimeIndex * BLOCKSIZE + b_];
            dSumSimSwaptionPrice += dDiscSwaptionPayoff;
            dSumSquareSimSwaptionPrice += dDiscSwaptionPayoff * dDiscSwaptionPayoff;
        }
    }

    dSimSwaptionMeanPrice = dSumSimSwaptionPrice / lTrials;
    dSimSwaptionStdError =
        sqrt((dSumSquareSimSwaptionPrice - dSumSimSwaptionPrice * dSumSimSwaptionPrice / lTrials) /
             (lTrials - 1.0)) /
        sqrt((FTYPE)lTrials);

    pdSwaptionPrice[0] = dSimSwaptionMeanPrice;
    pdSwaptionPrice[1] = dSimSwaptionStdError;

    free_dmatrix(ppdHJMPath, 0, iN - 1, 0, iN * BLOCKSIZE - 1);
    free_dvector(pdForward, 0, iN - 1);
    free_dmatrix(ppdDrifts, 0, iFactors - 1, 0, iN - 2);
    free_dvector(pdTotalDrift, 0, iN - 2);
    free_dvector(pdDiscountingRatePath, 0, iN * BLOCKSIZE - 1);
    free_dvector(pdPayoffDiscountFactors, 0, iN * BLOCKSIZE - 1);
    free_dvector(pdSwapRatePath, 0, iSwapVectorLength * BLOCKSIZE - 1);
    free_dvector(pdSwapDiscountFactors, 0, iSwapVectorLength * BLOCKSIZE - 1);
    free_dvector(pdSwapPayoffs, 0, iSwapVectorLength - 1);
    return 1;
}

static void *worker(void *arg)
{
    ThreadArg *ta = arg;
    int tid = ta->id;
    int chunksize = nSwaptions / nThreads, rem = nSwaptions % nThreads;
    int beg = tid * chunksize + (tid < rem ? tid : rem);
    int end = beg + chunksize + (tid < rem);
    FTYPE *pdSwaptionPrice = dvector(0, 1);

    for (int i = beg; i < end; i++) {
        parm *s = &swaptions[i];
        HJM_Swaption_Blocking(pdSwaptionPrice, s->dStrike, s->dCompounding, s->dMaturity, s->dTenor,
                              s->dPaymentInterval, s->iN, s->iFactors, s->dYears, s->pdYield,
                              s->ppdFactors, 100 + 0x9E3779B97F4A7C15ull * (uint64_t)(i + 1),
                              NUM_TRIALS, BLOCK_SIZE);
        s->dSimSwaptionMeanPrice = pdSwaptionPrice[0];
        s->dSimSwaptionStdError = pdSwaptionPrice[1];
    }
    free_dvector(pdSwaptionPrice, 0, 1);
    return NULL;
}

int main(int argc, char **argv)
{
    nThreads = threads_arg(argc, argv);
    int iN = 11, iFactors = 3;
    uint64_t seed = 1979;

    /* initialize the factor volatilities (the original's table) */
    FTYPE **factors = dmatrix(0, iFactors - 1, 0, iN - 2);
    static const FTYPE f1[10] = {.009048, .008187, .007408, .006703, .006065,
                                 .005488, .004966, .004493, .004066, .003679};
    static const FTYPE f2[10] = {.001000, .000750, .000500, .000250, .000000,
                                 -.000250, -.000500, -.000750, -.001000, -.001250};
    for (int i = 0; i <= iN - 2; ++i) {
        factors[0][i] = .01;
        factors[1][i] = f1[i];
        factors[2][i] = f2[i];
    }

    swaptions = (parm *)malloc(sizeof(parm) * (size_t)nSwaptions);
    if (!swaptions)
        nrerror("allocation failure for swaptions");
    for (int i = 0; i < nSwaptions; i++) {
        parm *s = &swaptions[i];
        s->Id = i;
        s->iN = iN;
        s->iFactors = iFactors;
        s->dYears = 5.0 + ((int)(60 * RanUnif(&seed))) * 0.25; /* 5 to 20 years */
        s->dStrike = 0.1 + ((int)(49 * RanUnif(&seed))) * 0.1; /* strikes 0.1 to 5.0 */
        s->dCompounding = 0;
        s->dMaturity = 1.0;
        s->dTenor = 2.0;
        s->dPaymentInterval = 1.0;
        s->dSimSwaptionMeanPrice = 0;
        s->dSimSwaptionStdError = 0;

        s->pdYield = dvector(0, iN - 1);
        s->pdYield[0] = .1;
        for (int j = 1; j <= iN - 1; ++j)
            s->pdYield[j] = s->pdYield[j - 1] + .005;

        s->ppdFactors = dmatrix(0, iFactors - 1, 0, iN - 2);
        for (int k = 0; k <= iFactors - 1; ++k)
            for (int j = 0; j <= iN - 2; ++j)
                s->ppdFactors[k][j] = factors[k][j];
        GPUSAN_READ_ONLY(s->pdYield, (size_t)iN * sizeof(FTYPE));
        GPUSAN_READ_ONLY(s->ppdFactors, (size_t)iFactors * sizeof(FTYPE *));
        GPUSAN_READ_ONLY(s->ppdFactors[0], (size_t)iFactors * (size_t)(iN - 1) * sizeof(FTYPE));
    }

    ThreadArg *ta = malloc((size_t)nThreads * sizeof(ThreadArg));
    if (!ta)
        nrerror("allocation failure for threads");
    for (int i = 0; i < nThreads; i++) {
        ta[i].id = i;
        if (pthread_create(&ta[i].tid, NULL, worker, &ta[i])) {
            perror("pthread_create");
            return 1;
        }
    }
    for (int i = 0; i < nThreads; i++)
        pthread_join(ta[i].tid, NULL);

    double sum = 0.0, errsum = 0.0;
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < nSwaptions; i++) {
        uint64_t bits;
        memcpy(&bits, &swaptions[i].dSimSwaptionMeanPrice, sizeof bits);
        h = (h ^ bits) * 0x100000001b3ull;
        memcpy(&bits, &swaptions[i].dSimSwaptionStdError, sizeof bits);
        h = (h ^ bits) * 0x100000001b3ull;
        sum += swaptions[i].dSimSwaptionMeanPrice;
        errsum += swaptions[i].dSimSwaptionStdError;
    }
    printf("swaptions: threads=%d swaptions=%d trials=%ld price_sum=%.10f stderr_sum=%.10f "
           "checksum=%016llx\n",
           nThreads, nSwaptions, NUM_TRIALS, sum, errsum, (unsigned long long)h);

    for (int i = 0; i < nSwaptions; i++) {
        free_dvector(swaptions[i].pdYield, 0, iN - 1);
        free_dmatrix(swaptions[i].ppdFactors, 0, iFactors - 1, 0, iN - 2);
    }
    free(swaptions);
    free_dmatrix(factors, 0, iFactors - 1, 0, iN - 2);
    free(ta);
    return 0;
}
