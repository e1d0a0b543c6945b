/* A stand-in for libsanitizer-public.so, with a stand-in for cudart on top: the driver
 * stand-in (libcuda.c) calls InitializeInjection at cuInit when CUDA_INJECTION64_PATH is
 * set, gpusan subscribes here, and `fake_runtime_call` plays a runtime-API call that cudart
 * refused itself: the callback at its entry and at its exit, with the given result. */
#include <stdint.h>
#include <stddef.h>

typedef void (*callback_t)(void *, uint32_t, uint32_t, const void *);
static callback_t callback;
static void *userdata;
static int runtime_domain; /* only the runtime-API domain (2) reaches the callback */
static int all_domains;

int sanitizerSubscribe(void **handle, callback_t cb, void *user) {
    callback = cb;
    userdata = user;
    *handle = (void *)1;
    return 0;
}
int sanitizerEnableDomain(uint32_t enable, void *handle, uint32_t domain) {
    (void)handle;
    if (domain == 2) runtime_domain = enable;
    return 0;
}
int sanitizerEnableAllDomains(uint32_t enable, void *handle) {
    (void)handle;
    all_domains = enable;
    return 0;
}

struct callback_data {
    uint32_t site;
    const char *function_name;
    const void *params;
    const void *return_value;
    const char *symbol_name;
    void *context;
};

/* Returns `result`, as cudart would; -1 when gpusan did not subscribe to the runtime domain
 * alone (it must not pay for the others). */
int fake_runtime_call(uint32_t cbid, const void *params, int result) {
    if (!callback || !runtime_domain || all_domains) return -1;
    struct callback_data d = {0, "cudaFake", params, &result, 0, 0};
    callback(userdata, 2, cbid, &d);
    d.site = 1;
    callback(userdata, 2, cbid, &d);
    return result;
}

/* ---- the patching API (the binary route) ------------------------------------------------
 *
 * The driver stand-in reports module loads and launches here (fake_sanitizer_loaded,
 * fake_sanitizer_launch), which reach gpusan's callback when it enabled that callback
 * (sanitizerEnableCallback). Each patching call is appended to $FAKE_SANITIZER_LOG, one line
 * each. $FAKE_SANITIZER_PATCH_FAIL makes sanitizerPatchModule fail (SANITIZER_ERROR_NOT_SUPPORTED),
 * $FAKE_SANITIZER_ALLOC_FAIL sanitizerAlloc. A graph's kernel nodes come through
 * fake_sanitizer_node_launch (the graph node callback; see there).
 * Built with -DFAKE_NO_PATCHING, the library has none of these functions (an old one).
 *
 * A launched kernel whose callback data was set "runs" its patched accesses: each launch of
 * a kernel named mc_* makes one access to memory in no allocation (it counts it in the
 * params block), and mc_overflow writes 4 bytes at its first argument plus its second (a
 * device pointer and an int), which it reports as out of bounds at SASS offset 0x70. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int enabled[16][16];
int sanitizerEnableCallback(uint32_t enable, void *handle, uint32_t domain, uint32_t cbid) {
    (void)handle;
    if (domain < 16 && cbid < 16) enabled[domain][cbid] = enable;
    return 0;
}

static void note(const char *fmt, const void *a, const void *b) {
    const char *path = getenv("FAKE_SANITIZER_LOG");
    FILE *f = path ? fopen(path, "a") : 0;
    if (!f) return;
    fprintf(f, fmt, a, b);
    fputc('\n', f);
    fclose(f);
}

#ifndef FAKE_NO_PATCHING
int sanitizerAddPatches(const void *image, void *ctx) {
    /* A fatbin, as nvcc --fatbin writes it. */
    if (!image || memcmp(image, "\x50\xed\x55\xba", 4)) return 1;
    note("AddPatches ctx=%p%s", ctx, "");
    return 0;
}
int sanitizerPatchInstructions(uint32_t id, void *module, const char *name) {
    char what[96];
    snprintf(what, sizeof what, "%u %s", id, name);
    note("PatchInstructions module=%p %s", module, what);
    return 0;
}
static void *patched_module;
int sanitizerPatchModule(void *module) {
    if (getenv("FAKE_SANITIZER_PATCH_FAIL")) return 14;
    note("PatchModule module=%p%s", module, "");
    patched_module = module;
    return 0;
}
static struct { void *function; const void *data; } set_data[64];
int sanitizerSetCallbackData(void *function, const void *data) {
    /* A params block with a trace buffer (gpusan_abi::binary::PARAMS_TRACE, at 40) says so. */
    int traced = data && *(const uint64_t *)((const char *)data + 40) != 0;
    note("SetCallbackData function=%p data=%s", function, data ? (traced ? "set traced" : "set") : "null");
    for (int i = 0; i < 64; i++)
        if (!set_data[i].function || set_data[i].function == function) {
            set_data[i].function = function;
            set_data[i].data = data;
            break;
        }
    return 0;
}
int sanitizerGetFunctionPcAndSize(void *module, const char *name, uint64_t *pc, uint64_t *size) {
    (void)module; (void)name;
    *pc = 0x7f0000001000ull;
    *size = 0x200;
    return 0;
}
/* One launch's data (a graph node's): the launch handle is the node callback's own. */
static const void *launch_data;
static int launch_data_set;
int sanitizerSetLaunchCallbackData(void *launch, void *function, void *stream, const void *data) {
    (void)launch; (void)stream;
    note("SetLaunchCallbackData function=%p data=%s", function, data ? "set" : "null");
    launch_data = data;
    launch_data_set = 1;
    return 0;
}
int sanitizerStreamSynchronize(void *stream) {
    note("StreamSynchronize stream=%p%s", stream, "");
    return 0;
}
/* Device memory is host memory in the fake driver. */
int sanitizerAlloc(void *ctx, void **p, size_t n) {
    (void)ctx;
    if (getenv("FAKE_SANITIZER_ALLOC_FAIL")) return 6; /* SANITIZER_ERROR_OUT_OF_MEMORY */
    *p = calloc(1, n);
    return *p ? 0 : 1;
}
int sanitizerMemcpyHostToDeviceAsync(void *dst, const void *src, size_t n, void *stream) {
    (void)stream;
    memcpy(dst, src, n);
    return 0;
}
static const void *data_of(void *function) {
    for (int i = 0; i < 64; i++) if (set_data[i].function == function) return set_data[i].data;
    return 0;
}
#else
static const void *data_of(void *function) { (void)function; return 0; }
static void *patched_module;
static const void *launch_data;
static int launch_data_set;
#endif

