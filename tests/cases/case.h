// Shared by the memory-safety cases of tests/cases/ (see README.md there).
// CK: a call that must succeed; on failure the case prints FAIL and returns 1 (a clean case that
//     fails this way is a broken case, or a tool that changed the program's behaviour).
// TRY: the buggy call itself; prints what CUDA returned (the suite records it) and clears the
//     (non-sticky) error so later calls start clean.
#pragma once
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <cuda_runtime.h>

#define CK(x)                                                                               \
    do {                                                                                    \
        cudaError_t ck_e = (x);                                                             \
        if (ck_e != cudaSuccess) {                                                          \
            printf("FAIL %s:%d %s -> %s\n", __FILE__, __LINE__, #x, cudaGetErrorName(ck_e)); \
            return 1;                                                                       \
        }                                                                                   \
    } while (0)

#define TRY(x) try_report(#x, (x))

static inline cudaError_t try_report(const char* what, cudaError_t e) {
    printf("bug call %s -> %s\n", what, cudaGetErrorName(e));
    cudaGetLastError();
    return e;
}

// Ends a case: the launch and sync status of the last kernels, then one verdict line.
#define DONE(ok)                                                                      \
    do {                                                                              \
        cudaError_t done_e = cudaDeviceSynchronize();                                 \
        if (done_e == cudaSuccess) done_e = cudaGetLastError();                       \
        printf("%s (%s)\n", (ok) && done_e == cudaSuccess ? "OK" : "WRONG",           \
               cudaGetErrorName(done_e));                                             \
        return (ok) && done_e == cudaSuccess ? 0 : 1;                                 \
    } while (0)

// Ends a bug case: 0 when the device is still healthy (the bug did not crash the program), 2
// when a kernel error was left behind.
#define BUG_DONE()                                                                    \
    do {                                                                              \
        cudaError_t done_e = cudaDeviceSynchronize();                                 \
        if (done_e == cudaSuccess) done_e = cudaGetLastError();                       \
        printf("done (%s)\n", cudaGetErrorName(done_e));                              \
        return done_e == cudaSuccess ? 0 : 2;                                         \
    } while (0)

// Bytes filled with a pattern that is not zero (zeros hide unwritten memory).
static inline void fill(void* p, size_t n, unsigned seed = 1) {
    unsigned char* b = (unsigned char*)p;
    for (size_t i = 0; i < n; i++) b[i] = (unsigned char)(seed * 131u + i * 7u + 1u);
}
