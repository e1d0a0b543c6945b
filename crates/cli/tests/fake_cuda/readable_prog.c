/* What a finding looks like to a user: a program built with `-g`, whose allocation and
 * copy go through the CUDA runtime (cudart.c) and whose kernel launch plays the record an
 * instrumented kernel writes (as prog.c's `checked_kernel`).
 * usage: readable_prog device | host | triton (device, with a library named libtriton.so
 * loaded first, as Triton's is) */
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

int cudaMalloc(void **, size_t);
int cudaMemcpyToDevice(void *, const void *, size_t);
int cuModuleLoadData(void **, const void *);
int cuModuleGetFunction(void **, void *, const char *);
int cuModuleGetGlobal_v2(uint64_t *, size_t *, void *, const char *);
int cuLaunchKernel(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *, void **, void **);
int cuCtxSynchronize(void);
int cuMemFree_v2(uint64_t);

/* Kernel `zeta` stores at line 21 of checked.cu (PTX line 11). */
static const char *checked_ptx =
    ".version 9.0\n.target sm_90\n.address_size 64\n.file 1 \"checked.cu\"\n"
    ".visible .entry zeta(.param .u64 p)\n{\n\t.reg .b64 %rd<3>;\n\tld.param.u64 %rd1, [p];\n"
    "\tcvta.to.global.u64 %rd2, %rd1;\n\t.loc 1 21 5\n\tst.global.u32 [%rd2], 0;\n\tret;\n}\n";

static uint64_t global_value(void *m, const char *name) {
    uint64_t addr = 0;
    size_t size = 0;
    if (cuModuleGetGlobal_v2(&addr, &size, m, name)) return 0;
    return size == 4 ? *(uint32_t *)(uintptr_t)addr : *(uint64_t *)(uintptr_t)addr;
}

/* The record `zeta` (function 0) writes for a 4-byte store at `addr`, PTX line 11, block 2,
 * thread 5. */
static int play_record(void *m, uint64_t addr) {
    unsigned char *errors = (unsigned char *)(uintptr_t)global_value(m, "__gpusan_errors");
    uint32_t module = (uint32_t)global_value(m, "__gpusan_module");
    if (!errors || module == 0) return 16;
    uint32_t *count = (uint32_t *)errors, i = (*count)++;
    unsigned char *r = errors + 16 + 64 * i;
    uint32_t f[12] = {module << 16, 1, 4, 11, 2, 0, 0, 5, 0, 0, 0, 1};
    memcpy(r, &addr, 8);
    memset(r + 8, 0, 8);
    memcpy(r + 16, f, sizeof f);
    return 0;
}

static uint64_t make_buffer(void) {
    void *p = 0;
    cudaMalloc(&p, 1024);
    return (uint64_t)(uintptr_t)p;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    uint64_t a = make_buffer();
    int rc = a ? 0 : 3;
    if (!strcmp(argv[1], "triton") && !dlopen("libtriton.so", RTLD_NOW)) return 4;
    if (!strcmp(argv[1], "device") || !strcmp(argv[1], "triton")) {
        void *m = 0;
        rc |= cuModuleLoadData(&m, checked_ptx);
        void *f = 0;
        rc |= cuModuleGetFunction(&f, m, "zeta");
        rc |= cuLaunchKernel(f, 4, 1, 1, 32, 1, 1, 0, 0, 0, 0);
        rc |= play_record(m, a + 1024 + 4);
        rc |= cuCtxSynchronize();
    } else if (!strcmp(argv[1], "host")) {
        char host[2048] = {0};
        rc |= cudaMemcpyToDevice((void *)(uintptr_t)a, host, 1028);
    }
    rc |= cuMemFree_v2(a);
    return rc;
}
