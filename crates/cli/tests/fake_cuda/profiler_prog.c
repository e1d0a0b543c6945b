/* A program that loads a profiler, as torch.profiler loads CUPTI (Kineto, linked against
 * libcupti, inside a library Python loads with RTLD_LOCAL), for tests/profilers.rs:
 *   profiler_prog [LIBRARY [start]]
 * initializes CUDA (so the injection, and gpusan's Compute Sanitizer subscription, start),
 * then dlopen()s LIBRARY when given, and with `start` calls its start_profiler() (which
 * switches CUPTI's activity records on). Prints `profiler loaded=0|1 started=N rc=R`, N
 * what start_profiler returned (-1: not called). */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

typedef int CUresult;
CUresult cuInit(unsigned);

int main(int argc, char **argv) {
    int rc = cuInit(0);
    void *h = argc > 1 ? dlopen(argv[1], RTLD_NOW | RTLD_LOCAL) : 0;
    int started = -1;
    if (h && argc > 2 && !strcmp(argv[2], "start")) {
        int (*start)(void) = (int (*)(void))dlsym(h, "start_profiler");
        started = start ? start() : -2;
    }
    printf("profiler loaded=%d started=%d rc=%d\n", h != 0, started, rc);
    return rc;
}
