/* A stand-in for a Python extension that drives CUDA (PyTorch, CuPy), linked against the
 * fake driver and called from Python through ctypes (tests/labels.rs, tests/pyframes.rs):
 * allocations, a copy that may run past its buffer, and a checked kernel whose launch
 * leaves an error record the way an instrumented kernel would, read at the next drain. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

int cuMemAlloc_v2(uint64_t *, size_t);
int cuMemFree_v2(uint64_t);
int cuMemcpyHtoD_v2(uint64_t, const void *, size_t);
int cuModuleLoadData(void **, const void *);
int cuModuleGetGlobal_v2(uint64_t *, size_t *, void *, const char *);
int cuLaunchKernel(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *, void **, void **);
int cuCtxSynchronize(void);

/* A module check mode instruments; functions numbered by name: alpha 0, zeta 1. */
static const char *checked_ptx =
    ".version 9.0\n.target sm_90\n.address_size 64\n.file 1 \"checked.cu\"\n"
    ".visible .entry zeta(.param .u64 p)\n{\n\t.reg .b64 %rd<3>;\n\tld.param.u64 %rd1, [p];\n"
    "\tcvta.to.global.u64 %rd2, %rd1;\n\t.loc 1 21 5\n\tst.global.u32 [%rd2], 0;\n\tret;\n}\n"
    ".visible .entry alpha(.param .u64 p)\n{\n\t.reg .b64 %rd<3>;\n\tld.param.u64 %rd1, [p];\n"
    "\tcvta.to.global.u64 %rd2, %rd1;\n\t.loc 1 9 5\n\tst.global.u32 [%rd2], 1;\n\tret;\n}\n";

static void *module;

static uint64_t global_value(const char *name) {
    uint64_t addr = 0; size_t size = 0;
    if (cuModuleGetGlobal_v2(&addr, &size, module, name)) return 0;
    return size == 4 ? *(uint32_t *)(uintptr_t)addr : *(uint64_t *)(uintptr_t)addr;
}

uint64_t ext_alloc(uint64_t bytes) {
    uint64_t p = 0;
    return cuMemAlloc_v2(&p, (size_t)bytes) ? 0 : p;
}

int ext_free(uint64_t p) { return cuMemFree_v2(p); }

/* Copies `bytes` from the host into `dst`. */
int ext_copy(uint64_t dst, uint64_t bytes) {
    static char host[1 << 16];
    return cuMemcpyHtoD_v2(dst, host, (size_t)bytes);
}

/* Launches kernel `zeta`, which "stores 4 bytes at `addr`": when gpusan instrumented the
 * module (check mode), the record its checked store would write; nothing waits for it. */
int ext_launch_store(uint64_t addr) {
    if (!module && cuModuleLoadData(&module, checked_ptx)) return 1;
    if (cuLaunchKernel(0, 4, 1, 1, 32, 1, 1, 0, 0, 0, 0)) return 2;
    unsigned char *errors = (unsigned char *)(uintptr_t)global_value("__gpusan_errors");
    uint32_t id = (uint32_t)global_value("__gpusan_module");
    if (!errors || id == 0) return 0; /* not instrumented: the store checks nothing */
    uint32_t *count = (uint32_t *)errors, i = (*count)++;
    unsigned char *r = errors + 16 + 64 * i;
    uint32_t f[12] = {id << 16 | 1, 1, 4, 11, 2, 0, 0, 5, 0, 0, 0, 1}; /* PTX line 11: the store */
    memcpy(r, &addr, 8);
    memset(r + 8, 0, 8);
    memcpy(r + 16, f, sizeof f);
    return 0;
}

int ext_sync(void) { return cuCtxSynchronize(); }
