/* A program whose every call must get the driver's own answer whatever happens inside
 * gpusan (tests/boundary.rs makes gpusan panic at a named place). usage: boundary_prog
 * DOOR, DOOR = link | dlsym | next | getproc: how it finds the driver's functions (linked
 * names, dlsym on libcuda, dlsym(RTLD_NEXT) from the program, cuGetProcAddress). It prints
 * what each call answered and how often the driver was reached, then exits 7, its own code. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef int (*alloc_t)(uint64_t *, size_t);
typedef int (*free_t)(uint64_t);
typedef int (*htod_t)(uint64_t, const void *, size_t);
typedef int (*dtoh_t)(void *, uint64_t, size_t);
typedef int (*getproc_t)(const char *, void **, int, uint64_t, int *);

int cuInit(unsigned);
int cuMemAlloc_v2(uint64_t *, size_t);
int cuMemFree_v2(uint64_t);
int cuMemcpyHtoD_v2(uint64_t, const void *, size_t);
int cuMemcpyDtoH_v2(void *, uint64_t, size_t);
int fake_alloc_calls(void);
int fake_getproc_calls(void);

/* cudart refusing a call itself (fake_cuda/libsanitizer.c plays it when gpusan subscribed
 * to the Sanitizer API; without it, the result as cudart gave it). */
static int runtime_call(uint32_t cbid, const void *params, int result) {
    int (*call)(uint32_t, const void *, int) = (int (*)(uint32_t, const void *, int))dlsym(RTLD_DEFAULT, "fake_runtime_call");
    return call ? call(cbid, params, result) : result;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    const char *door = argv[1];
    alloc_t alloc_ = cuMemAlloc_v2;
    free_t free_ = cuMemFree_v2;
    htod_t htod = cuMemcpyHtoD_v2;
    dtoh_t dtoh = cuMemcpyDtoH_v2;
    int missing = -1;
    if (strcmp(door, "link")) {
        void *h = !strcmp(door, "next") ? RTLD_NEXT : dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        getproc_t gp = !strcmp(door, "getproc") ? (getproc_t)dlsym(h, "cuGetProcAddress_v2") : 0;
        void *f[5] = {0};
        const char *names[5] = {"cuMemAlloc", "cuMemFree", "cuMemcpyHtoD", "cuMemcpyDtoH", "cuNoSuchFunction"};
        const char *versioned[5] = {"cuMemAlloc_v2", "cuMemFree_v2", "cuMemcpyHtoD_v2", "cuMemcpyDtoH_v2", "cuNoSuchFunction"};
        for (int i = 0; i < 5; i++) {
            if (gp) {
                int r = gp(names[i], &f[i], 13000, 0, 0);
                if (i == 4) missing = r; /* the driver's own refusal */
            } else {
                f[i] = dlsym(h, versioned[i]);
            }
        }
        if (!f[0] || !f[1] || !f[2] || !f[3] || f[4]) return 3;
        alloc_ = (alloc_t)f[0], free_ = (free_t)f[1], htod = (htod_t)f[2], dtoh = (dtoh_t)f[3];
    }
    if (cuInit(0)) return 4;
    uint64_t a = 0;
    unsigned char out[256], in[256] = {0};
    memset(out, 7, sizeof out);
    int alloc_r = alloc_(&a, sizeof out);
    int htod_r = htod(a, out, sizeof out), dtoh_r = dtoh(in, a, sizeof in);
    int bad_free = free_(a + 8); /* inside the block: the driver refuses it */
    int free_r = free_(a);
    /* cudaMemcpy2D with rows wider than the pitch, refused by cudart. */
    struct { uint64_t dst; size_t dpitch; uint64_t src; size_t spitch, width, height; int kind; } c2 =
        {a, 128, (uint64_t)(uintptr_t)out, 256, 256, 4, 1};
    int runtime = runtime_call(32, &c2, 12);
    printf("alloc=%d htod=%d dtoh=%d same=%d bad_free=%d free=%d runtime=%d missing=%d allocs=%d getprocs=%d\n",
           alloc_r, htod_r, dtoh_r, !memcmp(in, out, sizeof in), bad_free, free_r, runtime, missing,
           fake_alloc_calls(), fake_getproc_calls());
    return 7;
}
