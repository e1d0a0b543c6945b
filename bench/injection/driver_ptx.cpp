// Driver-API program for the injection probe: loads PTX text with cuModuleLoadData and
// launches it with cuLaunchKernel. Links against libcuda. Prints OK when right.
#include <cstdio>
#include <cuda.h>
static const char* ptx = R"(
.version 8.0
.target sm_90
.address_size 64
.visible .entry twice(.param .u64 p, .param .u32 n)
{
    .reg .pred %p<2>; .reg .b32 %r<6>; .reg .b64 %rd<4>; .reg .f32 %f<3>;
    ld.param.u64 %rd1, [p]; ld.param.u32 %r1, [n];
    mov.u32 %r2, %ctaid.x; mov.u32 %r3, %ntid.x; mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.s32 %p1, %r5, %r1;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.s32 %rd3, %r5, 4; add.s64 %rd2, %rd2, %rd3;
    ld.global.f32 %f1, [%rd2]; add.f32 %f2, %f1, %f1; st.global.f32 [%rd2], %f2;
DONE:
    ret;
}
)";
#define CK(x) do { CUresult r = (x); if (r != CUDA_SUCCESS) { printf("FAIL %s = %d\n", #x, r); return 1; } } while (0)
int main() {
    CK(cuInit(0)); CUdevice d; CK(cuDeviceGet(&d, 0));
    CUcontext ctx; CUctxCreateParams cp = {}; CK(cuCtxCreate(&ctx, &cp, 0, d));
    CUmodule m; CK(cuModuleLoadData(&m, ptx));
    CUfunction f; CK(cuModuleGetFunction(&f, m, "twice"));
    int n = 4096; float h[4096]; for (int i = 0; i < n; i++) h[i] = i;
    CUdeviceptr p; CK(cuMemAlloc(&p, n * 4)); CK(cuMemcpyHtoD(p, h, n * 4));
    void* args[] = {&p, &n};
    CK(cuLaunchKernel(f, n / 256, 1, 1, 256, 1, 1, 0, 0, args, 0));
    CK(cuCtxSynchronize()); CK(cuMemcpyDtoH(h, p, n * 4)); CK(cuMemFree(p));
    bool ok = true; for (int i = 0; i < n; i++) ok &= h[i] == 2.0f * i;
    printf("%s\n", ok ? "OK" : "WRONG");
    return ok ? 0 : 1;
}