static int in_callback;
int fake_sanitizer_in_callback(void) { return in_callback; }

struct module_data { void *context, *module; size_t cubin_size; const char *cubin; void *library; };
void fake_sanitizer_loaded(void *ctx, void *module, void *library, const void *image, size_t size) {
    if (!callback || !enabled[3][9]) return;
    struct module_data d = {ctx, module, size, image, library};
    in_callback = 1;
    callback(userdata, 3, 9, &d);
    in_callback = 0;
}

static void run_patched(unsigned char *p, const char *name, void **params);
/* Sanitizer_LaunchData up to hLaunch, and Sanitizer_GraphNodeLaunchData (its union is 144 bytes). */
struct launch_data { void *context, *stream, *hstream, *module, *function; const char *name; uint32_t dims[9]; uint64_t grid_id; void *hlaunch; };
void fake_sanitizer_launch(void *ctx, void *module, void *function, const char *name, void **params) {
    if (!callback || !enabled[5][1]) return;
    struct launch_data d = {ctx, 0, 0, module, function, name};
    in_callback = 1;
    callback(userdata, 5, 1, &d);
    in_callback = 0;
    run_patched((unsigned char *)data_of(function), name, params);
}
/* A patched kernel runs with `p` as its patches' userdata. */
static int run_patched_kinds(unsigned char *p, const char *name, void **params);
static void run_patched(unsigned char *p, const char *name, void **params) {
    if (!p || strncmp(name, "mc_", 3)) return;
    if (run_patched_kinds(p, name, params)) return;
    *(uint64_t *)(p + 24) += 1;
    if (strcmp(name, "mc_overflow") || !params) return;
    uint64_t addr = *(uint64_t *)params[0] + (uint64_t)*(int *)params[1];
    unsigned char *errors = (unsigned char *)(uintptr_t)*(uint64_t *)(p + 8);
    uint32_t kernel = *(uint32_t *)(p + 16), start = *(uint32_t *)(p + 20);
    uint32_t i = (*(uint32_t *)errors)++;
    unsigned char *r = errors + 16 + 64 * i;
    uint32_t w[12] = {kernel, 1, 4, (start + 0x70) - start, 0, 0, 0, 3, 0, 0, 0, 1}; /* thread 3 writes 4 bytes */
    memcpy(r, &addr, 8);
    memset(r + 8, 0, 8);
    memcpy(r + 16, w, sizeof w);
}

