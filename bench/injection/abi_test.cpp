// Device-ABI test for the GPU machine: a hand-written PTX kernel does what instrumented
// kernels will do. Thread (0,0) reads gpusan's allocation table (magic, number of entries);
// block 2 / thread 5 writes one error record (a 4-byte write 4 bytes past the end of a
// 1024-byte allocation). Run under `gpusan run`: the table must list the 3 live
// allocations and the report must name the kernel, block, thread and PTX line. Natively
// the ABI variables stay 0 and the kernel does nothing. Prints the table it saw.
#include <cstdio>
#include <cuda.h>
static const char* ptx = R"(
.version 8.0
.target sm_90
.address_size 64
.visible .global .align 8 .u64 __gpusan_table;
.visible .global .align 8 .u64 __gpusan_errors;
.visible .global .align 4 .u32 __gpusan_module;
.visible .entry abi_probe(.param .u64 out, .param .u64 bad)
{
    .reg .pred %p<4>; .reg .b32 %r<12>; .reg .b64 %rd<12>;
    ld.param.u64 %rd1, [out]; ld.param.u64 %rd2, [bad];
    mov.u32 %r1, %ctaid.x; mov.u32 %r2, %tid.x;
    or.b32 %r3, %r1, %r2; setp.ne.u32 %p1, %r3, 0;
    @%p1 bra SKIP_TABLE;
    ld.global.u64 %rd3, [__gpusan_table];
    setp.eq.u64 %p2, %rd3, 0;
    @%p2 bra SKIP_TABLE;
    ld.global.u32 %r4, [%rd3]; ld.global.u64 %rd4, [%rd3+8];
    cvt.u64.u32 %rd5, %r4; st.global.u64 [%rd1], %rd5; st.global.u64 [%rd1+8], %rd4;
SKIP_TABLE:
    setp.ne.u32 %p1, %r1, 2; setp.ne.u32 %p2, %r2, 5; or.pred %p1, %p1, %p2;
    @%p1 bra DONE;
    ld.global.u64 %rd6, [__gpusan_errors];
    setp.eq.u64 %p3, %rd6, 0;
    @%p3 bra DONE;
    mov.u32 %r9, 1;
    atom.global.add.u32 %r5, [%rd6], %r9;
    ld.global.u32 %r6, [%rd6+4];
    setp.ge.u32 %p1, %r5, %r6;
    @%p1 bra DONE;
    mul.wide.u32 %rd7, %r5, 64; add.s64 %rd8, %rd6, %rd7; add.s64 %rd8, %rd8, 16;
    mov.u64 %rd9, 0; mov.u32 %r10, 0; mov.u32 %r11, 4;
    st.global.u64 [%rd8], %rd2; st.global.u64 [%rd8+8], %rd9;
    ld.global.u32 %r7, [__gpusan_module]; shl.b32 %r8, %r7, 16;
    st.global.u32 [%rd8+16], %r8; st.global.u32 [%rd8+20], %r9; st.global.u32 [%rd8+24], %r11;
    mov.u32 %r11, 42; st.global.u32 [%rd8+28], %r11;
    st.global.u32 [%rd8+32], %r1; st.global.u32 [%rd8+36], %r10; st.global.u32 [%rd8+40], %r10;
    st.global.u32 [%rd8+44], %r2; st.global.u32 [%rd8+48], %r10; st.global.u32 [%rd8+52], %r10;
    st.global.u32 [%rd8+56], %r10; st.global.u32 [%rd8+60], %r9;
DONE:
    ret;
}
)";
#define CK(x) do { CUresult r = (x); if (r != CUDA_SUCCESS) { printf("FAIL %s = %d\n", #x, r); return 1; } } while (0)
int main() {
    CK(cuInit(0)); CUdevice d; CK(cuDeviceGet(&d, 0));
    CUcontext ctx; CUctxCreateParams cp = {}; CK(cuCtxCreate(&ctx, &cp, 0, d));
    CUmodule m; CK(cuModuleLoadData(&m, ptx));
    CUfunction f; CK(cuModuleGetFunction(&f, m, "abi_probe"));
    CUdeviceptr out, x, y; CK(cuMemAlloc(&out, 16)); CK(cuMemAlloc(&x, 1024)); CK(cuMemAlloc(&y, 4096));
    CK(cuMemsetD8(out, 0, 16));
    CUdeviceptr bad = x + 1024 + 4;
    void* args[] = {&out, &bad};
    CK(cuLaunchKernel(f, 4, 1, 1, 32, 1, 1, 0, 0, args, 0));
    CK(cuCtxSynchronize());
    unsigned long long h[2]; CK(cuMemcpyDtoH(h, out, 16));
    printf("table magic=0x%llx entries=%llu\n", h[0], h[1]);
    CK(cuMemFree(out)); CK(cuMemFree(x)); CK(cuMemFree(y));
    printf("OK\n");
    return 0;
}
