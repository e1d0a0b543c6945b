/* A driver-API program run as a fenced tenant (`gpusan run --mode fence --server S`) in
 * crates/cli/tests/serve.rs: allocates, copies both ways, loads a PTX module, launches,
 * synchronizes, tries a copy past its allocation, frees; then what programs do around their
 * launches: device queries, memory info, a stream and events, asynchronous copies and sets.
 * Prints its pointer and the copy's result, the queries' answers, then "tenant ok".
 * `tenant tma`: a kernel whose tensor copy reads its map from a parameter, launched with a
 * map made on its own allocation, then with one it made up. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

typedef int CUresult;
CUresult cuInit(unsigned);
CUresult cuDeviceGet(int *, int);
CUresult cuCtxCreate_v2(void **, unsigned, int);
CUresult cuMemAlloc_v2(uint64_t *, size_t);
CUresult cuMemFree_v2(uint64_t);
CUresult cuMemcpyHtoD_v2(uint64_t, const void *, size_t);
CUresult cuMemcpyDtoH_v2(void *, uint64_t, size_t);
CUresult cuModuleLoadData(void **, const void *);
CUresult cuModuleGetFunction(void **, void *, const char *);
CUresult cuLaunchKernel(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *, void **,
                        void **);
CUresult cuCtxSynchronize(void);
CUresult cuMemHostAlloc(void **, size_t, unsigned);
CUresult cuDeviceGetAttribute(int *, int, int);
CUresult cuDeviceGetName(char *, int, int);
CUresult cuDriverGetVersion(int *);
CUresult cuDeviceTotalMem_v2(size_t *, int);
CUresult cuMemGetInfo_v2(size_t *, size_t *);
CUresult cuStreamCreate(void **, unsigned);
CUresult cuStreamQuery(void *);
CUresult cuStreamDestroy_v2(void *);
CUresult cuEventCreate(void **, unsigned);
CUresult cuEventRecord(void *, void *);
CUresult cuEventSynchronize(void *);
CUresult cuEventElapsedTime_v2(float *, void *, void *);
CUresult cuEventDestroy_v2(void *);
CUresult cuMemcpyHtoDAsync_v2(uint64_t, const void *, size_t, void *);
CUresult cuMemcpyDtoHAsync_v2(void *, uint64_t, size_t, void *);
CUresult cuMemsetD32Async(uint64_t, unsigned, size_t, void *);
CUresult cuTensorMapEncodeTiled(void *, unsigned, unsigned, void *, const uint64_t *, const uint64_t *,
                                const unsigned *, const unsigned *, int, int, int, int);

static const char ptx[] =
    ".version 8.0\n.target sm_90\n.address_size 64\n"
    ".visible .entry store(.param .u64 p, .param .u32 v)\n{\n"
    "  .reg .b64 %rd<2>;\n  .reg .b32 %r<2>;\n"
    "  ld.param.u64 %rd1, [p];\n  ld.param.u32 %r1, [v];\n  st.global.u32 [%rd1], %r1;\n  ret;\n}\n";

#define CK(x)                                          \
    do {                                               \
        CUresult r_ = (x);                             \
        if (r_) {                                      \
            printf("%s failed: %d\n", #x, r_);         \
            return 1;                                  \
        }                                              \
    } while (0)

/* A file's bytes (a fatbin the test names), or NULL. */
static void *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    return n ? buf : NULL;
}

#include <dlfcn.h>

/* The driver found as Triton and cuda-python find it: dlopen, then dlsym. */
static int through_dlsym(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h) return 1;
    CUresult (*init)(unsigned) = (CUresult(*)(unsigned))dlsym(h, "cuInit");
    CUresult (*alloc)(uint64_t *, size_t) = (CUresult(*)(uint64_t *, size_t))dlsym(h, "cuMemAlloc_v2");
    CUresult (*total_mem)(size_t *, int) = (CUresult(*)(size_t *, int))dlsym(h, "cuDeviceTotalMem_v2");
    CUresult (*get_current)(void **) = (CUresult(*)(void **))dlsym(h, "cuCtxGetCurrent");
    CUresult (*primary)(void **, int) = (CUresult(*)(void **, int))dlsym(h, "cuDevicePrimaryCtxRetain");
    uint64_t p = 0;
    size_t total = 0;
    void *ctx = 0, *current = 0;
    CK(init(0));
    CK(primary(&ctx, 0));
    CK(alloc(&p, 4096));
    CK(total_mem(&total, 0));
    CK(get_current(&current));
    printf("dlsym pointer %#llx total=%zu ctx=%d\n", (unsigned long long)p, total, current != 0);
    return 0;
}

/* Which library the functions dlsym hands out live in. */
static int lookup(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    const char *names[] = {"cuEventRecord", "cuMemAlloc_v2"};
    for (int i = 0; i < 2; i++) {
        Dl_info info;
        void *f = h ? dlsym(h, names[i]) : 0;
        const char *lib = f && dladdr(f, &info) && info.dli_fname ? strrchr(info.dli_fname, '/') : 0;
        printf("%s from %s\n", names[i], lib ? lib + 1 : "?");
    }
    return 0;
}

