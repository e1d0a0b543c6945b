/* A stand-in for libcuda.so.1 so CI (no GPU) can run programs under `gpusan run`:
 * "device" memory is host memory, and each function behaves like the driver's for the
 * cases the tests use (success, or CUDA_ERROR_INVALID_VALUE for a bad free). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

typedef int CUresult;
#define MAX_ALLOCS 4096
static uintptr_t live[MAX_ALLOCS];
static int abi_declared; /* the last module loaded declares gpusan's device-ABI variables */

static int find(uintptr_t p) {
    for (int i = 0; i < MAX_ALLOCS; i++) if (live[i] == p) return i;
    return -1;
}
/* Like the driver: the library named by CUDA_INJECTION64_PATH is loaded and initialized once. */
#include <dlfcn.h>
CUresult cuInit(unsigned flags) {
    static int injected;
    const char *path = getenv("CUDA_INJECTION64_PATH");
    (void)flags;
    if (path && !injected) {
        void *h = dlopen(path, RTLD_NOW);
        int (*init)(void) = h ? (int (*)(void))dlsym(h, "InitializeInjection") : 0;
        injected = 1;
        if (init) init();
    }
    return 0;
}
/* The current context, per thread (0x1000 unless the program switches, `fake_set_context`). */
static __thread uintptr_t current_ctx = 0x1000;
void fake_set_context(uintptr_t ctx) { current_ctx = ctx; }
CUresult cuCtxGetCurrent(void **ctx) { *ctx = (void *)current_ctx; return 0; }
CUresult cuCtxGetDevice(int *dev) { *dev = 0; return 0; }
CUresult cuMemAlloc_v2(uint64_t *dptr, size_t size) {
    int i = find(0);
    void *p = aligned_alloc(256, (size + 255) / 256 * 256);
    if (i < 0 || !p) return 2;
    live[i] = (uintptr_t)p;
    *dptr = (uint64_t)(uintptr_t)p;
    return 0;
}
CUresult cuMemFree_v2(uint64_t dptr) {
    int i = find((uintptr_t)dptr);
    if (dptr == 0) return 0;
    if (i < 0) return 1;
    live[i] = 0;
    free((void *)(uintptr_t)dptr);
    return 0;
}
CUresult cuMemcpyHtoD_v2(uint64_t dst, const void *src, size_t n) { memcpy((void *)(uintptr_t)dst, src, n); return 0; }
CUresult cuMemcpyDtoH_v2(void *dst, uint64_t src, size_t n) { memcpy(dst, (void *)(uintptr_t)src, n); return 0; }
CUresult cuMemsetD8_v2(uint64_t dst, unsigned char v, size_t n) { memset((void *)(uintptr_t)dst, v, n); return 0; }

/* Records the image it is asked to load in $FAKE_CUDA_LOADED, so tests can see whether
 * gpusan substituted it. */
CUresult cuModuleLoadData(void **module, const void *image) {
    const char *path = getenv("FAKE_CUDA_LOADED");
    if (path) {
        FILE *f = fopen(path, "w");
        if (f) {
            const unsigned char *b = image;
            if (b[0] == 0x7f && b[1] == 'E') fputs("<cubin>", f);
            else fputs((const char *)image, f);
            fclose(f);
        }
    }
    const unsigned char *img = image;
    abi_declared = !(img[0] == 0x7f && img[1] == 'E') && strstr((const char *)image, "__gpusan_errors") != 0;
    *module = (void *)0x4000;
    return 0;
}

/* One 64-byte module variable, with room behind it so an overflowing copy stays harmless,
 * and gpusan's device-ABI variables, which exist only in a module that declares them. */
