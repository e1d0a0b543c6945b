/* Kernel launches for tests of the report's coverage, with the fake driver:
 *   coverage_prog SCENARIO
 * `ptx`: a PTX module (check mode instruments it); `zeta` launched 3 times, `alpha` once. `cubin`: a cubin (machine code only); `mc` launched
 * twice. `ghost`: the PTX module, and a launch of a handle the program never looked up
 * through the driver (so neither gpusan nor the driver can name it). `fault`: `zeta` runs and
 * is synchronized; then `fault_me` (grid 2, block 64, the fake's faulting kernel) and `zeta`
 * again; every synchronization after returns 700, printed as `sync=N`. `graph`: the PTX
 * module; `zeta` twice and `alpha` once captured into a graph launched 3 times, `alpha` once
 * outside, and a graph made node by node with one `alpha` node launched 4 times (so `zeta` 6
 * launches, `alpha` 8). `abi_cubin`: machine code that declares the device ABI (built
 * instrumented where gpusan kept no record of it, as a Triton cache can be), its one kernel
 * `_Z3triPfi` launched twice, which writes one error record (function 0, the number of a
 * function gpusan cannot name). `unload`: the PTX module, `zeta` launched twice; the module
 * unloaded, and a cubin loaded at the same handle with a `zeta` of its own (the fake hands out
 * the same function handle again), launched once. `library_graph`: the PTX module loaded as
 * a library; its kernel `zeta` launched once by its CUkernel handle (as cudart 13 does) and
 * once captured into a graph launched 3 times, whose kernel node holds the kernel's function
 * in the context, a handle gpusan never saw handed out. `context`: as `unload`, but the
 * module goes with its context (the primary context released for the last time, then
 * retained again). Prints `SCENARIO done rc=N` (the fault expected in `fault` not
 * counted). */
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
CUresult cuModuleGetGlobal_v2(uint64_t *, size_t *, void *, const char *);
CUresult cuModuleUnload(void *);
CUresult cuDevicePrimaryCtxRelease_v2(int);
CUresult cuLibraryLoadData(void **, const void *, int *, void **, unsigned, int *, void **, unsigned);
CUresult cuLibraryGetKernel(void **, void *, const char *);
void fake_distinct_kernel_functions(int);
CUresult cuStreamCreate(void **, unsigned);
CUresult cuStreamBeginCapture_v2(void *, int);
CUresult cuStreamEndCapture(void *, void **);
CUresult cuGraphCreate(void **, unsigned);
CUresult cuGraphInstantiateWithFlags(void **, void *, unsigned long long);
CUresult cuGraphLaunch(void *, void *);
/* CUgraphNodeParams with a kernel node's CUDA_KERNEL_NODE_PARAMS_v2 (256 bytes). */
struct kernel_node { int type, reserved0[3]; union { long long reserved1[29]; struct { void *func; unsigned dims[7]; void **params, **extra; void *kern, *ctx; } k; } u; long long reserved2; };
CUresult cuGraphAddNode(void **, void *, const void **, size_t, struct kernel_node *);

static uint64_t global_value(void *m, const char *name) {
    uint64_t addr = 0; size_t size = 0;
    if (cuModuleGetGlobal_v2(&addr, &size, m, name)) return 0;
    return size == 4 ? *(uint32_t *)(uintptr_t)addr : *(uint64_t *)(uintptr_t)addr;
}

/* The `abi_cubin` scenario: see above. The fake driver takes a cubin whose text (after the
 * 64-byte ELF header) is "FAKE-LINKED: …" to declare the ABI variables it names. */
static int launch(void *f);
static int abi_cubin(void) {
    static unsigned char cubin[256] = {0x7f, 'E', 'L', 'F', 2, 1, 1};
    strcpy((char *)cubin + 64, "FAKE-LINKED: .global .u64 __gpusan_errors; .entry _Z3triPfi");
    void *m = 0, *f = 0;
    int rc = cuModuleLoadData(&m, cubin) | cuModuleGetFunction(&f, m, "_Z3triPfi");
    rc |= launch(f) | launch(f);
    unsigned char *errors = (unsigned char *)(uintptr_t)global_value(m, "__gpusan_errors");
    uint32_t module = (uint32_t)global_value(m, "__gpusan_module");
    if (!errors || module == 0) return rc | 16;
    uint32_t *count = (uint32_t *)errors, i = (*count)++;
    unsigned char *r = errors + 16 + 64 * i;
    uint64_t addr = 0x10;
    uint32_t w[12] = {module << 16 | 0, 1, 4, 0, 2, 0, 0, 5, 0, 0, 0, 1}; /* a 4-byte write */
    memcpy(r, &addr, 8);
    memset(r + 8, 0, 8);
    memcpy(r + 16, w, sizeof w);
    return rc;
}