/* A kernel node of a graph launched (`upload`: uploaded) by the driver stand-in: the graph
 * node callback (domain 10, NODE_LAUNCH_BEGIN 4), then, launched, the kernel runs. A kernel
 * of a patched module whose launch got no data runs with whatever the API holds, as on the
 * GPU, where graph-launched patched kernels faulted: it faults here (returns 1). The data of
 * its function is not used: this fake takes the stricter reading of the API, where only a
 * launch's own data reaches a graph's node. */
struct node_data { void *exec; uint32_t launch_id; void *node; uint32_t type; union { struct launch_data l; uint64_t largest[18]; } u; uint32_t upload; };
int fake_sanitizer_node_launch(void *ctx, void *module, void *function, const char *name, void **params, int upload) {
    struct node_data d = {0};
    d.u.l = (struct launch_data){ctx, 0, (void *)0x5eed, module, function, name, {0}, 0, &d, };
    d.upload = upload;
    launch_data_set = 0;
    if (callback && enabled[10][4]) {
        in_callback = 1;
        callback(userdata, 10, 4, &d);
        in_callback = 0;
    }
    if (upload) return 0;
    if (module != patched_module || !patched_module) return 0;
    if (!launch_data_set) return 1;
    run_patched((unsigned char *)launch_data, name, params);
    return 0;
}

/* Kernels of the binary route's other checks (tests/binary.rs), run with their params block
 * `p` (table at +0, error buffer at +8, kernel at +16, heap table at +32):
 * mc_redzone logs the table entry of its first argument (FAKE_SANITIZER_LOG: "entry
 * size=N redzone=M", the red zone as its flags record it); mc_shared reports a 4-byte
 * shared write at window offset 0x2000; mc_double_free logs whether it was given a heap
 * table ("heap=1" or "heap=0") and reports its first argument freed twice. */
static void play_record(unsigned char *p, uint64_t addr, uint64_t allocation, uint32_t code, uint32_t size,
                        uint32_t space, uint32_t access) {
    unsigned char *errors = (unsigned char *)(uintptr_t)*(uint64_t *)(p + 8);
    uint32_t i = (*(uint32_t *)errors)++;
    unsigned char *r = errors + 16 + 64 * i;
    uint32_t w[12] = {*(uint32_t *)(p + 16), code, size, 0x90, 0, 0, 0, 1, 0, 0, space, access};
    memcpy(r, &addr, 8);
    memcpy(r + 8, &allocation, 8);
    memcpy(r + 16, w, sizeof w);
}
static void log_line(const char *fmt, unsigned long long a, unsigned long long b) {
    const char *path = getenv("FAKE_SANITIZER_LOG");
    FILE *f = path ? fopen(path, "a") : 0;
    if (!f) return;
    fprintf(f, fmt, a, b);
    fputc('\n', f);
    fclose(f);
}
static int run_patched_kinds(unsigned char *p, const char *name, void **params) {
    if (!strcmp(name, "mc_redzone") && params) {
        uint64_t a = *(uint64_t *)params[0];
        unsigned char *table = (unsigned char *)(uintptr_t)*(uint64_t *)p;
        uint64_t len = *(uint64_t *)(table + 8);
        for (uint64_t i = 0; i < len; i++) {
            unsigned char *e = table + 32 + 32 * i;
            if (*(uint64_t *)e != a) continue;
            uint32_t flags = *(uint32_t *)(e + 24);
            log_line("entry size=%llu redzone=%llu", *(uint64_t *)(e + 8), (unsigned long long)(flags >> 16) * 256);
        }
        return 1;
    }
    if (!strcmp(name, "mc_shared")) {
        play_record(p, 0x2000, 0, 4 /* CODE_SHARED_OUT_OF_BOUNDS */, 4, 1 /* shared */, 1 /* write */);
        return 1;
    }
    if (!strcmp(name, "mc_double_free") && params) {
        uint64_t a = *(uint64_t *)params[0];
        log_line("heap=%llu%.0llu", *(uint64_t *)(p + 32) != 0, 0);
        play_record(p, a, a | (1ull << 63), 7 /* CODE_DOUBLE_FREE */, 0, 0, 0);
        return 1;
    }
    return 0;
}
