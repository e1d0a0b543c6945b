/* Kernels for tests of the binary route (tests/binary.rs), with the fake driver and the
 * fake Compute Sanitizer library (libsanitizer.c, which plays the patched kernels):
 *   binary_prog SCENARIO
 * `cubin`: a cubin (machine code only, no device ABI) whose kernel `mc_overflow` is launched
 * twice on a 1000-byte allocation, each launch writing 4 bytes at its end (offset 1000).
 * `ptx`: a PTX module whose kernel `zeta` is launched once.
 * `graph`: the cubin's `mc_overflow` captured into a graph (never launched directly), the
 * graph launched once; `graph_upload`: the same graph uploaded before its launch;
 * `direct_and_graph`: launched once directly, then once in the graph.
 * `cdp`: a cubin that launches kernels from the device (it names __cudaCDP2LaunchDeviceV2),
 * its `mc_overflow` launched once.
 * `contended`: a second thread launches the cubin's `mc_overflow` for the first time while
 * the main thread's next launch of it uploads the table, the fake driver's lock held by the
 * first launch until the upload's copy waits for it (fake_launch_meets_copy): the patched
 * kernel's first launch must not wait for the upload.
 * Prints `SCENARIO done rc=N`. */
#include <pthread.h>
#include <unistd.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef int CUresult;
CUresult cuInit(unsigned);
CUresult cuDevicePrimaryCtxRetain(void **, int);
CUresult cuModuleLoadData(void **, const void *);
CUresult cuModuleGetFunction(void **, void *, const char *);
CUresult cuLaunchKernel(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *, void **,
                        void **);
CUresult cuCtxSynchronize(void);
CUresult cuMemAlloc_v2(uint64_t *, size_t);
CUresult cuMemFree_v2(uint64_t);
CUresult cuStreamCreate(void **, unsigned);
CUresult cuStreamBeginCapture_v2(void *, int);
CUresult cuStreamEndCapture(void *, void **);
CUresult cuStreamSynchronize(void *);
CUresult cuGraphInstantiateWithFlags(void **, void *, unsigned long long);
CUresult cuGraphUpload(void *, void *);
CUresult cuGraphLaunch(void *, void *);

CUresult cuMemGetInfo_v2(size_t *, size_t *);
CUresult cuMemGetAddressRange_v2(uint64_t *, size_t *, uint64_t);
size_t fake_alloc_asked(uint64_t);
void fake_launch_meets_copy(void);
int fake_launch_waiting(void);

struct launch { void *f; void **params; int rc; };
static void *launch_thread(void *arg) {
    struct launch *l = arg;
    l->rc = cuLaunchKernel(l->f, 1, 1, 1, 32, 1, 1, 0, 0, l->params, 0);
    return 0;
}
uint64_t fake_alloc_live_bytes(void);

/* The binary route's other checks (tests/binary.rs), on the allocation `buf` (1000 bytes):
 * `redzone`: a second 1000-byte allocation; prints the bytes the driver was asked for each
 * (`asked a=N b=M`), how much more `cuMemGetInfo` reports free than the driver holds
 * (`meminfo extra=N`) and what `cuMemGetAddressRange` says of `buf` (`range base=1 size=N`),
 * then launches `mc_redzone` on `buf`.
 * `kinds`: a cubin whose machine code names the device heap's `malloc`; launches `mc_shared`
 * and `mc_double_free` (on `buf`). */
static int more_scenarios(const char *s, int *rc, uint64_t buf) {
    void *m = 0, *f = 0;
    int n = 1000;
    void *params[] = {&buf, &n};
    if (!strcmp(s, "redzone")) {
        uint64_t b = 0;
        size_t free_bytes = 0, total = 0;
        *rc |= cuMemAlloc_v2(&b, 1000) | cuMemGetInfo_v2(&free_bytes, &total);
        printf("asked a=%zu b=%zu\n", fake_alloc_asked(buf), fake_alloc_asked(b));
        printf("meminfo extra=%llu\n", (unsigned long long)(free_bytes - (total - fake_alloc_live_bytes())));
        uint64_t base = 0;
        size_t range = 0;
        *rc |= cuMemGetAddressRange_v2(&base, &range, buf + 10);
        printf("range base=%d size=%zu\n", base == buf, range);
        static unsigned char cubin[64] = {0x7f, 'E', 'L', 'F', 2, 1, 1};
        *rc |= cuModuleLoadData(&m, cubin) | cuModuleGetFunction(&f, m, "mc_redzone");
        *rc |= cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, 0, params, 0) | cuCtxSynchronize() | cuMemFree_v2(b);
        return 1;
    }
    if (!strcmp(s, "kinds")) {
        static unsigned char cubin[128] = {0x7f, 'E', 'L', 'F', 2, 1, 1};
        memcpy(cubin + 64, "malloc", 7); /* what the fake reports of it ends at a NUL */
        *rc |= cuModuleLoadData(&m, cubin) | cuModuleGetFunction(&f, m, "mc_shared");
        *rc |= cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, 0, params, 0) | cuModuleGetFunction(&f, m, "mc_double_free");
        *rc |= cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, 0, params, 0);
        return 1;
    }
    return 0;
}

