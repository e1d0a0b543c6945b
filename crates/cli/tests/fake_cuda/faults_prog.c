/* GPU faults with the fake driver (its kernel `fault_me` faults: every later call of its
 * context returns 700), for tests/faults.rs:
 *   faults_prog SCENARIO
 * `abort`: `zeta` of a module check mode instruments writes one error record (4 bytes past
 *   a 1024-byte allocation), `fault_me` faults, the synchronization returns 700 and the
 *   program aborts, as a CUDA_CHECK macro does: it never synchronizes successfully or exits.
 * `stream_query`, `event_query`: `fault_me` faults and the program learns of it only by
 *   polling cuStreamQuery or cuEventQuery, then exits with 3.
 * `unchecked`: `fault_me` faults and the program exits with 0, never asking.
 * `two_contexts`: `fault_me` faults in context 0x1000, then in 0x2000; each context's
 *   synchronizations fail three times.
 * `streams`: `alpha` runs on stream 2 and `zeta` on stream 1, stream 1 is synchronized,
 *   `fault_me` (grid 2, block 64) runs on stream 2, a copy succeeds (fault_me has not
 *   faulted yet), then the context's synchronization returns 700.
 * `graph`: `zeta` captured into a graph on stream 1 and synchronized; the graph launched on
 *   stream 1, and one of its kernels faults; the context's synchronization returns 700.
 * `runtime_only`: a runtime-API call returns 700 through the Compute Sanitizer callbacks
 *   (fake_runtime_call, libsanitizer.c) and no driver call does; the program exits 1.
 * Prints each call's result the scenario judges (`sync=700`, `query=700`). */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
CUresult cuInit(unsigned);
CUresult cuDevicePrimaryCtxRetain(void **, int);
CUresult cuModuleLoadData(void **, const void *);
CUresult cuModuleGetFunction(void **, void *, const char *);
CUresult cuModuleGetGlobal_v2(uint64_t *, size_t *, void *, const char *);
CUresult cuLaunchKernel(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *, void **,
                        void **);
CUresult cuCtxSynchronize(void);
CUresult cuMemAlloc_v2(uint64_t *, size_t);
CUresult cuStreamQuery(void *);
CUresult cuEventQuery(void *);
CUresult cuEventCreate(void **, unsigned);
CUresult cuStreamCreate(void **, unsigned);
CUresult cuStreamSynchronize(void *);
CUresult cuMemcpyDtoH_v2(void *, uint64_t, size_t);
void fake_set_context(uintptr_t);
void fake_fault(void);
CUresult cuStreamBeginCapture_v2(void *, int);
CUresult cuStreamEndCapture(void *, void **);
CUresult cuGraphInstantiateWithFlags(void **, void *, unsigned long long);
CUresult cuGraphLaunch(void *, void *);

/* Functions numbered by name once instrumented: alpha 0, zeta 1 (as in prog.c). */
static const char *checked_ptx =
    ".version 9.0\n.target sm_90\n.address_size 64\n.file 1 \"checked.cu\"\n"
    ".visible .entry zeta(.param .u64 p)\n{\n\t.reg .b64 %rd<3>;\n\tld.param.u64 %rd1, [p];\n"
    "\tcvta.to.global.u64 %rd2, %rd1;\n\t.loc 1 21 5\n\tst.global.u32 [%rd2], 0;\n\tret;\n}\n"
    ".visible .entry alpha(.param .u64 p)\n{\n\t.reg .b64 %rd<3>;\n\tld.param.u64 %rd1, [p];\n"
    "\tcvta.to.global.u64 %rd2, %rd1;\n\t.loc 1 9 5\n\tst.global.u32 [%rd2], 1;\n\tret;\n}\n";

static uint64_t global_value(void *m, const char *name) {
    uint64_t addr = 0;
    size_t size = 0;
    if (cuModuleGetGlobal_v2(&addr, &size, m, name)) return 0;
    return size == 4 ? *(uint32_t *)(uintptr_t)addr : *(uint64_t *)(uintptr_t)addr;
}

/* The error record an instrumented kernel of module `m` writes: a 4-byte write at `addr` by
 * function `function`, at PTX line `ptx_line`, block 2, thread 5. */
static int play_record(void *m, uint64_t addr, uint32_t function, uint32_t ptx_line) {
    unsigned char *errors = (unsigned char *)(uintptr_t)global_value(m, "__gpusan_errors");
    uint32_t module = (uint32_t)global_value(m, "__gpusan_module");
    if (!errors || module == 0) return 16;
    uint32_t *count = (uint32_t *)errors, i = (*count)++;
    unsigned char *r = errors + 16 + 64 * i;
    uint32_t f[12] = {module << 16 | function, 1, 4, ptx_line, 2, 0, 0, 5, 0, 0, 0, 1};
    memcpy(r, &addr, 8);
    memset(r + 8, 0, 8);
    memcpy(r + 16, f, sizeof f);
    return 0;
}

