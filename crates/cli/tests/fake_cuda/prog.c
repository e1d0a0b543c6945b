/* Exercises gpusan's doors and checks against the fake driver.
 * usage: prog DOOR SCENARIO, DOOR = link | dlsym | getproc. Exit code 0 unless the
 * driver returned an error the scenario did not expect. */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int (*alloc_t)(uint64_t *, size_t);
typedef int (*free_t)(uint64_t);
typedef int (*htod_t)(uint64_t, const void *, size_t);
typedef int (*dtoh_t)(void *, uint64_t, size_t);
typedef int (*memset_t)(uint64_t, unsigned char, size_t);
typedef int (*getproc_t)(const char *, void **, int, uint64_t, int *);

int cuMemAlloc_v2(uint64_t *, size_t);
int cuMemFree_v2(uint64_t);
int cuMemcpyHtoD_v2(uint64_t, const void *, size_t);
int cuMemcpyDtoH_v2(void *, uint64_t, size_t);
int cuMemsetD8_v2(uint64_t, unsigned char, size_t);
int cuModuleLoadData(void **, const void *);
int cuModuleGetGlobal_v2(uint64_t *, size_t *, void *, const char *);
int cuLaunchKernel(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *, void **, void **);
int cuCtxSynchronize(void);
int cuLibraryLoadData(void **, const void *, int *, void **, unsigned, int *, void **, unsigned);
int cuLibraryGetGlobal(uint64_t *, size_t *, void *, const char *);
int cuMemcpyPeer(uint64_t, void *, uint64_t, void *, size_t);
typedef struct { unsigned char reserved[64]; } CUipcMemHandle;
int cuIpcGetMemHandle(CUipcMemHandle *, uint64_t);
int cuIpcOpenMemHandle_v2(uint64_t *, CUipcMemHandle, unsigned);
int cuIpcCloseMemHandle(uint64_t);
int fake_ipc_closes(void);
typedef struct { int type; int id; } CUmemLocation;
int cuMemAllocManaged(uint64_t *, size_t, unsigned);
int cuMemPrefetchAsync_v2(uint64_t, size_t, CUmemLocation, unsigned, void *);
int cuMemAdvise_v2(uint64_t, size_t, int, CUmemLocation);

/* A module taking part in gpusan's device ABI; functions sorted by name: abi_probe, zeta. */
static const char *abi_ptx =
    ".version 9.0\n.target sm_90\n.address_size 64\n.file 1 \"abi.cu\"\n"
    ".visible .global .align 8 .u64 __gpusan_table;\n.visible .global .align 8 .u64 __gpusan_errors;\n"
    ".visible .global .align 4 .u32 __gpusan_module;\n"
    ".visible .entry zeta()\n{\n\tret;\n}\n.visible .entry abi_probe()\n{\n\t.loc 1 7 3\n\tret;\n}\n";

static uint64_t global_value(void *m, const char *name) {
    uint64_t addr = 0; size_t size = 0;
    if (cuModuleGetGlobal_v2(&addr, &size, m, name)) return 0;
    return size == 4 ? *(uint32_t *)(uintptr_t)addr : *(uint64_t *)(uintptr_t)addr;
}

static uint64_t lib_value(void *lib, const char *name) {
    uint64_t addr = 0; size_t size = 0;
    if (cuLibraryGetGlobal(&addr, &size, lib, name)) return 0;
    return size == 4 ? *(uint32_t *)(uintptr_t)addr : *(uint64_t *)(uintptr_t)addr;
}

/* A module check mode instruments (it declares no ABI variables); functions numbered by
 * name: alpha 0, zeta 1. */
static const char *checked_ptx =
    ".version 9.0\n.target sm_90\n.address_size 64\n.file 1 \"checked.cu\"\n"
    ".visible .entry zeta(.param .u64 p)\n{\n\t.reg .b64 %rd<3>;\n\tld.param.u64 %rd1, [p];\n"
    "\tcvta.to.global.u64 %rd2, %rd1;\n\t.loc 1 21 5\n\tst.global.u32 [%rd2], 0;\n\tret;\n}\n"
    ".visible .entry alpha(.param .u64 p)\n{\n\t.reg .b64 %rd<3>;\n\tld.param.u64 %rd1, [p];\n"
    "\tcvta.to.global.u64 %rd2, %rd1;\n\t.loc 1 9 5\n\tst.global.u32 [%rd2], 1;\n\tret;\n}\n";

/* Writes the error record an instrumented kernel of module `m` would: a 4-byte write at
 * `addr` by function `function`, at PTX line `ptx_line`, block 2, thread 5. */
static int write_record(uint64_t errors_at, uint32_t module, uint64_t addr, uint32_t function, uint32_t ptx_line) {
    unsigned char *errors = (unsigned char *)(uintptr_t)errors_at;
    if (!errors || module == 0) return 16;
    uint32_t *count = (uint32_t *)errors, i = (*count)++;
    unsigned char *r = errors + 16 + 64 * i;
    uint32_t f[12] = {module << 16 | function, 1, 4, ptx_line, 2, 0, 0, 5, 0, 0, 0, 1};
    memcpy(r, &addr, 8);
    memset(r + 8, 0, 8);
    memcpy(r + 16, f, sizeof f);
    return 0;
}
static int play_record(void *m, uint64_t addr, uint32_t function, uint32_t ptx_line) {
    return write_record(global_value(m, "__gpusan_errors"), (uint32_t)global_value(m, "__gpusan_module"), addr, function,
                        ptx_line);
}

