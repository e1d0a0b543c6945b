// Two co-tenants for the containment comparison (issue 18), driver-API programs that load
// PTX, so the same binary runs natively, under MPS and as a fenced tenant of `gpusan serve`:
//
//   cotenants victim SECONDS   keeps a 64 MiB buffer on the GPU and adds 1 to every word,
//                              launch after launch, for SECONDS; then checks every word.
//                              Prints "VICTIM ok ITERS" or "VICTIM FAIL <call> <code> ITERS".
//   cotenants faulter wild     stores to an address no allocation holds (illegal address)
//   cotenants faulter trap     executes `trap`
//   cotenants launches N       N launches back to back, one synchronization: host us per
//                              launch ("LAUNCHES N us_per_launch X")
//   cotenants nops N           the same with an empty kernel (the launch path alone)
//                              Both print "FAULTER <mode> <result of cuCtxSynchronize>".
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda.h>
#include <vector>

static const char* ptx = R"(
.version 8.0
.target sm_90
.address_size 64
.visible .entry inc(.param .u64 p, .param .u32 n)
{
    .reg .pred %p<2>; .reg .b32 %r<8>; .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [p]; ld.param.u32 %r1, [n];
    mov.u32 %r2, %ctaid.x; mov.u32 %r3, %ntid.x; mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.u32 %p1, %r5, %r1;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.u32 %rd3, %r5, 4; add.s64 %rd2, %rd2, %rd3;
    ld.global.u32 %r6, [%rd2]; add.u32 %r7, %r6, 1; st.global.u32 [%rd2], %r7;
DONE:
    ret;
}
.visible .entry wild(.param .u64 at)
{
    .reg .b32 %r<2>; .reg .b64 %rd<2>;
    ld.param.u64 %rd1, [at];
    mov.u32 %r1, 0x0badf00d;
    st.global.u32 [%rd1], %r1;
    ret;
}
.visible .entry nop(.param .u64 p)
{
    ret;
}
.visible .entry trapper()
{
    trap;
    ret;
}
)";

static CUresult setup(CUmodule* m) {
    CUresult r;
    if ((r = cuInit(0))) return r;
    CUdevice d;
    if ((r = cuDeviceGet(&d, 0))) return r;
    CUcontext ctx;
    CUctxCreateParams cp = {};
    if ((r = cuCtxCreate(&ctx, &cp, 0, d))) return r;
    return cuModuleLoadData(m, ptx);
}

#define TRY(x)                                                                  \
    do {                                                                        \
        CUresult r_ = (x);                                                      \
        if (r_ != CUDA_SUCCESS) {                                               \
            printf("VICTIM FAIL %s %d %d\n", #x, (int)r_, iters);               \
            return 1;                                                           \
        }                                                                       \
    } while (0)

static int victim(double seconds) {
    int iters = 0;
    CUmodule m;
    TRY(setup(&m));
    CUfunction f;
    TRY(cuModuleGetFunction(&f, m, "inc"));
    unsigned n = 16u << 20;  // 64 MiB of u32
    CUdeviceptr p;
    TRY(cuMemAlloc(&p, n * 4ull));
    TRY(cuMemsetD8(p, 0, n * 4ull));
    void* args[] = {&p, &n};
    auto start = std::chrono::steady_clock::now();
    while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < seconds) {
        TRY(cuLaunchKernel(f, n / 256, 1, 1, 256, 1, 1, 0, 0, args, 0));
        TRY(cuCtxSynchronize());
        iters++;
    }
    std::vector<unsigned> h(n);
    TRY(cuMemcpyDtoH(h.data(), p, n * 4ull));
    size_t wrong = 0;
    for (unsigned i = 0; i < n; i++) wrong += h[i] != (unsigned)iters;
    if (wrong) {
        printf("VICTIM FAIL corrupted %zu %d\n", wrong, iters);
        return 1;
    }
    printf("VICTIM ok %d\n", iters);
    return 0;
}

static int faulter(const char* mode) {
    CUmodule m;
    CUresult r = setup(&m);
    if (r) {
        printf("FAULTER %s setup %d\n", mode, (int)r);
        return 1;
    }
    CUfunction f;
    bool trap = !strcmp(mode, "trap");
    cuModuleGetFunction(&f, m, trap ? "trapper" : "wild");
    unsigned long long at = 0x7ff0deadbe00ull;  // no allocation there
    void* args[] = {&at};
    r = cuLaunchKernel(f, 64, 1, 1, 128, 1, 1, 0, 0, trap ? nullptr : args, 0);
    if (r == CUDA_SUCCESS) r = cuCtxSynchronize();
    printf("FAULTER %s %d\n", mode, (int)r);
    return r == CUDA_SUCCESS ? 0 : 2;
}

// N launches of `inc` on a 1 MiB buffer back to back, then one synchronization: the cost
// of a launch as the program sees it (host time per launch).
static int launches(int n, const char* kernel) {
    int iters = 0;
    CUmodule m;
    TRY(setup(&m));
    CUfunction f;
    TRY(cuModuleGetFunction(&f, m, kernel));
    unsigned words = 1u << 18;
    CUdeviceptr p;
    TRY(cuMemAlloc(&p, words * 4ull));
    TRY(cuMemsetD8(p, 0, words * 4ull));
    void* args[] = {&p, &words};
    TRY(cuLaunchKernel(f, words / 256, 1, 1, 256, 1, 1, 0, 0, args, 0));
    TRY(cuCtxSynchronize());
    auto start = std::chrono::steady_clock::now();
    for (iters = 0; iters < n; iters++) TRY(cuLaunchKernel(f, words / 256, 1, 1, 256, 1, 1, 0, 0, args, 0));
    TRY(cuCtxSynchronize());
    double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    printf("LAUNCHES %d us_per_launch %.3f\n", n, us / n);
    return 0;
}

int main(int argc, char** argv) {
    if (argc >= 3 && !strcmp(argv[1], "launches")) return launches(atoi(argv[2]), "inc");
    if (argc >= 3 && !strcmp(argv[1], "nops")) return launches(atoi(argv[2]), "nop");
    if (argc >= 3 && !strcmp(argv[1], "victim")) return victim(atof(argv[2]));
    if (argc >= 3 && !strcmp(argv[1], "faulter")) return faulter(argv[2]);
    fprintf(stderr, "usage: cotenants victim SECONDS | faulter wild|trap | launches N\n");
    return 64;
}