/* The `graph` scenario: see above. */
static int graphs(void *f, void *g) {
    void *stream = 0, *captured = 0, *built = 0, *exec = 0, *exec2 = 0, *node = 0;
    int rc = cuStreamCreate(&stream, 0) | cuStreamBeginCapture_v2(stream, 0);
    rc |= cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, stream, 0, 0) | cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, stream, 0, 0);
    rc |= cuLaunchKernel(g, 1, 1, 1, 32, 1, 1, 0, stream, 0, 0);
    rc |= cuStreamEndCapture(stream, &captured) | cuGraphInstantiateWithFlags(&exec, captured, 0);
    for (int i = 0; i < 3; i++) rc |= cuGraphLaunch(exec, stream);
    rc |= cuLaunchKernel(g, 1, 1, 1, 32, 1, 1, 0, stream, 0, 0);
    struct kernel_node p;
    memset(&p, 0, sizeof p);
    p.u.k.func = g;
    rc |= cuGraphCreate(&built, 0) | cuGraphAddNode(&node, built, 0, 0, &p) | cuGraphInstantiateWithFlags(&exec2, built, 0);
    for (int i = 0; i < 4; i++) rc |= cuGraphLaunch(exec2, stream);
    return rc;
}

static const char *checked_ptx =
    ".version 9.0\n.target sm_90\n.address_size 64\n"
    ".visible .entry zeta(.param .u64 p)\n{\n\t.reg .b64 %rd<3>;\n\tld.param.u64 %rd1, [p];\n"
    "\tcvta.to.global.u64 %rd2, %rd1;\n\tst.global.u32 [%rd2], 0;\n\tret;\n}\n"
    ".visible .entry alpha(.param .u64 p)\n{\n\t.reg .b64 %rd<3>;\n\tld.param.u64 %rd1, [p];\n"
    "\tcvta.to.global.u64 %rd2, %rd1;\n\tst.global.u32 [%rd2], 1;\n\tret;\n}\n";

static int launch(void *f) { return cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, 0, 0, 0); }

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    const char *s = argv[1];
    void *ctx = 0, *m = 0, *f = 0, *g = 0;
    int rc = cuInit(0) | cuDevicePrimaryCtxRetain(&ctx, 0);
    if (!strcmp(s, "library_graph")) {
        void *lib = 0, *k = 0, *stream = 0, *graph = 0, *exec = 0;
        fake_distinct_kernel_functions(1);
        rc |= cuLibraryLoadData(&lib, checked_ptx, 0, 0, 0, 0, 0, 0) | cuLibraryGetKernel(&k, lib, "zeta");
        rc |= launch(k) | cuStreamCreate(&stream, 0) | cuStreamBeginCapture_v2(stream, 0);
        rc |= cuLaunchKernel(k, 1, 1, 1, 32, 1, 1, 0, stream, 0, 0) | cuStreamEndCapture(stream, &graph);
        rc |= cuGraphInstantiateWithFlags(&exec, graph, 0);
        for (int i = 0; i < 3; i++) rc |= cuGraphLaunch(exec, stream);
    } else if (!strcmp(s, "unload") || !strcmp(s, "context")) {
        static unsigned char cubin[64] = {0x7f, 'E', 'L', 'F', 2, 1, 1};
        void *f2 = 0;
        rc |= cuModuleLoadData(&m, checked_ptx) | cuModuleGetFunction(&f, m, "zeta");
        rc |= launch(f) | launch(f);
        if (!strcmp(s, "unload")) rc |= cuModuleUnload(m);
        else rc |= cuDevicePrimaryCtxRelease_v2(0) | cuDevicePrimaryCtxRetain(&ctx, 0);
        rc |= cuModuleLoadData(&m, cubin) | cuModuleGetFunction(&f2, m, "zeta");
        rc |= launch(f2) | (f2 != f); /* the handle reused, as the test wants */
    } else if (!strcmp(s, "abi_cubin")) {
        rc |= abi_cubin();
    } else if (!strcmp(s, "graph")) {
        rc |= cuModuleLoadData(&m, checked_ptx);
        rc |= cuModuleGetFunction(&f, m, "zeta") | cuModuleGetFunction(&g, m, "alpha");
        rc |= graphs(f, g);
    } else if (!strcmp(s, "ptx") || !strcmp(s, "ghost")) {
        rc |= cuModuleLoadData(&m, checked_ptx);
        rc |= cuModuleGetFunction(&f, m, "zeta") | cuModuleGetFunction(&g, m, "alpha");
        if (!strcmp(s, "ptx")) rc |= launch(f) | launch(f) | launch(f) | launch(g);
        else rc |= launch((void *)0x7777);
    } else if (!strcmp(s, "cubin")) {
        static unsigned char cubin[64] = {0x7f, 'E', 'L', 'F', 2, 1, 1};
        rc |= cuModuleLoadData(&m, cubin) | cuModuleGetFunction(&f, m, "mc");
        rc |= launch(f) | launch(f);
    } else if (!strcmp(s, "fault")) {
        rc |= cuModuleLoadData(&m, checked_ptx);
        rc |= cuModuleGetFunction(&f, m, "zeta") | cuModuleGetFunction(&g, m, "fault_me");
        rc |= launch(f) | cuCtxSynchronize();
        rc |= cuLaunchKernel(g, 2, 1, 1, 64, 1, 1, 0, 0, 0, 0);
        int after = launch(f);
        printf("launch=%d\n", after);
        int first = cuCtxSynchronize(), second = cuCtxSynchronize();
        printf("sync=%d sync=%d\n", first, second);
        printf("%s done rc=%d\n", s, rc);
        return first != 700 || second != 700;
    } else {
        return 2;
    }
    rc |= cuCtxSynchronize();
    printf("%s done rc=%d\n", s, rc);
    return rc != 0;
}