static const char *ptx =
    ".version 9.0\n.target sm_90\n.address_size 64\n"
    ".visible .entry k(.param .u64 p)\n{\n\t.reg .b64 %rd<3>;\n\t.reg .b32 %r<2>;\n"
    "\tld.param.u64 %rd1, [p];\n\tcvta.to.global.u64 %rd2, %rd1;\n"
    "\tld.global.u32 %r1, [%rd2];\n\tst.global.u32 [%rd2+4], %r1;\n\tret;\n}\n";

/* Declares the module variable `table` (64 bytes), as the fake driver has it. */
static const char *vars_ptx =
    ".version 9.0\n.target sm_90\n.address_size 64\n"
    ".visible .global .align 4 .b8 table[64];\n"
    ".visible .entry k()\n{\n\tret;\n}\n";
uint64_t fake_variable_address(void);
int cuInit(unsigned);
void fake_set_context(uintptr_t);
int fake_wrong_context_frees(void);
int fake_alloc_calls(void);
void fake_stall_copies_in(uintptr_t);
void fake_release_stall(void);
int fake_stalled(void);
int fake_dead_frees(void);
int cuCtxDestroy_v2(void *);
void fake_set_capturing(int);
int cuMemAllocAsync(uint64_t *, size_t, void *);
int cuMemFreeAsync(uint64_t, void *);
struct mem_alloc_node_params { unsigned char pool_props[88]; void *access; size_t access_count; size_t bytesize; uint64_t dptr; };
int cuGraphAddMemAllocNode(void **, void *, const void **, size_t, struct mem_alloc_node_params *);
int cuGraphAddMemFreeNode(void **, void *, const void **, size_t, uint64_t);
int cuGraphDestroy(void *);
int cuGraphCreate(void **, unsigned);
int cuDeviceGraphMemTrim(int);
int cuStreamCreate(void **, unsigned);
int cuStreamDestroy_v2(void *);
int cuStreamBeginCapture_v2(void *, int);
int cuStreamEndCapture(void *, void **);
int cuStreamSynchronize(void *);
int cuGraphInstantiateWithFlags(void **, void *, unsigned long long);
int cuGraphLaunch(void *, void *);
int cuGraphExecDestroy(void *);
const unsigned char *fake_graph_table(uint64_t *);
int fake_capture_invalidations(void);
int fake_table_pointings(void);
uint64_t fake_alloc_live_bytes(void);
uint64_t fake_vmm_physical_bytes(void);
const char *fake_capture_conflict(void);

/* Whether the table at `t` (`len` entries of 32 bytes: base, size, id, flags, device) has
 * `base` as a live allocation. */
static int table_has_live(const unsigned char *t, uint64_t len, uint64_t base) {
    for (uint64_t i = 0; t && i < len; i++) {
        uint64_t b;
        uint32_t flags;
        memcpy(&b, t + 32 + 32 * i, 8);
        memcpy(&flags, t + 32 + 32 * i + 24, 4);
        if (b == base && (flags & 0xff) == 1) return 1;
    }
    return 0;
}

/* The host shadow of the module variable `table` (cudart names variables by these). */
float table[16];

/* cudart refusing a call itself (see fake_cuda/libsanitizer.c), by runtime callback id. */
static int runtime_call(uint32_t cbid, const void *params, int result) {
    int (*call)(uint32_t, const void *, int) = (int (*)(uint32_t, const void *, int))dlsym(RTLD_DEFAULT, "fake_runtime_call");
    return call ? call(cbid, params, result) : result;
}

/* A second thread working in a second context: loads the ABI module there and launches. */
static void *abi_module_b;
static void *second_context(void *arg) {
    (void)arg;
    fake_set_context(0x2000);
    if (cuModuleLoadData(&abi_module_b, abi_ptx) || cuLaunchKernel(0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0)) return (void *)1;
    return 0;
}

static alloc_t alloc_; static free_t free_; static htod_t htod; static dtoh_t dtoh; static memset_t set;

static void *get(void *h, getproc_t gp, const char *plain, const char *versioned) {
    void *f = 0;
    if (gp) gp(plain, &f, 13000, 0, 0);
    else f = dlsym(h, versioned);
    return f;
}

/* Eight threads allocating, copying and freeing at once; thread 0 also frees twice. */
/* Context 0x2000: loads the ABI module, allocates (so its next launch uploads the table)
 * and launches with copies in its context stalled: the upload waits inside the driver. */
static void *upload_in_second_context(void *arg) {
    (void)arg;
    fake_set_context(0x2000);
    void *m = 0;
    uint64_t p = 0;
    int rc = cuModuleLoadData(&m, abi_ptx);
    rc |= alloc_(&p, 64);
    fake_stall_copies_in(0x2000);
    rc |= cuLaunchKernel(0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0);
    return (void *)(intptr_t)rc;
}

static void *worker(void *arg) {
    long id = (long)arg;
    char buf[256] = {0};
    for (int i = 0; i < 200; i++) {
        uint64_t p = 0;
        if (alloc_(&p, 256)) return (void *)1;
        htod(p, buf, 256);
        dtoh(buf, p, 256);
        free_(p);
        if (id == 0 && i == 100) free_(p);
    }
    return 0;
}

/* ---- a driver-API program shipping its kernel as a fatbin file ------------------------ */
int cuModuleLoadDataEx(void **, const void *, unsigned, int *, void **);
int cuModuleLoadFatBinary(void **, const void *);
int cuLibraryLoadData(void **, const void *, int *, void **, unsigned, int *, void **, unsigned);
int cuModuleGetFunction(void **, void *, const char *);
int cuLibraryGetKernel(void **, void *, const char *);
int cuKernelGetFunction(void **, void *);
int cuDevicePrimaryCtxRetain(void **, int);
int cuDevicePrimaryCtxRelease_v2(int);
int cuDevicePrimaryCtxReset_v2(int);

