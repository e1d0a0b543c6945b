/* A program that loads a profiler's library, as torch.profiler loads CUPTI, for
 * tests/profilers.rs:
 *   profiler_prog [LIBRARY]
 * initializes CUDA (so the injection, and gpusan's Compute Sanitizer subscription, start),
 * then dlopen()s LIBRARY when given. Prints `profiler loaded=0|1`. */
#include <dlfcn.h>
#include <stdio.h>

typedef int CUresult;
CUresult cuInit(unsigned);

int main(int argc, char **argv) {
    int rc = cuInit(0);
    void *h = argc > 1 ? dlopen(argv[1], RTLD_NOW | RTLD_LOCAL) : 0;
    printf("profiler loaded=%d rc=%d\n", h != 0, rc);
    return rc;
}