/* The driver started, device 0 in *dev, a context made and 1 MiB allocated at *p: 0, or 1
 * (said why). */
static int start(int *dev, uint64_t *p) {
    void *ctx;
    CK(cuInit(0));
    CK(cuDeviceGet(dev, 0));
    CK(cuCtxCreate_v2(&ctx, 0, *dev));
    CK(cuMemAlloc_v2(p, 1 << 20));
    return 0;
}

/* `burst N SECONDS`: N launches back to back, then SECONDS with no driver call at all, then
 * a synchronization: launches queued on the tenant's side must reach the manager without
 * waiting for the program's next call. */
static int burst(int n, int seconds) {
    int dev;
    void *mod, *f;
    uint64_t p;
    if (start(&dev, &p)) return 1;
    CK(cuModuleLoadData(&mod, ptx));
    CK(cuModuleGetFunction(&f, mod, "store"));
    for (int i = 0; i < n; i++) {
        unsigned v = (unsigned)i;
        void *params[] = {&p, &v};
        CK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, 0, params, 0));
    }
    printf("burst sent\n");
    fflush(stdout);
    sleep((unsigned)seconds);
    CK(cuCtxSynchronize());
    unsigned last = 0;
    CK(cuMemcpyDtoH_v2(&last, p, sizeof last));
    printf("burst ok last=%u\n", last);
    return 0;
}

/* `bigcopy`: 20 MiB copied in and back, and 3 MiB read back from an offset that is not a
 * piece's: copies larger than the shared segment go through it in pieces, each at its own
 * place. Prints `bigcopy ok` when every byte came back. */
static int bigcopy(void) {
    int dev;
    uint64_t p, big;
    if (start(&dev, &p)) return 1;
    size_t n = 20u << 20, off = (5u << 20) + 12345, part = 3u << 20;
    unsigned char *in = malloc(n), *back = calloc(n, 1);
    if (!in || !back) return 1;
    for (size_t i = 0; i < n; i++) in[i] = (unsigned char)(i * 31 + (i >> 20));
    CK(cuMemAlloc_v2(&big, n));
    CK(cuMemcpyHtoD_v2(big, in, n));
    CK(cuMemcpyDtoH_v2(back, big, n));
    if (memcmp(in, back, n)) { puts("bigcopy: the copy came back different"); return 1; }
    memset(back, 0, n);
    CK(cuMemcpyDtoH_v2(back, big + off, part));
    if (memcmp(in + off, back, part)) { puts("bigcopy: the offset copy came back different"); return 1; }
    puts("bigcopy ok");
    return 0;
}

static const char tma_ptx[] =
    ".version 8.0\n.target sm_90\n.address_size 64\n.shared .align 128 .b8 tile[4096];\n"
    ".visible .entry put(.param .align 64 .b8 put_map[128], .param .u32 put_x)\n{\n"
    "  .reg .b64 %rd<3>;\n  .reg .b32 %r<3>;\n  mov.b64 %rd1, put_map;\n  ld.param.u32 %r1, [put_x];\n"
    "  cvta.param.u64 %rd2, %rd1;\n  mov.u32 %r2, tile;\n"
    "  cp.async.bulk.tensor.1d.global.shared::cta.bulk_group [%rd2, {%r1}], [%r2];\n  ret;\n}\n";

/* `tma`: a map on the tenant's own allocation is made and runs; a map past the partition is
 * refused; a launch with a map the tenant wrote itself fails its synchronization. */
static int tma(void) {
    int dev;
    uint64_t p;
    void *mod, *f;
    if (start(&dev, &p)) return 1;
    CK(cuModuleLoadData(&mod, tma_ptx));
    CK(cuModuleGetFunction(&f, mod, "put"));
    _Alignas(64) unsigned char map[128];
    uint64_t dims[1] = {1024};
    unsigned box[1] = {32}, estrides[1] = {1};
    CK(cuTensorMapEncodeTiled(map, 7, 1, (void *)(uintptr_t)p, dims, 0, box, estrides, 0, 0, 0, 0));
    unsigned x = 0;
    void *args[] = {map, &x};
    CK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, 0, args, 0));
    CK(cuCtxSynchronize());
    uint64_t far_dims[1] = {1ull << 40};
    CUresult past = cuTensorMapEncodeTiled(map, 7, 1, (void *)(uintptr_t)p, far_dims, 0, box, estrides, 0, 0, 0, 0);
    _Alignas(64) unsigned char forged[128];
    memcpy(forged, map, sizeof forged);
    forged[7] ^= 0x40; /* the address moved far away */
    void *forged_args[] = {forged, &x};
    CK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, 0, forged_args, 0));
    CUresult sync = cuCtxSynchronize();
    printf("tma made=ok past=%d forged_sync=%d\n", past, sync);
    return 0;
}

