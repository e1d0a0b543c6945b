/* Launches for tests of compute-sanitizer's options in `gpusan run`, with the fake driver:
 *   cs_prog
 * Loads a PTX module (check mode instruments it) with two kernels, `_Z5firstPi` (function
 * 0) and `_Z6secondPi` (function 1), and launches them in the order second, first, second,
 * second, first, second. Each launch plays what the launched code would do: the
 * instrumented kernel writes one error record (a 4-byte write past a 16-byte allocation, at
 * a PTX line and address of its own, so each launch is a finding of its own); an unchecked
 * copy (`__gpusan_unchecked_…`) writes none. Synchronizes after each launch, prints
 * `cs done rc=N` and exits 0. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef int CUresult;
CUresult cuInit(unsigned);
CUresult cuMemAlloc_v2(uint64_t *, size_t);
CUresult cuModuleLoadData(void **, const void *);
CUresult cuModuleGetFunction(void **, void *, const char *);
CUresult cuModuleGetGlobal_v2(uint64_t *, size_t *, void *, const char *);
CUresult cuLaunchKernel(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *, void **,
                        void **);
CUresult cuCtxSynchronize(void);
const char *fake_last_launched_name(void);

static const char *ptx =
    ".version 9.0\n.target sm_90\n.address_size 64\n.file 1 \"cs.cu\"\n"
    ".visible .entry _Z6secondPi(.param .u64 p)\n{\n\t.reg .b64 %rd<3>;\n\tld.param.u64 %rd1, [p];\n"
    "\tcvta.to.global.u64 %rd2, %rd1;\n\t.loc 1 21 5\n\tst.global.u32 [%rd2+16], 0;\n\tret;\n}\n"
    ".visible .entry _Z5firstPi(.param .u64 p)\n{\n\t.reg .b64 %rd<3>;\n\tld.param.u64 %rd1, [p];\n"
    "\tcvta.to.global.u64 %rd2, %rd1;\n\t.loc 1 9 5\n\tst.global.u32 [%rd2+16], 1;\n\tret;\n}\n";

static uint64_t global_value(void *m, const char *name) {
    uint64_t addr = 0; size_t size = 0;
    if (cuModuleGetGlobal_v2(&addr, &size, m, name)) return 0;
    return size == 4 ? *(uint32_t *)(uintptr_t)addr : *(uint64_t *)(uintptr_t)addr;
}

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

int main(void) {
    int rc = 0;
    void *m = 0, *fn[2] = {0, 0};
    const char *names[2] = {"_Z5firstPi", "_Z6secondPi"};
    uint64_t p = 0;
    if (cuInit(0) || cuMemAlloc_v2(&p, 16) || cuModuleLoadData(&m, ptx)) rc |= 1;
    for (int k = 0; k < 2; k++)
        if (cuModuleGetFunction(&fn[k], m, names[k])) rc |= 2;
    int order[6] = {1, 0, 1, 1, 0, 1};
    for (int i = 0; i < 6; i++) {
        int k = order[i];
        void *params[1] = {&p};
        if (cuLaunchKernel(fn[k], 1, 1, 1, 32, 1, 1, 0, 0, params, 0)) rc |= 4;
        const char *ran = fake_last_launched_name();
        if (!strcmp(ran, names[k]) && play_record(m, p + 16 + 4 * i, k, 100 + i)) rc |= 8;
        else if (strcmp(ran, names[k]) && strncmp(ran, "__gpusan_unchecked_", 19)) rc |= 32;
        if (cuCtxSynchronize()) rc |= 64;
    }
    printf("cs done rc=%d\n", rc);
    return 0;
}