static unsigned char module_var[64 + 256];
/* One set per context (0x1000, 0x2000): a module exists in the context that loaded it. */
static uint64_t abi_tables[2], abi_errors_[2];
static uint32_t abi_modules[2];
#define abi_table abi_tables[current_ctx == 0x2000]
#define abi_errors abi_errors_[current_ctx == 0x2000]
#define abi_module abi_modules[current_ctx == 0x2000]
CUresult cuModuleGetGlobal_v2(uint64_t *dptr, size_t *bytes, void *module, const char *name) {
    (void)module;
    if (!strncmp(name, "__gpusan_", 9)) {
        if (!abi_declared) return 500; /* CUDA_ERROR_NOT_FOUND */
        if (!strcmp(name, "__gpusan_table")) { *dptr = (uintptr_t)&abi_table; *bytes = 8; return 0; }
        if (!strcmp(name, "__gpusan_errors")) { *dptr = (uintptr_t)&abi_errors; *bytes = 8; return 0; }
        if (!strcmp(name, "__gpusan_module")) { *dptr = (uintptr_t)&abi_module; *bytes = 4; return 0; }
        return 500;
    }
    if (strcmp(name, "table")) return 500; /* the one variable modules declare */
    *dptr = (uint64_t)(uintptr_t)module_var;
    *bytes = 64;
    return 0;
}
/* Not a driver function: where `table` is, as a program learns it without asking the driver
 * (cudart's cudaGetSymbolAddress does not pass through cuModuleGetGlobal). */
uint64_t fake_variable_address(void) { return (uint64_t)(uintptr_t)module_var; }
CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shmem, void *stream, void **params, void **extra) {
    (void)f; (void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz; (void)shmem; (void)stream; (void)params; (void)extra;
    return 0;
}
CUresult cuCtxSynchronize(void) { return 0; }

/* Stream capture and graph memory nodes: the program switches capture on and off itself
 * (`fake_set_capturing`); every capture goes into the graph 0x7000. */
static int capturing;
void fake_set_capturing(int on) { capturing = on; }
CUresult cuStreamGetCaptureInfo_v2(void *stream, int *status, uint64_t *id, void **graph, const void ***deps, size_t *n) {
    (void)stream;
    *status = capturing;
    if (id) *id = 1;
    if (graph) *graph = (void *)0x7000;
    if (deps) *deps = 0;
    if (n) *n = 0;
    return 0;
}
CUresult cuMemAllocAsync(uint64_t *dptr, size_t size, void *stream) { (void)stream; return cuMemAlloc_v2(dptr, size); }
CUresult cuMemFreeAsync(uint64_t dptr, void *stream) { (void)stream; return capturing ? 0 : cuMemFree_v2(dptr); }
struct mem_alloc_node_params { unsigned char pool_props[88]; void *access; size_t access_count; size_t bytesize; uint64_t dptr; };
CUresult cuGraphAddMemAllocNode(void **node, void *graph, const void **deps, size_t n, struct mem_alloc_node_params *p) {
    (void)graph; (void)deps; (void)n;
    void *mem = aligned_alloc(256, (p->bytesize + 255) / 256 * 256 + 256); /* padded: overflows stay harmless */
    if (!mem) return 2;
    p->dptr = (uint64_t)(uintptr_t)mem;
    *node = (void *)0x7100;
    return 0;
}
CUresult cuGraphAddMemFreeNode(void **node, void *graph, const void **deps, size_t n, uint64_t dptr) {
    (void)graph; (void)deps; (void)n; (void)dptr;
    *node = (void *)0x7200;
    return 0;
}
CUresult cuGraphDestroy(void *graph) { (void)graph; return 0; }
CUresult cuDeviceGraphMemTrim(int device) { (void)device; return 0; }

struct entry { const char *name; void *fn; };
static const struct entry table[] = {
    {"cuMemAlloc", (void *)cuMemAlloc_v2}, {"cuMemFree", (void *)cuMemFree_v2},
    {"cuMemcpyHtoD", (void *)cuMemcpyHtoD_v2}, {"cuMemcpyDtoH", (void *)cuMemcpyDtoH_v2},
    {"cuMemsetD8", (void *)cuMemsetD8_v2}, {"cuCtxGetCurrent", (void *)cuCtxGetCurrent},
};
CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, uint64_t flags, int *status) {
    (void)version; (void)flags;
    for (size_t i = 0; i < sizeof table / sizeof *table; i++)
        if (strcmp(table[i].name, symbol) == 0) { *pfn = table[i].fn; if (status) *status = 0; return 0; }
    *pfn = 0;
    if (status) *status = 1;
    return 500; /* CUDA_ERROR_NOT_FOUND */
}