/* The bytes of file `path`, placed flush against an unreadable page: a reader that goes
 * past their end faults, as it may in a real program. */
static const void *file_at_page_end(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    rewind(f);
    long page = sysconf(_SC_PAGESIZE), span = (size + page - 1) / page * page;
    unsigned char *m = mmap(0, span + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED || mprotect(m + span, page, PROT_NONE)) return 0;
    unsigned char *image = m + span - size;
    size_t got = fread(image, 1, size, f);
    fclose(f);
    return got == (size_t)size ? image : 0;
}

/* Retains the primary context, loads the fatbin at `path` through `entry` (data, dataex,
 * fatbinary, library), finds `vadd`, launches it on memory of its own, synchronizes, frees
 * that memory and ends the context by `teardown`: "release" gives its reference back,
 * which destroys it with whatever the driver gave for it, "reset" resets it, "again"
 * releases it and does it all once more in a new primary context (which, as the driver
 * may, gets the same handle). */
static int fatbin_program(const char *path, const char *entry, const char *teardown) {
    void *ctx = 0, *m = 0, *lib = 0, *k = 0, *fn = 0;
    const void *image = file_at_page_end(path);
    if (!image) return 32;
    int rc = cuDevicePrimaryCtxRetain(&ctx, 0);
    if (!strcmp(entry, "data")) rc |= cuModuleLoadData(&m, image);
    else if (!strcmp(entry, "dataex")) rc |= cuModuleLoadDataEx(&m, image, 0, 0, 0);
    else if (!strcmp(entry, "fatbinary")) rc |= cuModuleLoadFatBinary(&m, image);
    else if (!strcmp(entry, "library")) rc |= cuLibraryLoadData(&lib, image, 0, 0, 0, 0, 0, 0);
    else return 64;
    if (rc) return rc;
    if (lib) rc |= cuLibraryGetKernel(&k, lib, "vadd") | cuKernelGetFunction(&fn, k);
    else rc |= cuModuleGetFunction(&fn, m, "vadd");
    uint64_t x = 0;
    int n = 256;
    if (alloc_(&x, n * sizeof(float))) return 3;
    void *args[] = {&x, &x, &x, &n};
    rc |= cuLaunchKernel(fn, 1, 1, 1, 256, 1, 1, 0, 0, args, 0);
    rc |= cuCtxSynchronize();
    rc |= free_(x);
    if (!strcmp(teardown, "reset")) return rc | cuDevicePrimaryCtxReset_v2(0);
    rc |= cuDevicePrimaryCtxRelease_v2(0);
    return !strcmp(teardown, "again") ? rc | fatbin_program(path, entry, "release") : rc;
}

/* The parent's threads in `fork_busy`: allocating, setting, copying and freeing until told
 * to stop, so that forks catch them inside gpusan's bookkeeping. */
static volatile int stop_busy;
static void *busy(void *arg) {
    (void)arg;
    static char buf[131072];
    while (!stop_busy) {
        uint64_t p = 0;
        if (alloc_(&p, sizeof buf)) continue;
        set(p, 1, sizeof buf);
        htod(p, buf, 256);
        free_(p);
    }
    return 0;
}

/* A parent that never touches CUDA (PyTorch's `multiprocessing` pattern: torch imported,
 * the GPU left to the workers) forks children that each initialise CUDA and work: child i
 * overflows a set (i % 3 == 0), frees twice (i % 3 == 1) or is clean; even children leave
 * by _exit (as multiprocessing's workers do, skipping exit handlers), odd ones by exit. */
