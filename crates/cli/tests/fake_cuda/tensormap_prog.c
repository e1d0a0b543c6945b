/* Tensor maps made through the fake driver, for tests of gpusan's bounds on them
 * (float32 unless said; A is 1024 bytes, B 512, C 1024, all from cuMemAlloc):
 *   tensormap_prog exact         16 × 16 rows 64 bytes apart on A (all of it), and 16 × 8
 *                                from A + 512 (its second half)
 *   tensormap_prog element_over  17 × 16 rows 64 apart on A: 4 bytes past its end
 *   tensormap_prog row_over      16 × 17 on A: a row past its end
 *   tensormap_prog im2col_exact  fp16 [8, 4, 8] strides [16, 64] (Im2col) on B: all of it
 *   tensormap_prog im2col_over   fp16 [8, 4, 9] on B: a slice past its end
 *   tensormap_prog wide_exact    the same as im2col_exact by cuTensorMapEncodeIm2colWide
 *   tensormap_prog wide_over     the same as im2col_over by cuTensorMapEncodeIm2colWide
 *   tensormap_prog freed         A freed, then a 4-element map on it
 *   tensormap_prog unknown       a 1 MiB map on host memory gpusan never saw allocated
 *   tensormap_prog refused       rank 0 (the driver refuses it), then rank 6
 *   tensormap_prog replace_over  the exact map of A moved to B (too small for it)
 *   tensormap_prog replace_ok    the exact map of A moved to C
 *   tensormap_prog replace_copy  the exact map of A copied, the copy moved to B
 *   tensormap_prog getproc_over  element_over through cuGetProcAddress's answer
 *   tensormap_prog dlsym_over    element_over through dlsym's answer
 * Prints each call's result and the map's address and first dim (as the driver wrote them),
 * then `SCENARIO done rc=N`. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
CUresult cuInit(unsigned);
CUresult cuMemAlloc_v2(uint64_t *, size_t);
CUresult cuMemFree_v2(uint64_t);
CUresult cuGetProcAddress_v2(const char *, void **, int, uint64_t, int *);
typedef CUresult (*tiled_fn)(uint64_t *, unsigned, unsigned, void *, const uint64_t *, const uint64_t *,
                             const unsigned *, const unsigned *, int, int, int, int);
CUresult cuTensorMapEncodeTiled(uint64_t *, unsigned, unsigned, void *, const uint64_t *, const uint64_t *,
                                const unsigned *, const unsigned *, int, int, int, int);
CUresult cuTensorMapEncodeIm2col(uint64_t *, unsigned, unsigned, void *, const uint64_t *, const uint64_t *,
                                 const int *, const int *, unsigned, unsigned, const unsigned *, int, int, int, int);
CUresult cuTensorMapEncodeIm2colWide(uint64_t *, unsigned, unsigned, void *, const uint64_t *, const uint64_t *, int,
                                     int, unsigned, unsigned, const unsigned *, int, int, int, int, int);
CUresult cuTensorMapReplaceAddress(uint64_t *, void *);

enum { FLOAT16 = 6, FLOAT32 = 7 };
static _Alignas(64) uint64_t map[16], copy[16];
static const unsigned box[5] = {16, 8, 1, 1, 1}, estrides[5] = {1, 1, 1, 1, 1};

static int show(const char *what, CUresult r, const uint64_t *tm) {
    printf("%s r=%d address=%#lx dim0=%lu\n", what, r, (unsigned long)tm[0], (unsigned long)tm[3]);
    return r;
}
static int tiled(tiled_fn f, uint64_t a, uint64_t d0, uint64_t d1) {
    const uint64_t dims[2] = {d0, d1}, strides[1] = {64};
    return show("tiled", f(map, FLOAT32, 2, (void *)(uintptr_t)a, dims, strides, box, estrides, 0, 0, 0, 0), map);
}
static int im2col(uint64_t b, uint64_t slices, int wide) {
    const uint64_t dims[3] = {8, 4, slices}, strides[2] = {16, 64};
    const int lower[1] = {0}, upper[1] = {0};
    CUresult r = wide ? cuTensorMapEncodeIm2colWide(map, FLOAT16, 3, (void *)(uintptr_t)b, dims, strides, 0, 0, 8, 4,
                                                    estrides, 0, 0, 0, 0, 0)
                      : cuTensorMapEncodeIm2col(map, FLOAT16, 3, (void *)(uintptr_t)b, dims, strides, lower, upper,
                                                8, 4, estrides, 0, 0, 0, 0);
    return show(wide ? "im2colwide" : "im2col", r, map);
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    const char *s = argv[1];
    uint64_t a = 0, b = 0, c = 0;
    int rc = cuInit(0) | cuMemAlloc_v2(&a, 1024) | cuMemAlloc_v2(&b, 512) | cuMemAlloc_v2(&c, 1024);
    tiled_fn f = cuTensorMapEncodeTiled;
    if (!strcmp(s, "exact")) {
        rc |= tiled(f, a, 16, 16) | tiled(f, a + 512, 16, 8);
    } else if (!strcmp(s, "element_over")) {
        rc |= tiled(f, a, 17, 16);
    } else if (!strcmp(s, "row_over")) {
        rc |= tiled(f, a, 16, 17);
    } else if (!strcmp(s, "im2col_exact") || !strcmp(s, "wide_exact")) {
        rc |= im2col(b, 8, s[0] == 'w');
    } else if (!strcmp(s, "im2col_over") || !strcmp(s, "wide_over")) {
        rc |= im2col(b, 9, s[0] == 'w');
    } else if (!strcmp(s, "freed")) {
        rc |= cuMemFree_v2(a) | tiled(f, a, 4, 1);
    } else if (!strcmp(s, "unknown")) {
        void *host = malloc(64);
        rc |= tiled(f, (uintptr_t)host, 1 << 16, 4);
        free(host);
    } else if (!strcmp(s, "refused")) {
        const uint64_t dims[6] = {1 << 20, 1, 1, 1, 1, 1}, strides[5] = {1 << 22, 16, 16, 16, 16};
        int r0 = show("rank0", cuTensorMapEncodeTiled(map, FLOAT32, 0, (void *)(uintptr_t)a, dims, strides, box,
                                                      estrides, 0, 0, 0, 0), map);
        int r6 = show("rank6", cuTensorMapEncodeTiled(map, FLOAT32, 6, (void *)(uintptr_t)a, dims, strides, box,
                                                      estrides, 0, 0, 0, 0), map);
        rc |= !(r0 == 1 && r6 == 1);
    } else if (!strcmp(s, "replace_over") || !strcmp(s, "replace_ok")) {
        rc |= tiled(f, a, 16, 16);
        uint64_t to = !strcmp(s, "replace_ok") ? c : b;
        rc |= show("replace", cuTensorMapReplaceAddress(map, (void *)(uintptr_t)to), map);
    } else if (!strcmp(s, "replace_copy")) {
        rc |= tiled(f, a, 16, 16);
        memcpy(copy, map, sizeof copy);
        memset(map, 0, sizeof map);
        rc |= show("replace", cuTensorMapReplaceAddress(copy, (void *)(uintptr_t)b), copy);
    } else if (!strcmp(s, "getproc_over")) {
        void *p = 0;
        int status = -1;
        rc |= cuGetProcAddress_v2("cuTensorMapEncodeTiled", &p, 12000, 0, &status) | status;
        rc |= p ? tiled((tiled_fn)p, a, 17, 16) : 1;
    } else if (!strcmp(s, "dlsym_over")) {
        void *h = dlopen("libcuda.so.1", RTLD_NOW);
        void *p = h ? dlsym(h, "cuTensorMapEncodeTiled") : 0;
        rc |= p ? tiled((tiled_fn)p, a, 17, 16) : 1;
    } else {
        rc = 99;
    }
    printf("%s done rc=%d\n", s, rc);
    return 0;
}