/* `syncloop N`: N launches each followed by a synchronization, as a program that waits
 * for every kernel does; prints the nanoseconds per launch and synchronization. */
static int syncloop(long n) {
    int dev;
    uint64_t p;
    void *mod, *f;
    if (start(&dev, &p)) return 1;
    CK(cuModuleLoadData(&mod, ptx));
    CK(cuModuleGetFunction(&f, mod, "store"));
    unsigned v = 1;
    void *args[] = {&p, &v};
    struct timespec a, b;
    for (int warm = 0; warm < 2; warm++) {
        long rounds = warm ? n : n / 10 + 1;
        clock_gettime(CLOCK_MONOTONIC, &a);
        for (long i = 0; i < rounds; i++) {
            CK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, 0, args, 0));
            CK(cuCtxSynchronize());
        }
        clock_gettime(CLOCK_MONOTONIC, &b);
        if (warm) printf("syncloop ns_per_iteration=%.0f\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / rounds);
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "bigcopy")) return bigcopy();
    if (argc > 3 && !strcmp(argv[1], "burst")) return burst(atoi(argv[2]), atoi(argv[3]));
    if (argc > 1 && !strcmp(argv[1], "dlsym")) return through_dlsym();
    if (argc > 1 && !strcmp(argv[1], "lookup")) return lookup();
    if (argc > 1 && !strcmp(argv[1], "tma")) return tma();
    if (argc > 2 && !strcmp(argv[1], "syncloop")) return syncloop(atol(argv[2]));
    int dev;
    void *mod, *f;
    uint64_t p;
    if (start(&dev, &p)) return 1;
    char buf[256], back[256] = {0};
    memset(buf, 7, sizeof buf);
    CK(cuMemcpyHtoD_v2(p, buf, sizeof buf));
    CK(cuMemcpyDtoH_v2(back, p, sizeof back));
    if (memcmp(buf, back, sizeof buf)) {
        puts("the copy came back different");
        return 1;
    }
    CK(cuModuleLoadData(&mod, ptx));
    CK(cuModuleGetFunction(&f, mod, "store"));
    unsigned v = 5;
    void *params[] = {&p, &v};
    CK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, 0, params, 0));
    CK(cuCtxSynchronize());
    CUresult past = cuMemcpyHtoD_v2(p + (2u << 20), buf, sizeof buf);
    printf("pointer %#llx past=%d\n", (unsigned long long)p, past);

    int cc = 0, version = 0;
    char name[64] = {0};
    size_t total = 0, free_ = 0, total2 = 0;
    void *s = 0, *e0 = 0, *e1 = 0;
    CK(cuDeviceGetAttribute(&cc, 75, dev));
    CK(cuDeviceGetName(name, sizeof name, dev));
    CK(cuDriverGetVersion(&version));
    CK(cuDeviceTotalMem_v2(&total, dev));
    CK(cuMemGetInfo_v2(&free_, &total2));
    printf("cc=%d name=%s version=%d total=%zu free<total=%d same=%d\n", cc, name, version, total,
           free_ < total2, total == total2);
    CK(cuStreamCreate(&s, 1));
    CK(cuEventCreate(&e0, 0));
    CK(cuEventCreate(&e1, 0));
    CK(cuEventRecord(e0, s));
    unsigned words[64], back32[64];
    for (int i = 0; i < 64; i++) words[i] = i;
    CK(cuMemcpyHtoDAsync_v2(p, words, sizeof words, s));
    CK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, params, 0));
    CK(cuMemsetD32Async(p + 128, 0xabcdef01u, 16, s));
    CK(cuMemcpyDtoHAsync_v2(back32, p, sizeof back32, s));
    CK(cuEventRecord(e1, s));
    CK(cuEventSynchronize(e1));
    float ms = -1;
    CK(cuEventElapsedTime_v2(&ms, e0, e1));
    int set_ok = 1;
    for (int i = 32; i < 48; i++) set_ok &= back32[i] == 0xabcdef01u;
    printf("stream query=%d elapsed>=0=%d copied=%d set=%d\n", cuStreamQuery(s), ms >= 0, back32[63] == 63, set_ok);
    CK(cuEventDestroy_v2(e0));
    CK(cuEventDestroy_v2(e1));
    CK(cuStreamDestroy_v2(s));
    CK(cuMemFree_v2(p));
    /* Not forwarded: it fails as with no driver, and the report names it. */
    void *pinned = 0;
    printf("hostalloc=%d\n", cuMemHostAlloc(&pinned, 4096, 0));
    if (argc > 1) {
        void *fatbin = slurp(argv[1]), *fm = 0, *ff = 0;
        CK(fatbin ? cuModuleLoadData(&fm, fatbin) : 1);
        CK(cuModuleGetFunction(&ff, fm, "_Z3addPfPKfi"));
        puts("fatbin module ok");
    }
    puts("tenant ok");
    return 0;
}