static int fork_unused_parent(void) {
    enum { CHILDREN = 6 };
    pid_t kids[CHILDREN];
    for (int i = 0; i < CHILDREN; i++) {
        kids[i] = fork();
        if (kids[i] != 0) continue;
        alarm(20);
        char host[1024] = {0};
        uint64_t p = 0;
        int r = cuInit(0) | alloc_(&p, 1024);
        if (i % 3 == 0) set(p, 0, 1025);
        else r |= htod(p, host, 1024) | set(p, 1, 1024);
        r |= free_(p);
        if (i % 3 == 1 && free_(p) != 1) r |= 1; /* refused, by gpusan as by the driver */
        if (i % 2) exit(r);
        _exit(r);
    }
    int rc = 0;
    for (int i = 0; i < CHILDREN; i++) {
        int st = 0;
        rc |= waitpid(kids[i], &st, 0) != kids[i] || !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    }
    printf("fork_unused_parent rc=%d\n", rc);
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    const char *door = argv[1], *s = argv[2];
    if (strcmp(door, "link") == 0) {
        alloc_ = cuMemAlloc_v2; free_ = cuMemFree_v2; htod = cuMemcpyHtoD_v2; dtoh = cuMemcpyDtoH_v2; set = cuMemsetD8_v2;
    } else {
        /* "next" and "default": the program's own lookups in the global scope, which
         * under gpusan find gpusan's exports first. */
        void *h = !strcmp(door, "next") ? RTLD_NEXT
                : !strcmp(door, "default") ? RTLD_DEFAULT
                : dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!h && strcmp(door, "default")) { fprintf(stderr, "%s\n", dlerror()); return 2; }
        getproc_t gp = strcmp(door, "getproc") == 0 ? (getproc_t)dlsym(h, "cuGetProcAddress_v2") : 0;
        alloc_ = (alloc_t)get(h, gp, "cuMemAlloc", "cuMemAlloc_v2");
        free_ = (free_t)get(h, gp, "cuMemFree", "cuMemFree_v2");
        htod = (htod_t)get(h, gp, "cuMemcpyHtoD", "cuMemcpyHtoD_v2");
        dtoh = (dtoh_t)get(h, gp, "cuMemcpyDtoH", "cuMemcpyDtoH_v2");
        set = (memset_t)get(h, gp, "cuMemsetD8", "cuMemsetD8_v2");
    }
    if (!strcmp(s, "fork_unused_parent")) return fork_unused_parent(); /* allocates nothing first */
    char host[4096] = {0};
    uint64_t a = 0, b = 0;
    if (alloc_(&a, 1024) || alloc_(&b, 1024)) return 3;
    int rc = 0;
    if (!strcmp(s, "clean")) {
        rc |= htod(a, host, 1024) | dtoh(host, a, 1024) | set(b, 0, 1024);
        rc |= free_(a) | free_(b);
    } else if (!strcmp(s, "alloc_calls")) {
        /* How often the two allocations above reached the driver: twice, whatever gpusan did. */
        printf("allocs=%d\n", fake_alloc_calls());
        rc |= htod(a, host, 1024) | free_(a) | free_(b);
    } else if (!strcmp(s, "memcpy_overflow")) {
        /* Runs 4 bytes past a's end (harmless here: the fake's blocks are padded). */
        htod(a, host, 1028);
        rc |= free_(a) | free_(b);
    } else if (!strcmp(s, "overflow_then_sleep")) {
        /* An error early in a long job: the finding must be shown before the job's later
         * output, not only at exit. */
        htod(a, host, 1028);
        usleep(1500 * 1000);
        fprintf(stderr, "program: later output\n");
        rc |= free_(a) | free_(b);
    } else if (!strcmp(s, "memset_overflow")) {
        set(b, 0, 1025);
        rc |= free_(a) | free_(b);
    } else if (!strcmp(s, "double_free")) {
        rc |= free_(a);
        if (free_(a) != 1) rc |= 1; /* the driver refuses a second free; so must gpusan */
        rc |= free_(b);
    } else if (!strcmp(s, "interior_free")) {
        if (free_(a + 16) == 0) rc |= 1;
        rc |= free_(a) | free_(b);
    } else if (!strcmp(s, "uaf_copy")) {
        rc |= free_(a);
        dtoh(host, a, 64); /* quarantined: still mapped, so this does not crash */
        rc |= free_(b);
    } else if (!strcmp(s, "crash_after_double_free")) {
        free_(a);
        free_(a);
        raise(SIGSEGV); /* no atexit: only findings already written survive */
    } else if (!strcmp(s, "symbol_clean") || !strcmp(s, "symbol_overflow")) {
        uint64_t sym = 0;
        size_t size = 0;
        rc |= cuModuleGetGlobal_v2(&sym, &size, (void *)0x4000, "table");
        htod(sym, host, strcmp(s, "symbol_clean") == 0 ? size : size + 4);
        rc |= free_(a) | free_(b);
    } else if (!strcmp(s, "variable_clean") || !strcmp(s, "variable_overflow")) {
        /* The variable's address comes from outside gpusan's view: it must learn the bounds
         * from the module's declarations. */
        void *m = 0;
        rc |= cuModuleLoadData(&m, vars_ptx);
        htod(fake_variable_address(), host, strcmp(s, "variable_clean") == 0 ? 64 : 68);
        dtoh(host, fake_variable_address() + 16, 48);
        rc |= free_(a) | free_(b);
    } else if (!strcmp(s, "runtime_refused") || !strcmp(s, "runtime_refused_clean")) {
        /* Calls cudart refuses before the driver sees them. In the clean variant, the
         * refusals have other reasons (nothing gpusan may report): a pitch above the
         * device's limit, a symbol copy within the variable, an unknown host address. */
        int bug = !strcmp(s, "runtime_refused");
        void *m = 0;
        rc |= cuInit(0) | cuModuleLoadData(&m, vars_ptx);
        struct { uint64_t dst; size_t dpitch; uint64_t src; size_t spitch, width, height; int kind; } c2 =
            {a, 128, (uint64_t)(uintptr_t)host, 256, bug ? 256 : 64, 4, 1};
        if (bug) c2.dpitch = 128; else c2.dpitch = (size_t)1 << 40;
        if (runtime_call(32, &c2, 12) != 12) rc |= 32; /* cudaMemcpy2D: cudaErrorInvalidPitchValue */
        struct { const void *symbol; const void *src; size_t count, offset; int kind; } ts =
            {table, host, bug ? 68 : 64, 0, 1};
        if (runtime_call(39, &ts, 1) != 1) rc |= 64; /* cudaMemcpyToSymbol: cudaErrorInvalidValue */
        struct { void *dst; const void *symbol; size_t count, offset; int kind; } fs = {host, host, 4096, 0, 2};
        if (runtime_call(40, &fs, 13) != 13) rc |= 64; /* not a variable's shadow: nothing known */
        rc |= free_(a) | free_(b);
    } else if (!strcmp(s, "graph_nodes") || !strcmp(s, "graph_nodes_overflow")) {
        /* A graph with an allocation node and a free node, "launched" 10 times: each launch
         * copies into the graph's allocation (the overflow variant 4 bytes past its end). */
        void *g = (void *)0x7000, *alloc_node = 0, *free_node = 0;
        struct mem_alloc_node_params p = {{0}, 0, 0, 1024, 0};
        rc |= cuGraphAddMemAllocNode(&alloc_node, g, 0, 0, &p);
        rc |= cuGraphAddMemFreeNode(&free_node, g, (const void **)&alloc_node, 1, p.dptr);
        for (int i = 0; i < 10; i++) {
            htod(p.dptr, host, strcmp(s, "graph_nodes") == 0 ? 1024 : 1028);
            dtoh(host, p.dptr, 1024);
        }
        rc |= cuGraphDestroy(g);
        rc |= free_(a) | free_(b);
    } else if (!strcmp(s, "launch_while_another_context_uploads")) {
        /* While context 0x2000's table upload is stalled inside the driver (another
         * thread), a launch in context 0x1000 must go ahead: SIGALRM ends the program if it
         * waits for the other context's copy. */
        void *m = 0;
        uint64_t q = 0;
        pthread_t t;
        void *r = 0;
        rc |= cuModuleLoadData(&m, abi_ptx) | cuLaunchKernel(0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0);
        pthread_create(&t, 0, upload_in_second_context, 0);
        for (int i = 0; i < 5000 && !fake_stalled(); i++) usleep(1000);
        if (!fake_stalled()) rc |= 64; /* the other context never uploaded */
        rc |= alloc_(&q, 64);
        alarm(10);
        rc |= cuLaunchKernel(0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0);
        alarm(0);
        fake_release_stall();
        pthread_join(t, &r);
        rc |= r != 0;
        rc |= free_(q) | free_(a) | free_(b);
    } else if (!strcmp(s, "quarantine_contexts")) {
        /* Run with --quarantine-bytes 1500: freed memory of context 0x1000 is given back to
         * the driver while context 0x2000 is current (and the other way round); memory
         * freed in context 0x3000 is gone with that context when it is destroyed, and must
         * never be freed again. The fake driver counts frees from the wrong context and of
         * dead memory. */
        uint64_t x = 0, y = 0, z = 0, w = 0;
        rc |= alloc_(&x, 1024);
        rc |= free_(x);                       /* quarantined: 1024 bytes held */
        fake_set_context(0x2000);
        rc |= alloc_(&y, 1024);
        rc |= free_(y);                       /* 2048 held: x is given back, from 0x2000 */
        fake_set_context(0x3000);
        rc |= alloc_(&z, 1024);
        rc |= free_(z);                       /* y is given back, from 0x3000 */
        rc |= cuCtxDestroy_v2((void *)0x3000); /* z goes with its context */
        fake_set_context(0x1000);
        rc |= alloc_(&w, 1024);
        rc |= free_(w);                       /* over budget: z must not be freed again */
        if (fake_wrong_context_frees()) rc |= 64;
        if (fake_dead_frees()) rc |= 128;
        rc |= free_(a) | free_(b);
    } else if (!strcmp(s, "graph_free_outside") || !strcmp(s, "graph_free_outside_twice")) {
        /* A graph with an allocation node and no free node, instantiated and launched 3
         * times; after each launch the program uses the memory and frees it outside the
         * graph (cuMemFree, then cuMemFreeAsync), trimming graph memory after the second.
         * The bug variant frees it once more after the last launch's free. */
        void *g = 0, *exec = 0, *alloc_node = 0;
        struct mem_alloc_node_params p = {{0}, 0, 0, 1024, 0};
        rc |= cuGraphCreate(&g, 0);
        rc |= cuGraphAddMemAllocNode(&alloc_node, g, 0, 0, &p);
        rc |= cuGraphInstantiateWithFlags(&exec, g, 0);
        for (int i = 0; i < 3; i++) {
            rc |= cuGraphLaunch(exec, 0);
            htod(p.dptr, host, 1024);
            dtoh(host, p.dptr, 1024);
            rc |= i == 1 ? cuMemFreeAsync(p.dptr, 0) : free_(p.dptr);
            if (i == 1) rc |= cuDeviceGraphMemTrim(0);
        }
        if (!strcmp(s, "graph_free_outside_twice") && free_(p.dptr) == 0) rc |= 128;
        rc |= cuGraphExecDestroy(exec) | cuGraphDestroy(g);
        rc |= free_(a) | free_(b);
    } else if (!strcmp(s, "graph_capture") || !strcmp(s, "graph_capture_overflow")) {
        /* cudaMallocAsync, a copy and cudaFreeAsync captured into a graph, which is then
         * "launched" 10 times: the freed-at-capture memory is the graph's again each time. */
        uint64_t p = 0;
        fake_set_capturing(1);
        rc |= cuMemAllocAsync(&p, 256, 0);
        htod(p, host, strcmp(s, "graph_capture") == 0 ? 256 : 260);
        rc |= cuMemFreeAsync(p, 0);
        fake_set_capturing(0);
        for (int i = 0; i < 10; i++) htod(p, host, 256);
        rc |= cuGraphDestroy((void *)0x7000);
        rc |= free_(a) | free_(b);
    } else if (!strcmp(s, "capture_first_launch") || !strcmp(s, "capture_first_launch_overflow")) {
        /* What cudart does for a graph captured in global mode from a blocking stream: the
         * first launch of a kernel loads its module (lazy loading), inside the capture. The
         * capture must stay valid; each launch of the graph must find the table up to date
         * (the allocation made just before it included). */
        void *st = 0, *m = 0, *g = 0, *exec = 0;
        rc |= cuStreamCreate(&st, 0);
        rc |= cuStreamBeginCapture_v2(st, 0 /* CU_STREAM_CAPTURE_MODE_GLOBAL */);
        rc |= cuModuleLoadData(&m, ptx);
        rc |= cuLaunchKernel(0, 4, 1, 1, 32, 1, 1, 0, st, 0, 0);
        int end = cuStreamEndCapture(st, &g);
        if (end) { fprintf(stderr, "cuStreamEndCapture -> %d; invalidated by %s\n", end, fake_capture_conflict()); rc |= 32; }
        rc |= fake_capture_invalidations() ? 64 : 0;
        if (!g) return rc | 128;
        rc |= cuGraphInstantiateWithFlags(&exec, g, 0);
        for (int r = 0; r < 3; r++) {
            uint64_t other = 0, len = 0;
            rc |= alloc_(&other, 4096 * (r + 1));
            rc |= cuGraphLaunch(exec, st);
            rc |= cuStreamSynchronize(st);
            const unsigned char *t = fake_graph_table(&len);
            if (!table_has_live(t, len, a) || !table_has_live(t, len, other)) {
                fprintf(stderr, "launch %d: table %p (%llu entries) misses a or the new allocation\n", r, (void *)t,
                        (unsigned long long)len);
                rc |= 256;
            }
            rc |= free_(other);
        }
        unsigned char *errors = (unsigned char *)(uintptr_t)global_value(m, "__gpusan_errors");
        uint32_t module = (uint32_t)global_value(m, "__gpusan_module");
        if (!errors || !module) rc |= 512; /* the module got its error buffer during the capture */
        else if (!strcmp(s, "capture_first_launch_overflow")) {
            /* The graph's kernel `k` (function 0) wrote 4 bytes past `a`; found at the sync. */
            rc |= cuGraphLaunch(exec, st);
            uint32_t *count = (uint32_t *)errors, i = (*count)++;
            unsigned char *r = errors + 16 + 64 * i;
            uint64_t addr = a + 1024;
            uint32_t f[12] = {module << 16 | 0, 1, 4, 9, 0, 0, 0, 3, 0, 0, 0, 1};
            memcpy(r, &addr, 8);
            memset(r + 8, 0, 8);
            memcpy(r + 16, f, sizeof f);
            rc |= cuStreamSynchronize(st);
        }
        rc |= cuGraphExecDestroy(exec) | cuStreamDestroy_v2(st);
        rc |= free_(a) | free_(b);
    } else if (!strcmp(s, "threads")) {
        pthread_t t[8];
        for (long i = 0; i < 8; i++) pthread_create(&t[i], 0, worker, (void *)i);
        for (int i = 0; i < 8; i++) { void *r; pthread_join(t[i], &r); rc |= r != 0; }
        rc |= free_(a) | free_(b);
    } else if (!strcmp(s, "fork")) {
        /* The child frees (in its own copy of the memory) and exits; the parent's report
         * must not change, nothing may hang. */
        pid_t pid = fork();
        if (pid == 0) { free_(a); free_(a); _exit(0); }
        int st = 0;
        waitpid(pid, &st, 0);
        rc |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
        rc |= free_(a) | free_(b);
    } else if (!strcmp(s, "fork_after_init")) {
        /* The parent initialises CUDA and frees `a` twice; its child (which cannot use
         * CUDA: the real driver fails its calls) sets one byte past `b` and exits through
         * its exit handlers. */
        rc |= cuInit(0) | free_(a);
        free_(a);
        pid_t pid = fork();
        if (pid == 0) { cuInit(0); set(b, 0, 1025); exit(0); }
        int st = 0;
        waitpid(pid, &st, 0);
        rc |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
        rc |= free_(b);
    } else if (!strcmp(s, "fork_busy")) {
        /* 300 children forked while 4 threads allocate and free; each child calls the
         * driver (which CUDA forbids after the parent's initialisation: the real driver
         * fails every call, the fake serves them) and exits. None may hang: a child stuck
         * on a lock held at the fork dies of its alarm. */
        enum { CHILDREN = 300, THREADS = 4 };
        pthread_t t[THREADS];
        static pid_t kids[CHILDREN];
        for (int i = 0; i < THREADS; i++) pthread_create(&t[i], 0, busy, 0);
        for (int i = 0; i < CHILDREN; i++) {
            kids[i] = fork();
            if (kids[i] == 0) {
                alarm(10);
                uint64_t c = 0;
                cuInit(0);
                if (!alloc_(&c, 512)) { set(c, 7, 512); free_(c); }
                set(a, 0, 1024);
                htod(b, host, 1024);
                dtoh(host, a, 1024);
                _exit(0);
            }
        }
        stop_busy = 1;
        for (int i = 0; i < THREADS; i++) pthread_join(t[i], 0);
        int ok = 0, hung = 0, failed = 0;
        for (int i = 0; i < CHILDREN; i++) {
            int st = 0;
            if (kids[i] < 0 || waitpid(kids[i], &st, 0) != kids[i]) failed++;
            else if (WIFEXITED(st) && WEXITSTATUS(st) == 0) ok++;
            else if (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM) hung++;
            else failed++;
        }
        printf("fork_busy: %d children ok, %d hung, %d failed\n", ok, hung, failed);
        rc |= ok != CHILDREN;
        rc |= free_(a) | free_(b);
    } else if (!strcmp(s, "abi")) {
        /* Plays the instrumented kernel: reads the table gpusan uploaded before the launch,
         * and writes one error record (a 4-byte write just past `a`'s end). */
        void *m = 0;
        rc |= cuModuleLoadData(&m, abi_ptx);
        rc |= cuLaunchKernel(0, 4, 1, 1, 32, 1, 1, 0, 0, 0, 0);
        const unsigned char *table = (const unsigned char *)(uintptr_t)global_value(m, "__gpusan_table");
        uint64_t len = 0;
        if (!table || memcmp(table, "GSAT", 4) != 0) rc |= 4;
        else memcpy(&len, table + 8, 8);
        if (len != 2) rc |= 8; /* a and b */
        unsigned char *errors = (unsigned char *)(uintptr_t)global_value(m, "__gpusan_errors");
        uint32_t module = (uint32_t)global_value(m, "__gpusan_module");
        if (!errors || module == 0) rc |= 16;
        else {
            uint32_t *count = (uint32_t *)errors, i = (*count)++;
            unsigned char *r = errors + 16 + 64 * i;
            uint64_t addr = a + 1024 + 4;
            uint32_t f[12] = {module << 16 | 0, 1, 4, 15, 2, 0, 0, 5, 0, 0, 0, 1}; /* PTX line 15: the ret after `.loc 1 7 3` */
            memcpy(r, &addr, 8);
            memset(r + 8, 0, 8);
            memcpy(r + 16, f, sizeof f);
        }
        rc |= cuCtxSynchronize();
        rc |= free_(a) | free_(b);
    } else if (!strcmp(s, "checked_kernel")) {
        /* Plays kernel `zeta` of the instrumented module: its store at PTX line 11 (after
         * `.loc 1 21 5`) 4 bytes past `a`'s end. */
        void *m = 0;
        rc |= cuModuleLoadData(&m, checked_ptx);
        rc |= cuLaunchKernel(0, 4, 1, 1, 32, 1, 1, 0, 0, 0, 0);
        rc |= play_record(m, a + 1024 + 4, 1, 11);
        rc |= cuCtxSynchronize();
        rc |= free_(a) | free_(b);
    } else if (!strcmp(s, "checked_flood")) {
        /* Every thread of `zeta` errs: records until the buffer is full, where instrumented
         * code stops counting (records.rs: claim_text). */
        void *m = 0;
        rc |= cuModuleLoadData(&m, checked_ptx);
        rc |= cuLaunchKernel(0, 4, 1, 1, 32, 1, 1, 0, 0, 0, 0);
        uint32_t *header = (uint32_t *)(uintptr_t)global_value(m, "__gpusan_errors");
        while (!rc && header && header[0] < header[1]) rc |= play_record(m, a + 1024 + 4, 1, 11);
        rc |= cuCtxSynchronize();
        rc |= free_(a) | free_(b);
    } else if (!strcmp(s, "abi_two_contexts")) {
        /* The ABI module loaded in two contexts (the second from another thread): each
         * context must get its own table and error buffer; a record written in the second
         * context's buffer must be drained. */
        void *m = 0;
        pthread_t t;
        void *r = 0;
        rc |= cuModuleLoadData(&m, abi_ptx) | cuLaunchKernel(0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0);
        pthread_create(&t, 0, second_context, 0);
        pthread_join(t, &r);
        rc |= r != 0;
        uint64_t ta = global_value(m, "__gpusan_table"), ea = global_value(m, "__gpusan_errors");
        fake_set_context(0x2000);
        uint64_t tb = global_value(abi_module_b, "__gpusan_table"), eb = global_value(abi_module_b, "__gpusan_errors");
        uint32_t module = (uint32_t)global_value(abi_module_b, "__gpusan_module");
        fake_set_context(0x1000);
        if (!ta || !tb || ta == tb || ea == eb) rc |= 4; /* one table and buffer per context */
        if (memcmp((void *)(uintptr_t)tb, "GSAT", 4) != 0) rc |= 8;
        if (module < 2) rc |= 16;
        else rc |= write_record(eb, module, a + 1024 + 4, 0, 15);
        rc |= cuCtxSynchronize();
        rc |= free_(a) | free_(b);
    } else if (!strcmp(s, "abi_library_two_contexts")) {
        /* A library declaring the ABI (how cudart loads a program's kernels) loaded in context
         * 0x1000 and launched in 0x2000 too (another device): its variables in 0x2000 must
         * point at 0x2000's own table and error buffer, and a record written there be
         * drained. */
        void *lib = 0;
        rc |= cuLibraryLoadData(&lib, abi_ptx, 0, 0, 0, 0, 0, 0) | cuLaunchKernel(0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0);
        uint64_t ta = lib_value(lib, "__gpusan_table");
        fake_set_context(0x2000);
        rc |= cuLaunchKernel(0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0);
        uint64_t tb = lib_value(lib, "__gpusan_table"), eb = lib_value(lib, "__gpusan_errors");
        uint32_t module = (uint32_t)lib_value(lib, "__gpusan_module");
        if (!ta || !tb || ta == tb) rc |= 4; /* its own table in each context */
        else if (memcmp((void *)(uintptr_t)tb, "GSAT", 4) != 0) rc |= 8;
        rc |= write_record(eb, module, a + 1024 + 4, 0, 15);
        rc |= cuCtxSynchronize();
        fake_set_context(0x1000);
        rc |= free_(a) | free_(b);
    } else if (!strcmp(s, "managed_ranges")) {
        /* Managed memory's ranges: a prefetch and an advice of the whole allocation, a
         * prefetch 4 bytes past its end, and an advice after its free. */
        uint64_t m = 0;
        CUmemLocation dev0 = {1, 0}; /* CU_MEM_LOCATION_TYPE_DEVICE, 0 */
        rc |= cuMemAllocManaged(&m, 1024, 1);
        rc |= cuMemPrefetchAsync_v2(m, 1024, dev0, 0, 0) | cuMemAdvise_v2(m, 1024, 1, dev0);
        rc |= cuMemPrefetchAsync_v2(m, 1028, dev0, 0, 0);
        rc |= free_(m);
        rc |= cuMemAdvise_v2(m, 16, 1, dev0);
        rc |= free_(a) | free_(b);
    } else if (!strcmp(s, "ipc")) {
        /* Memory opened through an IPC handle (the exporter's `a`, 1024 bytes), twice (the
         * driver counts the opens and gives the same pointer): a copy that fills it, one 4
         * bytes past its end, the first close and a copy (still open), the last close (it
         * reaches the driver at once) and a copy after it. */
        CUipcMemHandle h;
        uint64_t y = 0, y2 = 0;
        rc |= cuIpcGetMemHandle(&h, a) | cuIpcOpenMemHandle_v2(&y, h, 1) | cuIpcOpenMemHandle_v2(&y2, h, 1);
        if (y2 != y) rc |= 64;
        rc |= htod(y, host, 1024);
        rc |= htod(y, host, 1028);
        rc |= cuIpcCloseMemHandle(y) | htod(y, host, 16);
        rc |= cuIpcCloseMemHandle(y);
        if (fake_ipc_closes() != 2) rc |= 32; /* each close reached the driver */
        rc |= htod(y, host, 16);
        /* Opened and never closed: the exporter's memory, not a leak of this process. */
        uint64_t z = 0;
        rc |= cuIpcOpenMemHandle_v2(&z, h, 1);
        rc |= free_(a) | free_(b);
    } else if (!strcmp(s, "peer_copies")) {
        /* `a` on device 0 (context 0x1000), `c` on device 1 (context 0x2000, with
         * FAKE_CUDA_DEVICES=2): a clean peer copy, one reading 4 bytes past `a`, and one
         * naming device 0's context for `c`. */
        uint64_t c = 0;
        void *d0 = (void *)(uintptr_t)0x1000, *d1 = (void *)(uintptr_t)0x2000;
        fake_set_context(0x2000);
        rc |= alloc_(&c, 1024);
        fake_set_context(0x1000);
        rc |= cuMemcpyPeer(c, d1, a, d0, 1024);
        rc |= cuMemcpyPeer(c, d1, a + 4, d0, 1024);
        rc |= cuMemcpyPeer(c, d0, b, d0, 16);
        fake_set_context(0x2000);
        rc |= free_(c);
        fake_set_context(0x1000);
        rc |= free_(a) | free_(b);
    } else if (!strcmp(s, "table_growth")) {
        /* 3000 allocations of 256 bytes in batches of 100, a launch after each (the table
         * grows at launches), a second ABI module loaded halfway. After each launch the
         * table a module points at must hold every allocation. Prints what the test judges:
         * how many addresses the table had, how often modules' `__gpusan_table` was written,
         * and the memory gpusan took besides the program's own. */
        enum { N = 3000, BATCH = 100 };
        static uint64_t p[N];
        void *m = 0, *m2 = 0;
        uint64_t last = 0, len = 0, own = 2 * 1024;
        int addresses = 0;
        rc |= cuModuleLoadData(&m, abi_ptx);
        for (int i = 0; i < N && !rc; i++) {
            rc |= alloc_(&p[i], 256);
            own += 256;
            if ((i + 1) % BATCH) continue;
            if (i + 1 == N / 2) rc |= cuModuleLoadData(&m2, abi_ptx);
            rc |= cuLaunchKernel(0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0);
            const unsigned char *t = (const unsigned char *)(uintptr_t)global_value(m, "__gpusan_table");
            if ((uint64_t)(uintptr_t)t != last) addresses++;
            last = (uint64_t)(uintptr_t)t;
            len = 0;
            if (!t || memcmp(t, "GSAT", 4) != 0) { rc |= 4; break; }
            memcpy(&len, t + 8, 8);
            if (len < (uint64_t)i + 3 || !table_has_live(t, len, p[i]) || !table_has_live(t, len, p[0])) {
                fprintf(stderr, "after %d allocations: table %p has %llu entries or misses one\n", i + 1, (void *)t,
                        (unsigned long long)len);
                rc |= 8;
                break;
            }
        }
        printf("addresses=%d pointings=%d entries=%llu vmm_bytes=%llu gpusan_alloc_bytes=%llu\n", addresses,
               fake_table_pointings(), (unsigned long long)len, (unsigned long long)fake_vmm_physical_bytes(),
               (unsigned long long)(fake_alloc_live_bytes() - own));
        for (int i = 0; i < N; i++) rc |= p[i] ? free_(p[i]) : 0;
        rc |= free_(a) | free_(b);
    } else if (!strcmp(s, "load_ptx")) {
        void *m = 0;
        rc |= cuModuleLoadData(&m, ptx);
        rc |= free_(a) | free_(b);
    } else if (!strcmp(s, "counted_kernel")) {
        /* Plays a kernel of a counting build: 32 threads ran 2 naive checks each, one group
         * check and one run entry each, and one warp's group check failed (2 checks). */
        void *m = 0;
        static const uint64_t ran[4] = {64, 2, 32, 32};
        static const char *names[4] = {"__gpusan_n_access", "__gpusan_n_check", "__gpusan_n_group", "__gpusan_n_span"};
        rc |= cuModuleLoadData(&m, ptx) | cuLaunchKernel(0, 1, 1, 1, 32, 1, 1, 0, 0, 0, 0);
        for (int i = 0; i < 4; i++) {
            uint64_t addr = 0; size_t size = 0;
            if (!cuModuleGetGlobal_v2(&addr, &size, m, names[i]) && size == 8) *(uint64_t *)(uintptr_t)addr += ran[i];
        }
        rc |= cuCtxSynchronize();
        rc |= free_(a) | free_(b);
    } else if (!strcmp(s, "load_cubin")) {
        static const unsigned char cubin[64] = {0x7f, 'E', 'L', 'F', 2, 1, 1};
        void *m = 0;
        rc |= cuModuleLoadData(&m, cubin);
        rc |= free_(a) | free_(b);
    } else if (!strcmp(s, "fatbin")) {
        /* argv[3]: a fatbin file; argv[4]: the entry point that loads it (default data);
         * argv[5]: how the context ends (default release). */
        rc |= fatbin_program(argc > 3 ? argv[3] : "", argc > 4 ? argv[4] : "data", argc > 5 ? argv[5] : "release");
        rc |= free_(a) | free_(b);
    } else if (!strcmp(s, "leak")) {
        rc |= free_(a);
    } else {
        return 2;
    }
    printf("%s %s done rc=%d\n", door, s, rc);
    return rc;
}