static void *fault_me, *zeta, *alpha;

static int fault(void) { return cuLaunchKernel(fault_me, 2, 1, 1, 64, 1, 1, 0, 0, 0, 0); }

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    const char *s = argv[1];
    void *ctx = 0, *m = 0;
    int rc = cuInit(0) | cuDevicePrimaryCtxRetain(&ctx, 0) | cuModuleLoadData(&m, checked_ptx);
    rc |= cuModuleGetFunction(&zeta, m, "zeta") | cuModuleGetFunction(&fault_me, m, "fault_me");
    rc |= cuModuleGetFunction(&alpha, m, "alpha");
    if (rc) return 2;
    if (!strcmp(s, "abort")) {
        uint64_t a = 0;
        void *params[] = {&a};
        rc |= cuMemAlloc_v2(&a, 1024) | cuLaunchKernel(zeta, 4, 1, 1, 32, 1, 1, 0, 0, params, 0);
        rc |= play_record(m, a + 1024 + 4, 1, 11) | fault();
        int r = cuCtxSynchronize();
        printf("sync=%d rc=%d\n", r, rc);
        fflush(stdout);
        if (r) abort();
        return 1;
    }
    if (!strcmp(s, "stream_query") || !strcmp(s, "event_query")) {
        void *event = 0;
        rc |= cuEventCreate(&event, 0) | fault();
        int r = !strcmp(s, "stream_query") ? cuStreamQuery(0) : cuEventQuery(event);
        printf("query=%d rc=%d\n", r, rc);
        return r ? 3 : 1;
    }
    if (!strcmp(s, "unchecked")) {
        rc |= fault();
        printf("launched rc=%d\n", rc);
        return rc;
    }
    if (!strcmp(s, "streams")) {
        void *s1 = 0, *s2 = 0;
        uint64_t a = 0;
        int v = 0;
        void *params[] = {&a};
        rc |= cuStreamCreate(&s1, 1) | cuStreamCreate(&s2, 1) | cuMemAlloc_v2(&a, 64);
        rc |= cuLaunchKernel(alpha, 1, 1, 1, 32, 1, 1, 0, s2, params, 0);
        rc |= cuLaunchKernel(zeta, 1, 1, 1, 32, 1, 1, 0, s1, params, 0);
        rc |= cuStreamSynchronize(s1);
        rc |= cuLaunchKernel(fault_me, 2, 1, 1, 64, 1, 1, 0, s2, 0, 0);
        rc |= cuMemcpyDtoH_v2(&v, a, sizeof v);
        printf("sync=%d rc=%d\n", cuCtxSynchronize(), rc);
        return rc;
    }
    if (!strcmp(s, "graph")) {
        void *st = 0, *graph = 0, *exec = 0;
        uint64_t a = 0;
        void *params[] = {&a};
        rc |= cuStreamCreate(&st, 1) | cuMemAlloc_v2(&a, 64) | cuStreamBeginCapture_v2(st, 0);
        rc |= cuLaunchKernel(zeta, 1, 1, 1, 32, 1, 1, 0, st, params, 0) | cuStreamEndCapture(st, &graph);
        rc |= cuGraphInstantiateWithFlags(&exec, graph, 0) | cuCtxSynchronize();
        rc |= cuGraphLaunch(exec, st);
        fake_fault();
        printf("sync=%d rc=%d exec=%#lx stream=%#lx\n", cuCtxSynchronize(), rc, (unsigned long)(uintptr_t)exec,
               (unsigned long)(uintptr_t)st);
        return rc;
    }
    if (!strcmp(s, "runtime_only")) {
        int (*call)(uint32_t, const void *, int) = (int (*)(uint32_t, const void *, int))dlsym(RTLD_DEFAULT, "fake_runtime_call");
        int dummy = 0;
        int r = call ? call(165, &dummy, 700) : -2; /* cudaDeviceSynchronize */
        printf("runtime=%d\n", r);
        return 1;
    }
    if (!strcmp(s, "two_contexts")) {
        for (uintptr_t c = 0x1000; c <= 0x2000; c += 0x1000) {
            fake_set_context(c);
            rc |= fault();
            for (int i = 0; i < 3; i++) printf("%#lx sync=%d\n", (unsigned long)c, cuCtxSynchronize());
        }
        printf("rc=%d\n", rc);
        return rc;
    }
    return 2;
}
