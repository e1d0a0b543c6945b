#define _GNU_SOURCE
#include <unistd.h>
/* A stand-in for libcuda.so.1 so CI (no GPU) can run programs under `gpusan run`:
 * "device" memory is host memory, and each function behaves like the driver's for the
 * cases the tests use (success, CUDA_ERROR_INVALID_VALUE for a bad free, and the stream
 * capture rules: see "streams and stream capture" below). */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/mman.h>

typedef int CUresult;
static CUresult capture_unsafe(const char *call, int on_legacy_stream);
#define MAX_ALLOCS 4096
static uintptr_t live[MAX_ALLOCS];
static size_t live_bytes[MAX_ALLOCS];
/* The context each allocation was made in. The driver frees memory in its own context;
 * a free from another one, or of memory whose context was destroyed, is counted. */
static uintptr_t live_ctx[MAX_ALLOCS];
static int wrong_context_frees, dead_frees;
int fake_wrong_context_frees(void) { return wrong_context_frees; }
int fake_dead_frees(void) { return dead_frees; }
#define MAX_DEAD 256
static uintptr_t dead[MAX_DEAD];
static int n_dead;
/* Not a driver function: bytes cuMemAlloc has handed out and not taken back. */
uint64_t fake_alloc_live_bytes(void) {
    uint64_t n = 0;
    for (int i = 0; i < MAX_ALLOCS; i++) n += live[i] ? live_bytes[i] : 0;
    return n;
}
/* The function handle of the last cuLaunchKernel (`fake_last_launched_name`). */
static void *last_launched;
static int abi_declared; /* the last module loaded declares gpusan's device-ABI variables */
static int counters_declared; /* ... and the check counters of a counting build */

static int find(uintptr_t p) {
    for (int i = 0; i < MAX_ALLOCS; i++) if (live[i] == p) return i;
    return -1;
}
/* Not driver functions, for the binary route's red zones: the bytes cuMemAlloc was asked
 * for the allocation at `p` (0: none there). FAKE_CUDA_ALLOC_LIMIT refuses requests of more
 * bytes than it says (CUDA_ERROR_OUT_OF_MEMORY). */
static size_t live_asked[MAX_ALLOCS];
size_t fake_alloc_asked(uint64_t p) { int i = find((uintptr_t)p); return i < 0 ? 0 : live_asked[i]; }
static int over_alloc_limit(size_t size) {
    const char *limit = getenv("FAKE_CUDA_ALLOC_LIMIT");
    return limit && size > strtoull(limit, 0, 10);
}
/* The allocation holding `p`, as long as cuMemAlloc was asked. FAKE_CUDA_NO_RANGE: the
 * driver says nothing. */
