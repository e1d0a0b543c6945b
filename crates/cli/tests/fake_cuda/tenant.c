/* A driver-API program run as a fenced tenant (`gpusan run --mode fence --server S`) in
 * crates/cli/tests/serve.rs: allocates, copies both ways, loads a PTX module, launches,
 * synchronizes, tries a copy past its allocation, frees. Prints its pointer and the copy's
 * result, then "tenant ok". */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

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

int main(void) {
    int dev;
    void *ctx, *mod, *f;
    uint64_t p;
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    CK(cuCtxCreate_v2(&ctx, 0, dev));
    CK(cuMemAlloc_v2(&p, 1 << 20));
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
    CK(cuMemFree_v2(p));
    puts("tenant ok");
    return 0;
}