static const char *ptx =
    ".version 9.0\n.target sm_90\n.address_size 64\n"
    ".visible .entry zeta(.param .u64 p)\n{\n\t.reg .b64 %rd<3>;\n\tld.param.u64 %rd1, [p];\n"
    "\tcvta.to.global.u64 %rd2, %rd1;\n\tst.global.u32 [%rd2], 0;\n\tret;\n}\n";

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    const char *s = argv[1];
    void *ctx = 0, *m = 0, *f = 0;
    uint64_t buf = 0;
    int n = 1000;
    void *params[] = {&buf, &n};
    int rc = cuInit(0) | cuDevicePrimaryCtxRetain(&ctx, 0) | cuMemAlloc_v2(&buf, 1000);
    if (!strcmp(s, "cubin")) {
        static unsigned char cubin[64] = {0x7f, 'E', 'L', 'F', 2, 1, 1};
        rc |= cuModuleLoadData(&m, cubin) | cuModuleGetFunction(&f, m, "mc_overflow");
        rc |= cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, 0, params, 0);
        rc |= cuCtxSynchronize();
        rc |= cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, 0, params, 0);
    } else if (!strcmp(s, "graph") || !strcmp(s, "graph_upload") || !strcmp(s, "direct_and_graph")) {
        static unsigned char cubin[64] = {0x7f, 'E', 'L', 'F', 2, 1, 1};
        void *stream = 0, *graph = 0, *exec = 0;
        rc |= cuModuleLoadData(&m, cubin) | cuModuleGetFunction(&f, m, "mc_overflow") | cuStreamCreate(&stream, 0);
        if (!strcmp(s, "direct_and_graph")) rc |= cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, stream, params, 0);
        rc |= cuStreamBeginCapture_v2(stream, 0);
        rc |= cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, stream, params, 0);
        rc |= cuStreamEndCapture(stream, &graph) | cuGraphInstantiateWithFlags(&exec, graph, 0);
        if (!strcmp(s, "graph_upload")) rc |= cuGraphUpload(exec, stream);
        rc |= cuGraphLaunch(exec, stream) | cuStreamSynchronize(stream);
    } else if (!strcmp(s, "cdp")) {
        static unsigned char cubin[128] = {0x7f, 'E', 'L', 'F', 2, 1, 1};
        memcpy(cubin + 64, "__cudaCDP2LaunchDeviceV2", 25);
        rc |= cuModuleLoadData(&m, cubin) | cuModuleGetFunction(&f, m, "mc_overflow");
        rc |= cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, 0, params, 0);
    } else if (!strcmp(s, "contended")) {
        static unsigned char cubin[64] = {0x7f, 'E', 'L', 'F', 2, 1, 1};
        rc |= cuModuleLoadData(&m, cubin) | cuModuleGetFunction(&f, m, "mc_overflow");
        fake_launch_meets_copy();
        struct launch l = {f, params, 0};
        pthread_t t;
        pthread_create(&t, 0, launch_thread, &l);
        while (!fake_launch_waiting()) usleep(100);
        uint64_t more = 0;
        rc |= cuMemAlloc_v2(&more, 512); /* the table changes: the next launch uploads it */
        rc |= cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, 0, params, 0);
        pthread_join(t, 0);
        rc |= l.rc | cuMemFree_v2(more);
    } else if (more_scenarios(s, &rc, buf)) {
        /* done there */
    } else if (!strcmp(s, "ptx")) {
        rc |= cuModuleLoadData(&m, ptx) | cuModuleGetFunction(&f, m, "zeta");
        rc |= cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, 0, params, 0);
    } else {
        return 2;
    }
    rc |= cuCtxSynchronize() | cuMemFree_v2(buf);
    printf("%s done rc=%d\n", s, rc);
    return rc != 0;
}
