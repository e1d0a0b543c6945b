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
 * Prints `SCENARIO done rc=N`. */
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