CUresult cuMemGetAddressRange_v2(uint64_t *base, size_t *size, uint64_t p) {
    if (getenv("FAKE_CUDA_NO_RANGE")) return 1;
    for (int i = 0; i < MAX_ALLOCS; i++)
        if (live[i] && p >= live[i] && p < live[i] + live_asked[i]) {
            if (base) *base = live[i];
            if (size) *size = live_asked[i];
            return 0;
        }
    return 1; /* CUDA_ERROR_INVALID_VALUE */
}
/* A device of 1 GiB: free is what cuMemAlloc has not handed out. */
#define FAKE_TOTAL_BYTES (1ull << 30)
uint64_t fake_alloc_live_bytes(void);
CUresult cuMemGetInfo_v2(size_t *free, size_t *total) {
    *total = FAKE_TOTAL_BYTES;
    *free = FAKE_TOTAL_BYTES - fake_alloc_live_bytes();
    return 0;
}
/* Like the driver: the library named by CUDA_INJECTION64_PATH is loaded and initialized once. */
#include <dlfcn.h>
/* Whether an injection library was loaded: only then can the Compute Sanitizer's fake be. */
static int injected;
CUresult cuInit(unsigned flags) {
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
CUresult cuCtxSetCurrent(void *ctx) { current_ctx = (uintptr_t)ctx; return 0; }
/* Context 0x2000 is on device 1 when FAKE_CUDA_DEVICES is 2 or more (else both on 0). */
static int device_of_ctx(uintptr_t ctx) {
    const char *n = getenv("FAKE_CUDA_DEVICES");
    return ctx == 0x2000 && n && atoi(n) > 1;
}
CUresult cuCtxGetDevice(int *dev) { *dev = device_of_ctx(current_ctx); return 0; }
/* The Compute Sanitizer API allows no driver call inside its callbacks (only its own
 * sanitizerAlloc and copies): one made there is logged to $FAKE_SANITIZER_LOG. */
static void no_call_in_callback(const char *what) {
    int (*in)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fake_sanitizer_in_callback");
    const char *path = getenv("FAKE_SANITIZER_LOG");
    FILE *f = in && in() && path ? fopen(path, "a") : 0;
    if (f) { fprintf(f, "driver call in a callback: %s\n", what); fclose(f); }
}
/* Not a driver function: how many times cuMemAlloc_v2 was called. */
static int alloc_calls;
int fake_alloc_calls(void) { return alloc_calls; }
CUresult cuMemAlloc_v2(uint64_t *dptr, size_t size) {
    __atomic_add_fetch(&alloc_calls, 1, __ATOMIC_RELAXED);
    CUresult c = capture_unsafe("cuMemAlloc", 0);
    no_call_in_callback("cuMemAlloc");
    if (c) return c;
    if (over_alloc_limit(size)) return 2;
    int i = find(0);
    void *p = aligned_alloc(256, (size + 255) / 256 * 256);
    if (i < 0 || !p) return 2;
    live_asked[i] = size;
    live[i] = (uintptr_t)p;
    live_bytes[i] = (size + 255) / 256 * 256;
    live_ctx[i] = current_ctx;
    *dptr = (uint64_t)(uintptr_t)p;
    return 0;
}
/* Managed memory: in the fake, device memory is host memory already. Prefetches and advice
 * change nothing here. */
typedef struct { int type; int id; } CUmemLocation;
CUresult cuMemAllocManaged(uint64_t *dptr, size_t size, unsigned flags) { (void)flags; return cuMemAlloc_v2(dptr, size); }
CUresult cuMemPrefetchAsync_v2(uint64_t p, size_t n, CUmemLocation to, unsigned flags, void *stream) {
    (void)p; (void)n; (void)to; (void)flags; (void)stream;
    return 0;
}
CUresult cuMemAdvise_v2(uint64_t p, size_t n, int advice, CUmemLocation at) {
    (void)p; (void)n; (void)advice; (void)at;
    return 0;
}
/* Mapped pinned host memory: in the fake, host and device addresses are the same.
 * FAKE_CUDA_NO_HOST_MAP makes it unavailable (gpusan then keeps its error buffer in device
 * memory and copies it back). */
static void host_alloc_made(void *p, size_t size);
CUresult cuMemHostAlloc(void **p, size_t size, unsigned flags) {
    (void)flags;
    no_call_in_callback("cuMemHostAlloc");
    if (getenv("FAKE_CUDA_NO_HOST_MAP")) return 801; /* CUDA_ERROR_NOT_SUPPORTED */
    /* Mapped pages of their own, as the driver's are: unmapped when the context goes. */
    void *m = mmap(0, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return 2;
    host_alloc_made(m, size);
    *p = m;
    return 0;
}
/* Host memory registered: mapped as it is (its device address is its host address). */
CUresult cuMemHostRegister_v2(void *p, size_t bytes, unsigned flags) {
    (void)p; (void)bytes; (void)flags;
    return 0;
}
CUresult cuMemHostUnregister(void *p) { (void)p; return 0; }
CUresult cuMemHostGetDevicePointer_v2(uint64_t *dptr, void *p, unsigned flags) {
    (void)flags;
    *dptr = (uint64_t)(uintptr_t)p;
    return 0;
}
static int mem_node_free(uint64_t dptr, CUresult *r);
static void mem_nodes_launched(void *graph);
static int mem_nodes_unfreed(void *graph);
static int pool_free(uint64_t dptr, CUresult *r);
/* The body of cuMemFree_v2, for the fake's own calls: a call to the exported name from
 * here would go through gpusan's stand-in, as a second free. */
static CUresult mem_free(uint64_t dptr) {
    CUresult c = capture_unsafe("cuMemFree", 0);
    if (c) return c;
    /* The real free synchronizes first and fails with an earlier launch's error. */
    if (getenv("FAKE_CUDA_STICKY")) return 719;
    CUresult graph_r;
    if (mem_node_free(dptr, &graph_r)) return graph_r;
    /* A pool's block freed by cuMemFree goes back to its pool too. */
    if (pool_free(dptr, &graph_r)) return graph_r;
    int i = find((uintptr_t)dptr);
    if (dptr == 0) return 0;
    if (i < 0) {
        for (int k = 0; k < n_dead; k++)
            if (dead[k] == (uintptr_t)dptr) { dead_frees++; return 1; }
        return 1;
    }
    if (live_ctx[i] != current_ctx) { wrong_context_frees++; return 201; /* CUDA_ERROR_INVALID_CONTEXT */ }
    live[i] = 0;
    free((void *)(uintptr_t)dptr);
    return 0;
}
CUresult cuMemFree_v2(uint64_t dptr) { return mem_free(dptr); }
static void count_pointing(uint64_t dst);
/* Synchronous copies and sets run on the legacy stream. */
/* A stall for tests: copies to the device issued in context `stall_ctx` wait inside the
 * driver until the program releases them, as a copy behind a long kernel would. */
static volatile uintptr_t stall_ctx;
static volatile int stall_released, stalled;
void fake_stall_copies_in(uintptr_t ctx) { stall_released = 0; stall_ctx = ctx; }
void fake_release_stall(void) { stall_released = 1; }
int fake_stalled(void) { return stalled; }
/* The driver's own lock, as the H100's behaved when gpusan deadlocked there (PyTorch threads:
 * one uploading the table, another in a patched kernel's first launch): a launch holds it
 * (read) while the Compute Sanitizer's callback runs, and a synchronous copy to the device
 * takes it (write). `fake_launch_meets_copy()`: the next launch waits inside the driver,
 * holding it, until a copy waits for it, and only then calls the callback. */
static pthread_rwlock_t driver_lock = PTHREAD_RWLOCK_INITIALIZER;
static volatile int meet_copy, launch_waiting, copy_waiting;
void fake_launch_meets_copy(void) { meet_copy = 1; }
int fake_launch_waiting(void) { return launch_waiting; }
/* IPC: a handle names an allocation by its address and size. The fake opens it in the same
 * process (the driver would refuse: an exporter's memory is another process's), as a new
 * mapping of that size, in the allocation table so cuMemGetAddressRange knows it. Opening
 * a handle open already gives the same mapping, counted, as the driver does; the last close
 * ends it (its memory kept, so that a stale copy in a test writes nowhere harmful). */
typedef struct { unsigned char reserved[64]; } CUipcMemHandle;
static int ipc_closes;
int fake_ipc_closes(void) { return ipc_closes; }
static struct { uint64_t exported, mapped; int opens; } ipc_open[8];
CUresult cuIpcGetMemHandle(CUipcMemHandle *h, uint64_t p) {
    int i = find((uintptr_t)p);
    if (i < 0) return 1;
    memset(h, 0, sizeof *h);
    memcpy(h->reserved, &p, 8);
    memcpy(h->reserved + 8, &live_asked[i], sizeof(size_t));
    return 0;
}
CUresult cuIpcOpenMemHandle_v2(uint64_t *dptr, CUipcMemHandle h, unsigned flags) {
    (void)flags;
    size_t size;
    uint64_t exported;
    memcpy(&exported, h.reserved, 8);
    memcpy(&size, h.reserved + 8, sizeof size);
    for (int k = 0; k < 8; k++)
        if (ipc_open[k].opens && ipc_open[k].exported == exported) {
            ipc_open[k].opens++;
            *dptr = ipc_open[k].mapped;
            return 0;
        }
    int i = find(0);
    void *p = aligned_alloc(256, (size + 255) / 256 * 256);
    if (i < 0 || !p || !size) return 1;
    live_asked[i] = size;
    live[i] = (uintptr_t)p;
    live_bytes[i] = (size + 255) / 256 * 256;
    live_ctx[i] = current_ctx;
    *dptr = (uint64_t)(uintptr_t)p;
    for (int k = 0; k < 8; k++)
        if (!ipc_open[k].opens) {
            ipc_open[k].exported = exported;
            ipc_open[k].mapped = *dptr;
            ipc_open[k].opens = 1;
            break;
        }
    return 0;
}
CUresult cuIpcCloseMemHandle(uint64_t p) {
    for (int k = 0; k < 8; k++)
        if (ipc_open[k].opens && ipc_open[k].mapped == p) {
            ipc_closes++;
            if (--ipc_open[k].opens == 0) {
                int i = find((uintptr_t)p);
                if (i >= 0) live[i] = 0; /* unmapped; its bytes left alone */
            }
            return 0;
        }
    return 1; /* CUDA_ERROR_INVALID_VALUE */
}
/* A copy between two contexts' memory (the fake's is host memory: one memcpy). */
CUresult cuMemcpyPeer(uint64_t dst, void *dst_ctx, uint64_t src, void *src_ctx, size_t n) {
    (void)dst_ctx; (void)src_ctx;
    memcpy((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
    return 0;
}
CUresult cuMemcpyHtoD_v2(uint64_t dst, const void *src, size_t n) {
    no_call_in_callback("cuMemcpyHtoD");
    if (launch_waiting) copy_waiting = 1;
    pthread_rwlock_wrlock(&driver_lock);
    pthread_rwlock_unlock(&driver_lock);
    if (stall_ctx && current_ctx == stall_ctx) {
        stalled = 1;
        while (!stall_released) usleep(1000);
    }
    CUresult c = capture_unsafe("cuMemcpyHtoD", 1);
    if (!c) memcpy((void *)(uintptr_t)dst, src, n);
    if (!c) count_pointing(dst);
    return c;
}
CUresult cuMemcpyDtoH_v2(void *dst, uint64_t src, size_t n) {
    no_call_in_callback("cuMemcpyDtoH");
    CUresult c = capture_unsafe("cuMemcpyDtoH", 1);
    if (!c) memcpy(dst, (void *)(uintptr_t)src, n);
    return c;
}
CUresult cuMemsetD8_v2(uint64_t dst, unsigned char v, size_t n) {
    CUresult c = capture_unsafe("cuMemsetD8", 1);
    if (!c) memset((void *)(uintptr_t)dst, v, n);
    return c;
}

/* Records the image it is asked to load in $FAKE_CUDA_LOADED, so tests can see whether
 * gpusan substituted it. */
static CUresult load_fatbin(void **module, const unsigned char *image);
static int ptx_too_new(const char *ptx);
/* Every entry point that loads an image, called directly (a call through the exported
 * name would reach gpusan's stand-in a second time). */
static CUresult load_image(void **module, const void *image);
/* The Compute Sanitizer stand-in (libsanitizer.c), when gpusan loaded it: module loads and
 * launches are reported to it, as the driver reports them to the Sanitizer API. */
static void sanitizer_loaded(void *module, void *library, const void *image) {
    void (*f)(void *, void *, void *, const void *, size_t) =
        (void (*)(void *, void *, void *, const void *, size_t))dlsym(RTLD_DEFAULT, "fake_sanitizer_loaded");
    const unsigned char *b = image;
    size_t size = b[0] == 0x7f && b[1] == 'E' ? 64 + strlen((const char *)image + 64) : strlen(image);
    if (f) f((void *)current_ctx, module, library, image, size);
}
static void sanitizer_launch(void *f, void **params);
CUresult cuModuleLoadData(void **module, const void *image) {
    CUresult r = load_image(module, image);
    if (!r) sanitizer_loaded(*module, 0, image);
    return r;
}
/* The last PTX module loaded declares canary mode's device-heap variables, held here. */
static int heap_declared;
static uint64_t heap_vars[2];
/* The last PTX module loaded is fenced (gpusan_passes::fence): its constants {base, mask,
 * abort flag}, which the manager writes after the load; fake_fence_constants() for tests. */
static int fence_declared;
static uint64_t fence_vars[3];
const uint64_t *fake_fence_constants(void) { return fence_vars; }
/* ...and its relocated variables' table (`__gpusan_vars`), which the manager fills with the
 * addresses of the variables' copies in the partition; fake_fence_vars() for tests. */
static int vars_declared;
static uint64_t fence_var_table[16];
const uint64_t *fake_fence_vars(void) { return fence_var_table; }
/* The last PTX module loaded has gpusan's unchecked copies of its functions
 * (`__gpusan_unchecked_<name>`): only then does looking one up succeed. */
static int copies_declared;
static CUresult load_image(void **module, const void *image) {
    if (!memcmp(image, "\x50\xed\x55\xba", 4)) return load_fatbin(module, image);
    /* PTX of an ISA newer than this driver's JIT: CUDA_ERROR_UNSUPPORTED_PTX_VERSION. */
    if (ptx_too_new(image)) return 222;
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
    /* A cubin the fake linker made (see cuLinkComplete): its "machine code" is the text it
     * linked, after the ELF header. */
    if (img[0] == 0x7f && img[1] == 'E') {
        const char *text = (const char *)image + 64;
        int linked = !strncmp(text, "FAKE-LINKED:", 12);
        if (path && (linked || !strncmp(text, "FAKE-NVRTC:", 11))) {
            FILE *f = fopen(path, "a");
            if (f) { fputs(text, f); fclose(f); }
        }
        abi_declared = linked && strstr(text, "__gpusan_errors") != 0;
        counters_declared = 0;
        *module = (void *)0x4000;
        return 0;
    }
    /* PTX cut short (no closing brace) does not compile: CUDA_ERROR_INVALID_PTX. */
    if (!strchr((const char *)image, '}')) return 218;
    abi_declared = strstr((const char *)image, "__gpusan_errors") != 0;
    counters_declared = abi_declared && strstr((const char *)image, "__gpusan_n_access") != 0;
    copies_declared = strstr((const char *)image, "__gpusan_unchecked_") != 0;
    heap_declared = strstr((const char *)image, "__gpusan_canary_heap_errors") != 0;
    fence_declared = strstr((const char *)image, "__gpusan_fence") != 0;
    vars_declared = strstr((const char *)image, "__gpusan_vars") != 0;
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
/* The check counters (__gpusan_n_access, _check, _group, _span), in that order. */
static uint64_t abi_counters[2][4];
static const char *counter_names[4] = {"__gpusan_n_access", "__gpusan_n_check", "__gpusan_n_group", "__gpusan_n_span"};
/* How many times a module's `__gpusan_table` was written (tests: pointed once per module). */
static int table_pointings;
static void count_pointing(uint64_t dst) {
    if (dst == (uintptr_t)&abi_tables[0] || dst == (uintptr_t)&abi_tables[1]) table_pointings++;
}
int fake_table_pointings(void) { return table_pointings; }
static CUresult get_global(uint64_t *dptr, size_t *bytes, void *module, const char *name);
CUresult cuModuleGetGlobal_v2(uint64_t *dptr, size_t *bytes, void *module, const char *name) {
    return get_global(dptr, bytes, module, name);
}
static CUresult get_global(uint64_t *dptr, size_t *bytes, void *module, const char *name) {
    (void)module;
    /* Canary mode's device heap (gpusan_passes::canary_heap): the secret and the records'
     * buffer address, in the last PTX module loaded that declares them. */
    if (heap_declared && !strcmp(name, "__gpusan_canary_heap_secret")) { *dptr = (uintptr_t)&heap_vars[0]; *bytes = 8; return 0; }
    if (heap_declared && !strcmp(name, "__gpusan_canary_heap_errors")) { *dptr = (uintptr_t)&heap_vars[1]; *bytes = 8; return 0; }
    if (fence_declared && !strcmp(name, "__gpusan_fence")) { *dptr = (uintptr_t)fence_vars; *bytes = sizeof fence_vars; return 0; }
    if (vars_declared && !strcmp(name, "__gpusan_vars")) { *dptr = (uintptr_t)fence_var_table; *bytes = sizeof fence_var_table; return 0; }
    if (!strncmp(name, "__gpusan_", 9)) {
        if (!abi_declared) return 500; /* CUDA_ERROR_NOT_FOUND */
        if (!strcmp(name, "__gpusan_table")) { *dptr = (uintptr_t)&abi_table; *bytes = 8; return 0; }
        if (!strcmp(name, "__gpusan_errors")) { *dptr = (uintptr_t)&abi_errors; *bytes = 8; return 0; }
        if (!strcmp(name, "__gpusan_module")) { *dptr = (uintptr_t)&abi_module; *bytes = 4; return 0; }
        for (int i = 0; i < 4 && counters_declared; i++)
            if (!strcmp(name, counter_names[i])) {
                *dptr = (uintptr_t)&abi_counters[current_ctx == 0x2000][i];
                *bytes = 8;
                return 0;
            }
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
/* ---- streams and stream capture ----------------------------------------------------
 *
 * Streams made by cuStreamCreate are slots of `streams`; 0 is the legacy stream. A stream
 * captures between cuStreamBeginCapture_v2 and cuStreamEndCapture, and the driver's rules
 * for what may happen meanwhile (cuda.h, cuThreadExchangeStreamCaptureMode) are enforced:
 * - "potentially unsafe" calls (allocation, free, synchronous copies and sets,
 *   synchronizations) are prohibited, by the calling thread's capture mode, while the
 *   thread has a capture of its own not begun relaxed, or (in global mode) while any
 *   thread has a capture begun in global mode;
 * - whatever the mode, work on the legacy stream cannot run while a blocking stream
 *   captures (it would depend on the capture), nor can a synchronization of a capturing
 *   stream or of the whole context.
 * A prohibited call fails with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED (legacy-stream work
 * with CUDA_ERROR_STREAM_CAPTURE_IMPLICIT) and invalidates the captures it conflicts with:
 * their cuStreamEndCapture then fails with CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, as the
 * real driver's does. Module loads are allowed during capture (since CUDA 12.3 cudart's
 * lazy loading loads a module at the first launch of one of its kernels, captured or not).
 *
 * The older `fake_set_capturing` switch only makes the capture queries answer "active"
 * (for the graph memory scenarios); it enforces nothing. */
enum { NONE = 0, ACTIVE = 1, INVALIDATED = 2 };
enum { MODE_GLOBAL = 0, MODE_THREAD_LOCAL = 1, MODE_RELAXED = 2 };
#define UNSUPPORTED 900
#define INVALIDATED_ERR 901
#define IMPLICIT 906
#define MAX_STREAMS 64
/* `graph`: what the stream's capture makes (the driver's graph exists from the start of
 * the capture: cuStreamGetCaptureInfo names it, and memory nodes go into it). */
struct stream { int used, flags, status, mode, kernels; pthread_t owner; void *graph; };
static struct stream streams[MAX_STREAMS];
static pthread_mutex_t streams_lock = PTHREAD_MUTEX_INITIALIZER;
static __thread int thread_mode = MODE_GLOBAL;
static int capturing; /* fake_set_capturing */
void fake_set_capturing(int on) { capturing = on; }
/* Captures invalidated by a conflicting call, and the first such call, for tests. */
static int invalidations;
static const char *first_conflict;
static __thread const char *current_call;
int fake_capture_invalidations(void) { return invalidations; }
const char *fake_capture_conflict(void) { return first_conflict ? first_conflict : "none"; }

static struct stream *stream_of(void *h) {
    uintptr_t p = (uintptr_t)h, b = (uintptr_t)streams;
    if (p < b || p >= b + sizeof streams || (p - b) % sizeof *streams) return 0;
    struct stream *s = (struct stream *)h;
    return s->used ? s : 0;
}
static void invalidate(struct stream *s) {
    if (s->status == ACTIVE) {
        s->status = INVALIDATED;
        if (!invalidations++) first_conflict = current_call;
    }
}
/* Whether the calling thread may make a potentially unsafe call now; if not, invalidates
 * the captures that forbid it. */
static int prohibited(void) {
    int hit = 0;
    if (thread_mode == MODE_RELAXED) return 0;
    for (int i = 0; i < MAX_STREAMS; i++) {
        struct stream *s = &streams[i];
        if (!s->used || s->status != ACTIVE || s->mode == MODE_RELAXED) continue;
        int mine = pthread_equal(s->owner, pthread_self());
        if (mine || (thread_mode == MODE_GLOBAL && s->mode == MODE_GLOBAL)) { invalidate(s); hit = 1; }
    }
    return hit;
}
/* Work on the legacy stream waits for every blocking stream: not for a capturing one. */
static int legacy_conflict(void) {
    int hit = 0;
    for (int i = 0; i < MAX_STREAMS; i++) {
        struct stream *s = &streams[i];
        if (s->used && s->status == ACTIVE && !(s->flags & 1 /* CU_STREAM_NON_BLOCKING */)) { invalidate(s); hit = 1; }
    }
    return hit;
}
static CUresult capture_unsafe(const char *call, int on_legacy_stream) {
    pthread_mutex_lock(&streams_lock);
    current_call = call;
    CUresult r = prohibited() ? UNSUPPORTED : on_legacy_stream && legacy_conflict() ? IMPLICIT : 0;
    pthread_mutex_unlock(&streams_lock);
    return r;
}
CUresult cuThreadExchangeStreamCaptureMode(int *mode) {
    if (!mode || *mode < MODE_GLOBAL || *mode > MODE_RELAXED) return 1;
    int old = thread_mode;
    thread_mode = *mode;
    *mode = old;
    return 0;
}
CUresult cuStreamCreate(void **out, unsigned flags) {
    pthread_mutex_lock(&streams_lock);
    for (int i = 0; i < MAX_STREAMS; i++)
        if (!streams[i].used) {
            streams[i] = (struct stream){.used = 1, .flags = (int)flags};
            *out = &streams[i];
            pthread_mutex_unlock(&streams_lock);
            return 0;
        }
    pthread_mutex_unlock(&streams_lock);
    return 2;
}
CUresult cuStreamDestroy_v2(void *h) {
    struct stream *s = stream_of(h);
    if (!s) return 400; /* CUDA_ERROR_INVALID_HANDLE */
    s->used = 0;
    return 0;
}
CUresult cuStreamBeginCapture_v2(void *h, int mode) {
    struct stream *s = stream_of(h);
    if (!s) return 1; /* the legacy stream cannot capture */
    if (s->status != NONE) return 1;
    pthread_mutex_lock(&streams_lock);
    s->status = ACTIVE;
    s->mode = mode;
    s->kernels = 0;
    s->owner = pthread_self();
    s->graph = calloc(1, sizeof(int));
    pthread_mutex_unlock(&streams_lock);
    return s->graph ? 0 : 2;
}
/* A graph, made by capture or by cuGraphCreate: how many kernels it launches. */
struct graph { int kernels; };
CUresult cuGraphCreate(void **graph, unsigned flags) {
    (void)flags;
    struct graph *g = calloc(1, sizeof *g);
    if (!g) return 2;
    *graph = g;
    return 0;
}
CUresult cuStreamEndCapture(void *h, void **graph) {
    struct stream *s = stream_of(h);
    if (!s || s->status == NONE) return 903; /* CUDA_ERROR_STREAM_CAPTURE_UNMATCHED */
    pthread_mutex_lock(&streams_lock);
    int status = s->status, kernels = s->kernels;
    s->status = NONE;
    pthread_mutex_unlock(&streams_lock);
    *graph = 0;
    if (status == INVALIDATED) return INVALIDATED_ERR;
    struct graph *g = s->graph;
    if (!g) return 2;
    g->kernels = kernels;
    *graph = g;
    return 0;
}
CUresult cuStreamIsCapturing(void *h, int *status) {
    struct stream *s = stream_of(h);
    *status = s ? s->status : capturing;
    return 0;
}
CUresult cuStreamGetCaptureInfo_v2(void *stream, int *status, uint64_t *id, void **graph, const void ***deps, size_t *n) {
    struct stream *s = stream_of(stream);
    *status = s ? s->status : capturing;
    if (id) *id = 1;
    if (graph) *graph = s && s->status == ACTIVE ? s->graph : (void *)0x7000;
    if (deps) *deps = 0;
    if (n) *n = 0;
    return 0;
}
/* Work queued on a stream that is not capturing runs at once ("device" memory is host
 * memory); on a capturing stream it becomes part of the graph. */
/* $FAKE_CUDA_STREAM_LOG: each stream-ordered call appends "call stream" there, so tests
 * can see which stream a piece of work went on. */
static void stream_log(const char *call, void *h) {
    const char *path = getenv("FAKE_CUDA_STREAM_LOG");
    if (!path) return;
    FILE *f = fopen(path, "a");
    if (!f) return;
    fprintf(f, "%s %#lx\n", call, (unsigned long)(uintptr_t)h);
    fclose(f);
}
static CUresult stream_work(const char *call, void *h, int *captured) {
    stream_log(call, h);
    struct stream *s = stream_of(h);
    current_call = call;
    *captured = 0;
    if (s && s->status == INVALIDATED) return INVALIDATED_ERR;
    if (s && s->status == ACTIVE) { *captured = 1; return 0; }
    if (!s) {
        pthread_mutex_lock(&streams_lock);
        int conflict = legacy_conflict();
        pthread_mutex_unlock(&streams_lock);
        if (conflict) return IMPLICIT;
    }
    return 0;
}
CUresult cuMemcpyHtoDAsync_v2(uint64_t dst, const void *src, size_t n, void *stream) {
    int captured;
    CUresult r = stream_work("cuMemcpyHtoDAsync", stream, &captured);
    if (!r && !captured) memcpy((void *)(uintptr_t)dst, src, n);
    if (!r && !captured) count_pointing(dst);
    return r;
}
CUresult cuMemcpyDtoHAsync_v2(void *dst, uint64_t src, size_t n, void *stream) {
    int captured;
    CUresult r = stream_work("cuMemcpyDtoHAsync", stream, &captured);
    if (!r && !captured) memcpy(dst, (void *)(uintptr_t)src, n);
    return r;
}
CUresult cuMemcpyDtoDAsync_v2(uint64_t dst, uint64_t src, size_t n, void *stream) {
    int captured;
    CUresult r = stream_work("cuMemcpyDtoDAsync", stream, &captured);
    if (!r && !captured) memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
    return r;
}
CUresult cuMemsetD32Async(uint64_t dst, unsigned v, size_t n, void *stream) {
    int captured;
    CUresult r = stream_work("cuMemsetD32Async", stream, &captured);
    if (!r && !captured)
        for (size_t i = 0; i < n; i++) ((unsigned *)(uintptr_t)dst)[i] = v;
    return r;
}
CUresult cuMemsetD8Async(uint64_t dst, unsigned char v, size_t n, void *stream) {
    int captured;
    CUresult r = stream_work("cuMemsetD8Async", stream, &captured);
    if (!r && !captured) memset((void *)(uintptr_t)dst, v, n);
    return r;
}
static void order_log(const char *fmt, uintptr_t a, uintptr_t b);
CUresult cuStreamSynchronize(void *h) {
    struct stream *s = stream_of(h);
    CUresult r = 0;
    order_log("streamsync %#lx", (uintptr_t)h, 0);
    pthread_mutex_lock(&streams_lock);
    current_call = "cuStreamSynchronize";
    if (s && s->status != NONE) { invalidate(s); r = UNSUPPORTED; }
    else if (prohibited()) r = UNSUPPORTED;
    else if (!s && legacy_conflict()) r = IMPLICIT;
    pthread_mutex_unlock(&streams_lock);
    return r;
}
/* A kernel named "fault_me" faults: from its launch on, synchronizations, queries and later
 * launches in its context return CUDA_ERROR_ILLEGAL_ADDRESS, as the driver's sticky errors
 * do (one per context: 0x1000, 0x2000). */
static CUresult sticky_[2];
#define sticky sticky_[current_ctx == 0x2000]
static int is_fault_me(void *f);
/* Done, unless the context faulted: the fake runs work as it is issued. */
CUresult cuStreamQuery(void *s) { (void)s; return sticky; }
CUresult cuStreamQuery_ptsz(void *s) { (void)s; return sticky; }
CUresult cuEventQuery(void *e) { (void)e; return sticky; }
/* Not a driver function: some kernel of the current context faults now (a graph's, say). */
void fake_fault(void) { sticky = 700; }
static CUresult add_kernel_node(void *graph, void *f, void **params); static CUresult graph_nodes_run(void *graph, int upload);
static void *function_of_kernel(void *k);
/* Called inside, not through the exported name, which gpusan's stand-in interposes. */
static CUresult ctx_synchronize(void) {
    if (sticky) return sticky;
    /* Waits for every stream of the context: never while one captures. */
    int hit = 0;
    pthread_mutex_lock(&streams_lock);
    current_call = "cuCtxSynchronize";
    for (int i = 0; i < MAX_STREAMS; i++)
        if (streams[i].used && streams[i].status == ACTIVE) { invalidate(&streams[i]); hit = 1; }
    pthread_mutex_unlock(&streams_lock);
    if (hit) return UNSUPPORTED;
    /* FAKE_CUDA_STICKY: an earlier launch failed; every synchronization reports it. */
    return getenv("FAKE_CUDA_STICKY") ? 719 /* CUDA_ERROR_LAUNCH_FAILED */ : 0;
}

CUresult cuCtxSynchronize(void) { return ctx_synchronize(); }
/* CUDA 13's form, which cudart's cudaDeviceSynchronize calls: `ctx` (null: the current one)
 * is the only context here that has work. */
CUresult cuCtxSynchronize_v2(void *ctx) {
    order_log("ctxsync %#lx", (uintptr_t)ctx, 0);
    return ctx_synchronize();
}

static int canary_launch(void *f, void *stream, void **params); /* canary.c: gpusan's canary kernels */
CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shmem, void *stream, void **params, void **extra) {
    (void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz; (void)shmem; (void)params; (void)extra;
    if (sticky) return sticky;
    if (canary_launch(f, stream, params)) return 0;
    last_launched = f;
    if (is_fault_me(f)) { sticky = 700; return 0; }
    int captured;
    CUresult r = stream_work("cuLaunchKernel", stream, &captured);
    if (!r && captured) stream_of(stream)->kernels++;
    if (!r && captured) r = add_kernel_node(stream_of(stream)->graph, function_of_kernel(f), params);
    if (!r && !captured) {
        pthread_rwlock_rdlock(&driver_lock);
        if (meet_copy) {
            meet_copy = 0;
            launch_waiting = 1;
            while (!copy_waiting) usleep(100);
        }
        sanitizer_launch(f, params);
        pthread_rwlock_unlock(&driver_lock);
    }
    return r;
}

/* Graphs made by capture. Launching one "runs" its kernels: each reads the allocation
 * table its module's `__gpusan_table` points to at that moment, as an instrumented kernel
 * would; the program asks what the last run saw (`fake_graph_table`). */
static const unsigned char *graph_saw;
static uint64_t graph_saw_len;
const unsigned char *fake_graph_table(uint64_t *len) { *len = graph_saw_len; return graph_saw; }
CUresult cuGraphInstantiateWithFlags(void **exec, void *graph, unsigned long long flags) {
    (void)flags;
    if (!graph) return 1;
    *exec = graph;
    return 0;
}
CUresult cuGraphExecDestroy(void *exec) { (void)exec; return 0; }
/* An executable graph (its graph's handle here) runs its graph, or the graph it was last
 * updated with (cuGraphExecUpdate): that graph's nodes, memory nodes at their addresses. */
#define MAX_UPDATES 16
static struct { void *exec, *graph; } updates[MAX_UPDATES];
static void *graph_run_by(void *exec) {
    for (int i = 0; i < MAX_UPDATES; i++) if (updates[i].exec == exec) return updates[i].graph;
    return exec;
}
CUresult cuGraphExecUpdate_v2(void *exec, void *graph, void *info) {
    (void)info;
    for (int i = 0; i < MAX_UPDATES; i++)
        if (updates[i].exec == exec || !updates[i].exec) { updates[i].exec = exec; updates[i].graph = graph; return 0; }
    return 2;
}
CUresult cuGraphLaunch(void *exec, void *stream) {
    int captured;
    CUresult r = stream_work("cuGraphLaunch", stream, &captured);
    if (r || captured) return r;
    exec = graph_run_by(exec);
    if (mem_nodes_unfreed(exec)) return 1; /* CUDA_ERROR_INVALID_VALUE, as cuGraphLaunch says */
    mem_nodes_launched(exec);
    struct graph *g = exec;
    if (g && g->kernels > 0) {
        const unsigned char *t = (const unsigned char *)(uintptr_t)abi_table;
        graph_saw = t;
        graph_saw_len = 0;
        if (t && !memcmp(t, "GSAT", 4)) memcpy(&graph_saw_len, t + 8, 8);
    }
    return graph_nodes_run(exec, 0);
}
static CUresult captured_alloc(uint64_t *dptr, size_t size, void *stream, int *captured);
static CUresult captured_free(uint64_t dptr, void *stream, int *captured);
/* Stream-ordered memory, events and pools. */
#include "pools.c"
struct mem_alloc_node_params { unsigned char pool_props[88]; void *access; size_t access_count; size_t bytesize; uint64_t dptr; };
/* Memory nodes, as the driver keeps them: the graph a node belongs to, its type (10: an
 * allocation, 11: a free, as CUgraphNodeType) and its address. Node handles are 1 + the
 * index. The graph's allocation keeps its address for the life of the graph; whether
 * its memory is there now (`mapped`) follows launches and frees outside the graph, so a
 * free outside the graph of memory the graph did not allocate fails as the driver's does. */
#define MAX_MEM_NODES 64
static struct { void *graph; int type; uint64_t dptr; size_t bytes; int mapped; } mem_nodes[MAX_MEM_NODES];
static int n_mem_nodes;
static CUresult add_mem_node(void **node, void *graph, int type, uint64_t dptr, size_t bytes) {
    if (n_mem_nodes == MAX_MEM_NODES) return 2;
    mem_nodes[n_mem_nodes].graph = graph;
    mem_nodes[n_mem_nodes].type = type;
    mem_nodes[n_mem_nodes].dptr = dptr;
    mem_nodes[n_mem_nodes].bytes = bytes;
    *node = (void *)(uintptr_t)(++n_mem_nodes);
    return 0;
}
static CUresult alloc_node(void **node, void *graph, struct mem_alloc_node_params *p);
CUresult cuGraphAddMemAllocNode(void **node, void *graph, const void **deps, size_t n, struct mem_alloc_node_params *p) {
    (void)deps; (void)n;
    return alloc_node(node, graph, p);
}
static CUresult alloc_node(void **node, void *graph, struct mem_alloc_node_params *p) {
    void *mem = aligned_alloc(256, (p->bytesize + 255) / 256 * 256 + 256); /* padded: overflows stay harmless */
    if (!mem) return 2;
    p->dptr = (uint64_t)(uintptr_t)mem;
    return add_mem_node(node, graph, 10, p->dptr, p->bytesize);
}
CUresult cuGraphAddMemFreeNode(void **node, void *graph, const void **deps, size_t n, uint64_t dptr) {
    (void)deps; (void)n;
    return add_mem_node(node, graph, 11, dptr, 0);
}
/* Kernel nodes (CUgraphNodeType 0), captured launches or added: the graph and the function
 * each launches. Their handles are KERNEL_NODE + the index. */
#define MAX_KERNEL_NODES 64
#define KERNEL_NODE 0x10000
static struct { void *graph, *f; void **params; } kernel_nodes[MAX_KERNEL_NODES];
static int n_kernel_nodes;
static CUresult add_kernel_node(void *graph, void *f, void **params) {
    if (n_kernel_nodes == MAX_KERNEL_NODES) return 2;
    kernel_nodes[n_kernel_nodes].graph = graph;
    kernel_nodes[n_kernel_nodes].params = params, kernel_nodes[n_kernel_nodes++].f = f;
    return 0;
}
static int kernel_node(void *node) {
    uintptr_t i = (uintptr_t)node - KERNEL_NODE;
    return (uintptr_t)node >= KERNEL_NODE && i < (uintptr_t)n_kernel_nodes ? (int)i : -1;
}
/* CUDA_KERNEL_NODE_PARAMS_v2 */
struct kernel_node_params { void *func; unsigned grid[3], block[3], shmem; void **params, **extra; void *kern, *ctx; };
CUresult cuGraphKernelNodeGetParams_v2(void *node, struct kernel_node_params *p) {
    int i = kernel_node(node);
    if (i < 0) return 400;
    memset(p, 0, sizeof *p);
    p->func = kernel_nodes[i].f;
    return 0;
}
/* What gpusan reads of a graph when it is instantiated. */
CUresult cuGraphGetNodes(void *graph, void **nodes, size_t *count) {
    size_t k = 0;
    for (int i = 0; i < n_mem_nodes; i++) {
        if (mem_nodes[i].graph != graph) continue;
        if (nodes && k < *count) nodes[k] = (void *)(uintptr_t)(i + 1);
        k++;
    }
    for (int i = 0; i < n_kernel_nodes; i++) {
        if (kernel_nodes[i].graph != graph) continue;
        if (nodes && k < *count) nodes[k] = (void *)(uintptr_t)(KERNEL_NODE + i);
        k++;
    }
    if (!nodes || k < *count) *count = k;
    return 0;
}
static int mem_node(void *node) {
    uintptr_t i = (uintptr_t)node;
    return i >= 1 && i <= (uintptr_t)n_mem_nodes ? (int)i - 1 : -1;
}
CUresult cuGraphNodeGetType(void *node, int *type) {
    if (kernel_node(node) >= 0) { *type = 0; return 0; }
    int i = mem_node(node);
    if (i < 0) return 400; /* CUDA_ERROR_INVALID_HANDLE */
    *type = mem_nodes[i].type;
    return 0;
}
CUresult cuGraphMemAllocNodeGetParams(void *node, struct mem_alloc_node_params *p) {
    int i = mem_node(node);
    if (i < 0 || mem_nodes[i].type != 10) return 1;
    memset(p, 0, sizeof *p);
    p->bytesize = mem_nodes[i].bytes;
    p->dptr = mem_nodes[i].dptr;
    return 0;
}
CUresult cuGraphMemFreeNodeGetParams(void *node, uint64_t *dptr) {
    int i = mem_node(node);
    if (i < 0 || mem_nodes[i].type != 11) return 1;
    *dptr = mem_nodes[i].dptr;
    return 0;
}
/* A launch of `graph` maps its allocations; its free nodes unmap them at the end. */
static void mem_nodes_launched(void *graph) {
    for (int i = 0; i < n_mem_nodes; i++)
        if (mem_nodes[i].graph == graph && mem_nodes[i].type == 10) mem_nodes[i].mapped = 1;
    for (int i = 0; i < n_mem_nodes; i++)
        if (mem_nodes[i].graph == graph && mem_nodes[i].type == 11)
            for (int j = 0; j < n_mem_nodes; j++)
                if (mem_nodes[j].type == 10 && mem_nodes[j].dptr == mem_nodes[i].dptr) mem_nodes[j].mapped = 0;
}
/* A free outside the graph of graph memory: 1 if `dptr` is a graph allocation (then 0
 * when it was there to free, else CUDA_ERROR_INVALID_VALUE in *r). */
static int mem_node_free(uint64_t dptr, CUresult *r) {
    for (int i = 0; i < n_mem_nodes; i++)
        if (mem_nodes[i].type == 10 && mem_nodes[i].dptr == dptr) {
            *r = mem_nodes[i].mapped ? 0 : 1;
            mem_nodes[i].mapped = 0;
            return 1;
        }
    return 0;
}
CUresult cuGraphDestroy(void *graph) { (void)graph; return 0; }
CUresult cuDeviceGraphMemTrim(int device) { (void)device; return 0; }
/* Whether a launch of `graph` would allocate memory one of its earlier launches allocated
 * and nothing has freed since (the driver then refuses the launch). */
static int mem_nodes_unfreed(void *graph) {
    for (int i = 0; i < n_mem_nodes; i++)
        if (mem_nodes[i].graph == graph && mem_nodes[i].type == 10 && mem_nodes[i].mapped) return 1;
    return 0;
}
/* A stream-ordered allocation or free on a capturing stream is a memory node of the
 * capture's graph (*captured then 1). */
static CUresult captured_alloc(uint64_t *dptr, size_t size, void *stream, int *captured) {
    struct stream *s = stream_of(stream);
    *captured = s && s->status == ACTIVE;
    if (!*captured) return 0;
    struct mem_alloc_node_params p = {{0}, 0, 0, size, 0};
    void *node;
    CUresult r = alloc_node(&node, s->graph, &p);
    *dptr = p.dptr;
    return r;
}
static CUresult captured_free(uint64_t dptr, void *stream, int *captured) {
    struct stream *s = stream_of(stream);
    *captured = s && s->status == ACTIVE;
    void *node;
    return *captured ? add_mem_node(&node, s->graph, 11, dptr, 0) : 0;
}
/* cuGraphAddNode: CUgraphNodeParams is the node's type, 12 reserved bytes, then the type's
 * parameters (232 bytes with padding) and 8 more reserved bytes. Memory allocation (10)
 * and free (11) nodes are memory nodes; a kernel node (0) counts as one of the graph's
 * kernels; a child graph node (4) whose graph is moved makes the child's memory nodes the
 * parent's. */
struct graph_node_params {
    int type, reserved0[3];
    union { long long reserved1[29]; struct mem_alloc_node_params alloc; uint64_t free_dptr; struct { void *graph; int ownership; } child; struct kernel_node_params kernel; } u;
    long long reserved2;
};
static CUresult add_node(void **node, void *graph, struct graph_node_params *p) {
    switch (p->type) {
    case 0: ((struct graph *)graph)->kernels++; *node = (void *)(uintptr_t)(KERNEL_NODE + n_kernel_nodes); return add_kernel_node(graph, p->u.kernel.func ? p->u.kernel.func : p->u.kernel.kern, p->u.kernel.params);
    case 10: return alloc_node(node, graph, &p->u.alloc);
    case 11: return add_mem_node(node, graph, 11, p->u.free_dptr, 0);
    case 4:
        if (p->u.child.ownership != 1) return 1;
        for (int i = 0; i < n_mem_nodes; i++)
            if (mem_nodes[i].graph == p->u.child.graph) mem_nodes[i].graph = graph;
        for (int i = 0; i < n_kernel_nodes; i++)
            if (kernel_nodes[i].graph == p->u.child.graph) kernel_nodes[i].graph = graph;
        ((struct graph *)graph)->kernels += ((struct graph *)p->u.child.graph)->kernels;
        *node = (void *)0x7400;
        return 0;
    default: return 801;
    }
}
CUresult cuGraphAddNode(void **node, void *graph, const void **deps, size_t n, struct graph_node_params *p) {
    (void)deps; (void)n;
    return add_node(node, graph, p);
}
CUresult cuGraphAddNode_v2(void **node, void *graph, const void **deps, const void *edges, size_t n, struct graph_node_params *p) {
    (void)deps; (void)edges; (void)n;
    return add_node(node, graph, p);
}
CUresult cuGraphInstantiateWithParams(void **exec, void *graph, void *params) {
    (void)params;
    if (!graph) return 1;
    *exec = graph;
    return 0;
}
/* ---- virtual memory management -----------------------------------------------------
 *
 * A reservation is host address space mapped PROT_NONE; cuMemCreate makes a handle of
 * "physical" bytes; cuMemMap places a handle in a reservation (still inaccessible) and
 * cuMemSetAccess makes it readable and writable, so touching a range gpusan mapped but did
 * not open faults as on a GPU. Sizes and addresses must be multiples of the granularity,
 * $FAKE_CUDA_GRANULE (default 2 MiB; a multiple of the page size). Knobs for tests:
 * $FAKE_CUDA_NO_VMM makes cuMemAddressReserve fail with CUDA_ERROR_NOT_SUPPORTED (a driver
 * or device without VMM); $FAKE_CUDA_VMM_LIMIT caps the bytes cuMemCreate hands out
 * (CUDA_ERROR_OUT_OF_MEMORY past it). fake_vmm_physical_bytes() says how many bytes are
 * held (created and not yet released, or still mapped). */
#include <sys/mman.h>
#define NOT_SUPPORTED 801
#define MAX_VMM 64
#define MAX_MAPPINGS 4096
struct vmm_range { uint64_t base, size; };
struct vmm_handle { uint64_t size; int released, mapped; };
struct vmm_mapping { uint64_t at, size; struct vmm_handle *h; };
static struct vmm_range reservations[MAX_VMM];
static struct vmm_mapping mappings[MAX_MAPPINGS];
static uint64_t vmm_physical;
static pthread_mutex_t vmm_lock = PTHREAD_MUTEX_INITIALIZER;
uint64_t fake_vmm_physical_bytes(void) { return vmm_physical; }
static uint64_t granule(void) {
    const char *g = getenv("FAKE_CUDA_GRANULE");
    return g && atoll(g) > 0 ? (uint64_t)atoll(g) : 2u << 20;
}
struct mem_location { unsigned type; int id; };
struct mem_allocation_prop { unsigned type, handle_types; struct mem_location location; void *win32; unsigned char flags[8]; };
struct mem_access_desc { struct mem_location location; unsigned flags; };
static int prop_ok(const struct mem_allocation_prop *p) {
    return p && p->type == 1 /* PINNED */ && p->location.type == 1 /* DEVICE */ && p->location.id == 0;
}
CUresult cuMemGetAllocationGranularity(size_t *g, const struct mem_allocation_prop *prop, int option) {
    if (!g || !prop_ok(prop) || option < 0 || option > 1) return 1;
    *g = granule();
    return 0;
}
CUresult cuMemAddressReserve(uint64_t *ptr, size_t size, size_t alignment, uint64_t addr, unsigned long long flags) {
    no_call_in_callback("cuMemAddressReserve");
    (void)addr; (void)flags;
    if (getenv("FAKE_CUDA_NO_VMM")) return NOT_SUPPORTED;
    if (!size || size % granule() || (alignment && alignment % granule())) return 1;
    /* Aligned as asked: more is reserved, and what lies outside the aligned range given back. */
    uint64_t align = alignment > granule() ? alignment : granule();
    void *raw = mmap(0, size + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (raw == MAP_FAILED) return 2;
    uint64_t lo = (uintptr_t)raw, at = (lo + align - 1) / align * align;
    if (at > lo) munmap(raw, at - lo);
    if (lo + size + align > at + size) munmap((void *)(uintptr_t)(at + size), lo + size + align - (at + size));
    void *p = (void *)(uintptr_t)at;
    pthread_mutex_lock(&vmm_lock);
    for (int i = 0; i < MAX_VMM; i++)
        if (!reservations[i].size) {
            reservations[i] = (struct vmm_range){(uintptr_t)p, size};
            pthread_mutex_unlock(&vmm_lock);
            *ptr = (uintptr_t)p;
            return 0;
        }
    pthread_mutex_unlock(&vmm_lock);
    munmap(p, size);
    return 2;
}
CUresult cuMemAddressFree(uint64_t ptr, size_t size) {
    pthread_mutex_lock(&vmm_lock);
    for (int i = 0; i < MAX_VMM; i++)
        if (reservations[i].base == ptr && reservations[i].size == size) {
            reservations[i].size = 0;
            pthread_mutex_unlock(&vmm_lock);
            munmap((void *)(uintptr_t)ptr, size);
            return 0;
        }
    pthread_mutex_unlock(&vmm_lock);
    return 1;
}
CUresult cuMemCreate(uint64_t *handle, size_t size, const struct mem_allocation_prop *prop, unsigned long long flags) {
    CUresult c = capture_unsafe("cuMemCreate", 0);
    if (c) return c;
    if (!size || size % granule() || !prop_ok(prop) || flags) return 1;
    const char *limit = getenv("FAKE_CUDA_VMM_LIMIT");
    if (limit && vmm_physical + size > (uint64_t)atoll(limit)) return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
    struct vmm_handle *h = calloc(1, sizeof *h);
    if (!h) return 2;
    h->size = size;
    pthread_mutex_lock(&vmm_lock);
    vmm_physical += size;
    pthread_mutex_unlock(&vmm_lock);
    *handle = (uintptr_t)h;
    return 0;
}
static void drop_if_unused(struct vmm_handle *h) {
    if (h->released && !h->mapped) { vmm_physical -= h->size; free(h); }
}
CUresult cuMemRelease(uint64_t handle) {
    struct vmm_handle *h = (struct vmm_handle *)(uintptr_t)handle;
    if (!h || h->released) return 1;
    pthread_mutex_lock(&vmm_lock);
    h->released = 1;
    drop_if_unused(h);
    pthread_mutex_unlock(&vmm_lock);
    return 0;
}
static int reserved(uint64_t at, uint64_t size) {
    for (int i = 0; i < MAX_VMM; i++)
        if (reservations[i].size && at >= reservations[i].base && at + size <= reservations[i].base + reservations[i].size) return 1;
    return 0;
}
static int overlaps_mapping(uint64_t at, uint64_t size) {
    for (int i = 0; i < MAX_MAPPINGS; i++)
        if (mappings[i].h && at < mappings[i].at + mappings[i].size && mappings[i].at < at + size) return 1;
    return 0;
}
CUresult cuMemMap(uint64_t ptr, size_t size, size_t offset, uint64_t handle, unsigned long long flags) {
    CUresult c = capture_unsafe("cuMemMap", 0);
    if (c) return c;
    struct vmm_handle *h = (struct vmm_handle *)(uintptr_t)handle;
    if (!h || h->released || offset || flags || size != h->size || ptr % granule()) return 1;
    pthread_mutex_lock(&vmm_lock);
    CUresult r = 1;
    if (reserved(ptr, size) && !overlaps_mapping(ptr, size))
        for (int i = 0; i < MAX_MAPPINGS; i++)
            if (!mappings[i].h) { mappings[i] = (struct vmm_mapping){ptr, size, h}; h->mapped++; r = 0; break; }
    pthread_mutex_unlock(&vmm_lock);
    return r;
}
CUresult cuMemUnmap(uint64_t ptr, size_t size) {
    CUresult c = capture_unsafe("cuMemUnmap", 0);
    if (c) return c;
    pthread_mutex_lock(&vmm_lock);
    for (int i = 0; i < MAX_MAPPINGS; i++)
        if (mappings[i].h && mappings[i].at == ptr && mappings[i].size == size) {
            struct vmm_handle *h = mappings[i].h;
            mappings[i].h = 0;
            mprotect((void *)(uintptr_t)ptr, size, PROT_NONE);
            madvise((void *)(uintptr_t)ptr, size, MADV_DONTNEED);
            h->mapped--;
            drop_if_unused(h);
            pthread_mutex_unlock(&vmm_lock);
            return 0;
        }
    pthread_mutex_unlock(&vmm_lock);
    return 1;
}
/* Opens a range that is wholly mapped (one or more mappings, back to back). */
CUresult cuMemSetAccess(uint64_t ptr, size_t size, const struct mem_access_desc *desc, size_t count) {
    CUresult c = capture_unsafe("cuMemSetAccess", 0);
    if (c) return c;
    if (!desc || count != 1 || desc->location.type != 1 || desc->location.id != 0 || desc->flags != 3) return 1;
    pthread_mutex_lock(&vmm_lock);
    uint64_t at = ptr;
    for (int found = 1; found && at < ptr + size;) {
        found = 0;
        for (int i = 0; i < MAX_MAPPINGS; i++)
            if (mappings[i].h && mappings[i].at == at) { at += mappings[i].size; found = 1; break; }
    }
    CUresult r = at >= ptr + size && !mprotect((void *)(uintptr_t)ptr, size, PROT_READ | PROT_WRITE) ? 0 : 1;
    pthread_mutex_unlock(&vmm_lock);
    return r;
}

/* Tensor maps. */
#include "tensormap.c"
struct entry { const char *name; void *fn; };
static const struct entry table[] = {
    {"cuMemAlloc", (void *)cuMemAlloc_v2}, {"cuMemFree", (void *)cuMemFree_v2},
    {"cuMemcpyHtoD", (void *)cuMemcpyHtoD_v2}, {"cuMemcpyDtoH", (void *)cuMemcpyDtoH_v2},
    {"cuMemsetD8", (void *)cuMemsetD8_v2}, {"cuCtxGetCurrent", (void *)cuCtxGetCurrent}, {"cuCtxSetCurrent", (void *)cuCtxSetCurrent},
    /* What cudart asks for to build, capture and launch graphs with memory nodes (the
     * newest version of each, as for CUDA 13: cuGraphAddNode is _v2, cuGraphInstantiate
     * the flags form, cuStreamBeginCapture _v2). */
    {"cuGraphCreate", (void *)cuGraphCreate}, {"cuGraphAddMemAllocNode", (void *)cuGraphAddMemAllocNode},
    {"cuGraphAddMemFreeNode", (void *)cuGraphAddMemFreeNode}, {"cuGraphAddNode", (void *)cuGraphAddNode_v2},
    {"cuGraphInstantiate", (void *)cuGraphInstantiateWithFlags},
    {"cuGraphInstantiateWithFlags", (void *)cuGraphInstantiateWithFlags},
    {"cuGraphInstantiateWithParams", (void *)cuGraphInstantiateWithParams}, {"cuGraphLaunch", (void *)cuGraphLaunch},
    {"cuGraphExecDestroy", (void *)cuGraphExecDestroy}, {"cuGraphDestroy", (void *)cuGraphDestroy},
    {"cuGraphExecUpdate", (void *)cuGraphExecUpdate_v2},
    {"cuDeviceGraphMemTrim", (void *)cuDeviceGraphMemTrim}, {"cuMemAllocAsync", (void *)cuMemAllocAsync},
    {"cuMemFreeAsync", (void *)cuMemFreeAsync}, {"cuMemAllocFromPoolAsync", (void *)cuMemAllocFromPoolAsync},
    {"cuStreamCreate", (void *)cuStreamCreate}, {"cuStreamBeginCapture", (void *)cuStreamBeginCapture_v2},
    {"cuStreamEndCapture", (void *)cuStreamEndCapture}, {"cuStreamSynchronize", (void *)cuStreamSynchronize},
    {"cuLaunchKernel", (void *)cuLaunchKernel}, {"cuModuleLoadData", (void *)cuModuleLoadData},
    {"cuModuleGetGlobal", (void *)cuModuleGetGlobal_v2},
    TENSORMAP_ENTRIES
};
/* Not a driver function: how many times cuGetProcAddress_v2 was called. */
static int getproc_calls;
int fake_getproc_calls(void) { return getproc_calls; }
CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, uint64_t flags, int *status) {
    (void)flags;
    __atomic_add_fetch(&getproc_calls, 1, __ATOMIC_RELAXED);
    /* As the driver answers CUDA 13's cudart. */
    if (strcmp(symbol, "cuCtxSynchronize") == 0 && version >= 13000) {
        *pfn = (void *)cuCtxSynchronize_v2;
        if (status) *status = 0;
        return 0;
    }
    for (size_t i = 0; i < sizeof table / sizeof *table; i++)
        if (strcmp(table[i].name, symbol) == 0) { *pfn = table[i].fn; if (status) *status = 0; return 0; }
    *pfn = 0;
    if (status) *status = 1;
    return 500; /* CUDA_ERROR_NOT_FOUND */
}

/* ---- fatbins, libraries and the primary context ---------------------------------------
 *
 * A fatbin (magic 0xBA55ED50, as `nvcc -fatbin` writes it) loads as the driver would load
 * its machine code for sm_90: recorded as "<fatbin>" in $FAKE_CUDA_LOADED; only its header
 * is read, so one cut short still "loads" (what gpusan must do is hand it over untouched).
 * The other entry points load like cuModuleLoadData; a library is handle 0x5000.
 *
 * The primary context is 0x1000 (every thread's current context unless switched). It
 * exists while retained: the last cuDevicePrimaryCtxRelease_v2 destroys it, as does
 * cuDevicePrimaryCtxReset_v2, and cuCtxDestroy_v2 destroys a context; a destroyed context's
 * host allocations (cuMemHostAlloc) are unmapped, as the driver frees them. */
static CUresult load_fatbin(void **module, const unsigned char *image) {
    const char *path = getenv("FAKE_CUDA_LOADED");
    FILE *f = path ? fopen(path, "w") : 0;
    if (f) { fputs("<fatbin>", f); fclose(f); }
    abi_declared = counters_declared = 0;
    (void)image;
    *module = (void *)0x4000;
    return 0;
}
/* `.version` above 9.0. */
static int ptx_too_new(const char *ptx) {
    const unsigned char *b = (const unsigned char *)ptx;
    if (b[0] == 0x7f && b[1] == 'E') return 0;
    const char *v = strstr(ptx, ".version ");
    int major = 0, minor = 0;
    return v && sscanf(v, ".version %d.%d", &major, &minor) == 2 && (major > 9 || (major == 9 && minor > 0));
}
CUresult cuModuleLoadDataEx(void **module, const void *image, unsigned n, int *options, void **values) {
    (void)n; (void)options; (void)values;
    return load_image(module, image);
}
CUresult cuModuleLoadFatBinary(void **module, const void *image) { return load_image(module, image); }
CUresult cuLibraryLoadData(void **lib, const void *code, int *jo, void **jv, unsigned njo, int *lo, void **lv, unsigned nlo) {
    (void)jo; (void)jv; (void)njo; (void)lo; (void)lv; (void)nlo;
    void *m;
    CUresult r = load_image(&m, code);
    if (!r) *lib = (void *)0x5000;
    if (!r) sanitizer_loaded(m, *lib, code);
    return r;
}
/* Loads from a file: read whole, then loaded like data (the fake keeps the bytes). */
static void *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return buf;
}
CUresult cuModuleLoad(void **module, const char *path) {
    void *image = read_file(path);
    return image ? load_image(module, image) : 301; /* CUDA_ERROR_FILE_NOT_FOUND */
}
CUresult cuLibraryLoadFromFile(void **lib, const char *path, int *jo, void **jv, unsigned njo, int *lo, void **lv,
                               unsigned nlo) {
    (void)jo; (void)jv; (void)njo; (void)lo; (void)lv; (void)nlo;
    void *image = read_file(path), *m;
    if (!image) return 301;
    CUresult r = load_image(&m, image);
    if (!r) *lib = (void *)0x5000;
    return r;
}
CUresult cuLibraryGetGlobal(uint64_t *dptr, size_t *bytes, void *lib, const char *name) {
    return get_global(dptr, bytes, lib, name);
}
/* Kernels by name: the first name looked up is 0x4100 (0x5100 in a library), the next
 * 0x4110, …; cuFuncGetName and cuFuncGetModule answer for them. */
static char kernel_names[16][64];
static int kernel_count;
static int kernel_index(const char *name) {
    for (int i = 0; i < kernel_count; i++) if (!strcmp(kernel_names[i], name)) return i;
    if (kernel_count == 16) return 15;
    snprintf(kernel_names[kernel_count], sizeof kernel_names[0], "%s", name);
    return kernel_count++;
}
/* What that kernel would do (an instrumented one writes records, its unchecked copy does
 * not), a program plays: the name of the last handle launched. */
const char *fake_last_launched_name(void) {
    uintptr_t i = ((uintptr_t)last_launched - 0x4100) / 0x10;
    return (uintptr_t)last_launched >= 0x4100 && (int)i < kernel_count ? kernel_names[i] : "";
}
CUresult cuModuleGetFunction(void **f, void *module, const char *name) {
    (void)module;
    if (!strncmp(name, "__gpusan_unchecked_", 19) && !copies_declared) return 500; /* CUDA_ERROR_NOT_FOUND */
    *f = (void *)(uintptr_t)(0x4100 + 0x10 * kernel_index(name));
    return 0;
}
CUresult cuLibraryGetKernel(void **k, void *lib, const char *name) {
    (void)lib;
    *k = (void *)(uintptr_t)(0x5100 + 0x10 * kernel_index(name));
    return 0;
}
static int is_fault_me(void *f) {
    uintptr_t i = ((uintptr_t)f - 0x4100) / 0x10;
    return (uintptr_t)f >= 0x4100 && (uintptr_t)f < 0x4200 && (int)i < kernel_count && !strcmp(kernel_names[i], "fault_me");
}
CUresult cuFuncGetName(const char **name, void *f) {
    uintptr_t i = ((uintptr_t)f - 0x4100) / 0x10;
    if ((uintptr_t)f < 0x4100 || (uintptr_t)f >= 0x4200 || (int)i >= kernel_count) return 400; /* INVALID_HANDLE */
    *name = kernel_names[i];
    return 0;
}
CUresult cuFuncGetModule(void **module, void *f) {
    if ((uintptr_t)f < 0x4100 || (uintptr_t)f >= 0x4200) return 400;
    *module = (void *)0x4000;
    return 0;
}
/* A library kernel's function in the context is the kernel's own handle, or after
 * fake_distinct_kernel_functions(1) the module function of that name (0x4100 + …), as the
 * driver's are distinct handles; a captured launch of the kernel then makes a kernel node
 * holding that function. */
static int distinct_kernel_functions;
void fake_distinct_kernel_functions(int on) { distinct_kernel_functions = on; }
static void *function_of_kernel(void *k) {
    uintptr_t p = (uintptr_t)k;
    return distinct_kernel_functions && p >= 0x5100 && p < 0x5200 ? (void *)(p - 0x1000) : k;
}
CUresult cuKernelGetFunction(void **f, void *k) { *f = function_of_kernel(k); return 0; }
static void sanitizer_launch(void *f, void **params) {
    /* A lookup per launch would be most of the fake's launch (bench/launch-host-cost.sh). */
    if (!injected) return;
    void (*hook)(void *, void *, void *, const char *, void **) =
        (void (*)(void *, void *, void *, const char *, void **))dlsym(RTLD_DEFAULT, "fake_sanitizer_launch");
    uintptr_t p = (uintptr_t)f, i = ((p & 0xfff) - 0x100) / 0x10;
    int known = ((p >= 0x4100 && p < 0x4200) || (p >= 0x5100 && p < 0x5200)) && (int)i < kernel_count;
    if (hook && known) hook((void *)current_ctx, (void *)0x4000, f, kernel_names[i], params);
}
#include "graph_nodes.c"
CUresult cuModuleUnload(void *module) { (void)module; return 0; }
CUresult cuLibraryUnload(void *lib) { (void)lib; return 0; }
CUresult cuDeviceGetName(char *name, int len, int dev) {
    if (dev != 0 || !name || len <= 0) return 1;
    snprintf(name, (size_t)len, "gpusan fake GPU");
    return 0;
}
CUresult cuDriverGetVersion(int *v) { *v = 13000; return 0; }
CUresult cuDeviceTotalMem_v2(size_t *bytes, int dev) {
    if (dev != 0) return 101;
    *bytes = FAKE_TOTAL_BYTES;
    return 0;
}
CUresult cuDeviceGetAttribute(int *value, int attribute, int dev) {
    if (dev != 0) return 101; /* CUDA_ERROR_INVALID_DEVICE */
    if (attribute == 75) { *value = 9; return 0; } /* compute capability 9.0 */
    if (attribute == 76) { *value = 0; return 0; }
    return 1;
}

#define MAX_HOST_ALLOCS 256
static struct { void *p; size_t size; uintptr_t ctx; } host_allocs[MAX_HOST_ALLOCS];
static void host_alloc_made(void *p, size_t size) {
    for (int i = 0; i < MAX_HOST_ALLOCS; i++)
        if (!host_allocs[i].p) { host_allocs[i].p = p; host_allocs[i].size = size; host_allocs[i].ctx = current_ctx; return; }
}
CUresult cuMemFreeHost(void *p) {
    for (int i = 0; i < MAX_HOST_ALLOCS; i++)
        if (host_allocs[i].p == p) { munmap(p, host_allocs[i].size); host_allocs[i].p = 0; return 0; }
    return 1;
}
/* A context stack per thread, as cuCtxPushCurrent / cuCtxPopCurrent keep. */
static __thread uintptr_t ctx_stack[8];
static __thread int ctx_depth;
CUresult cuCtxPushCurrent_v2(void *ctx) {
    if (ctx_depth == 8) return 1;
    ctx_stack[ctx_depth++] = current_ctx;
    current_ctx = (uintptr_t)ctx;
    return 0;
}
CUresult cuCtxPopCurrent_v2(void **ctx) {
    if (ctx_depth == 0) return 201;
    if (ctx) *ctx = (void *)current_ctx;
    current_ctx = ctx_stack[--ctx_depth];
    return 0;
}
static int pool_blocks_gone(uintptr_t pool, uintptr_t ctx);
static void destroy_context(uintptr_t ctx) {
    pool_blocks_gone(~(uintptr_t)0, ctx);
    for (int i = 0; i < MAX_EVENTS; i++)
        if (event_ctx[i] == ctx) event_ctx[i] = 0;
    /* Device memory of the context goes with it: remembered, so a later free of it counts. */
    for (int i = 0; i < MAX_ALLOCS; i++)
        if (live[i] && live_ctx[i] == ctx) {
            if (n_dead < MAX_DEAD) dead[n_dead++] = live[i];
            free((void *)live[i]);
            live[i] = 0;
        }
    for (int i = 0; i < MAX_HOST_ALLOCS; i++)
        if (host_allocs[i].p && host_allocs[i].ctx == ctx) { munmap(host_allocs[i].p, host_allocs[i].size); host_allocs[i].p = 0; }
}
static int primary_refs;
CUresult cuCtxCreate_v2(void **ctx, unsigned flags, int dev) {
    (void)flags;
    if (!ctx || dev != 0) return 101;
    *ctx = (void *)(uintptr_t)0x1000;
    current_ctx = 0x1000;
    return 0;
}
/* CUDA 13's cuCtxCreate (execution-affinity and CIG parameters ignored). */
CUresult cuCtxCreate_v4(void **ctx, void *params, unsigned flags, int dev) {
    (void)params;
    return cuCtxCreate_v2(ctx, flags, dev);
}
CUresult cuDeviceGet(int *dev, int ordinal) {
    if (!dev || ordinal != 0) return 101; /* CUDA_ERROR_INVALID_DEVICE */
    *dev = 0;
    return 0;
}
CUresult cuDevicePrimaryCtxRetain(void **ctx, int dev) {
    if (dev != 0) return 101;
    primary_refs++;
    *ctx = (void *)0x1000;
    return 0;
}
CUresult cuDevicePrimaryCtxRelease_v2(int dev) {
    if (dev != 0 || primary_refs == 0) return 101;
    if (--primary_refs == 0) destroy_context(0x1000);
    return 0;
}
CUresult cuDevicePrimaryCtxReset_v2(int dev) {
    if (dev != 0) return 101;
    primary_refs = 0;
    destroy_context(0x1000);
    return 0;
}
CUresult cuDevicePrimaryCtxGetState(int dev, unsigned *flags, int *active) {
    if (dev != 0) return 101;
    *flags = 0;
    *active = primary_refs > 0;
    return 0;
}
CUresult cuCtxDestroy_v2(void *ctx) {
    if ((uintptr_t)ctx == 0x1000) return 201; /* the primary context: CUDA_ERROR_INVALID_CONTEXT */
    destroy_context((uintptr_t)ctx);
    return 0;
}

/* Fork: like the driver, the fake never leaves a child a lock another thread held at the
 * fork (its locks are never nested, so the order here is free). */
static void fork_prepare(void) {
    pthread_mutex_lock(&streams_lock);
    pthread_mutex_lock(&vmm_lock);
    pthread_mutex_lock(&pool_lock);
}
static void fork_release(void) {
    pthread_mutex_unlock(&pool_lock);
    pthread_mutex_unlock(&vmm_lock);
    pthread_mutex_unlock(&streams_lock);
}
__attribute__((constructor)) static void fork_safe_locks(void) { pthread_atfork(fork_prepare, fork_release, fork_release); }

#include "linker.c"
#include "canary.c"
