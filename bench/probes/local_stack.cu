// Where a __noinline__ callee's local array lies relative to its caller's, on the GPU this
// runs on. The check pass's use-after-scope check (crates/passes/src/check/onchip/scope.rs)
// rests on one fact only: a callee's local array is never inside the kernel's own frame, so
// a local address outside that frame, reached after the callee returned, is dead. It does
// *not* assume the stack grows downward, because ptxas (sm_90, -O3, seen in the SASS of
// this file) gives non-recursive callees fixed places inside the kernel's stack allocation
// (CALL.REL.NOINC, R1 unchanged: the callee's array can lie *above* the caller's), and only
// recursive callees get an ABI frame below their caller (R1 -= size).
//
// Prints one JSON line:
//   noinline_callee_below_caller   the brief's question, for a non-recursive callee
//                                  (expected false on sm_90: ptxas places it above)
//   leaf / nested / recursive      caller and callee array addresses (generic), whether
//                                  the callee's is below, and whether it is outside the
//                                  kernel's frame (`b`, 32 bytes)
//   all_local                      __isLocal holds for every address
//   design_holds                   every callee array is outside the kernel's frame and
//                                  local: what the check needs (expected true)
//
// Build and run: nvcc -arch=sm_90 -O3 -o /tmp/local_stack bench/probes/local_stack.cu && /tmp/local_stack
#include <cstdio>
#include <cuda_runtime.h>

typedef unsigned long long u64;

// Each function fills its own array (volatile: it stays in local memory) and returns the
// array's generic address as an integer, which is all the probe needs of it.
__device__ __noinline__ u64 leaf(int n) {
    volatile int a[8];
    for (int i = 0; i < 8; i++) a[i] = n + i;
    return (u64)a;
}

__device__ __noinline__ u64 inner(int n) {
    volatile int c[8];
    for (int i = 0; i < 8; i++) c[i] = n * i;
    return (u64)c;
}

// Calls `inner`: reports its own array's address and inner's.
__device__ __noinline__ u64 middle(int n, u64* inner_addr) {
    volatile int m[8];
    for (int i = 0; i < 8; i++) m[i] = n - i;
    *inner_addr = inner(n + m[n & 7]);
    return (u64)m;
}

// Recursive: at each depth records its own array's address in at[depth].
__device__ __noinline__ int rec(int depth, u64* at) {
    volatile int r[8];
    for (int i = 0; i < 8; i++) r[i] = depth + i;
    at[depth] = (u64)r;
    if (depth == 0) return r[3];
    return rec(depth - 1, at) + r[depth & 7];
}

struct Out {
    u64 kernel_frame;  // the kernel's own array
    u64 leaf, middle, inner, rec[3];
    int is_local[6];
    int sink;
};

__global__ void probe(Out* out, int n) {
    volatile int b[8];
    for (int i = 0; i < 8; i++) b[i] = n * i;
    out->kernel_frame = (u64)b;
    out->leaf = leaf(n);
    u64 in;
    out->middle = middle(n, &in);
    out->inner = in;
    u64 at[3];
    out->sink = rec(2, at) + b[n & 7];
    for (int d = 0; d < 3; d++) out->rec[d] = at[d];
    const u64 all[6] = {out->kernel_frame, out->leaf, out->middle, out->inner, out->rec[2], out->rec[0]};
    for (int i = 0; i < 6; i++) out->is_local[i] = __isLocal((const void*)all[i]) ? 1 : 0;
}

static const char* b(bool v) { return v ? "true" : "false"; }

int main() {
    Out* d;
    Out h = {};
    if (cudaMalloc(&d, sizeof h) != cudaSuccess) return 1;
    probe<<<1, 1>>>(d, 3);
    cudaError_t e = cudaDeviceSynchronize();
    if (e == cudaSuccess) e = cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost);
    cudaDeviceProp p;
    cudaGetDeviceProperties(&p, 0);
    if (e != cudaSuccess) {
        printf("{\"probe\":\"local_stack\",\"device\":\"%s\",\"error\":\"%s\"}\n", p.name, cudaGetErrorName(e));
        return 1;
    }
    const u64 frame_lo = h.kernel_frame, frame_hi = h.kernel_frame + 32;
    auto outside = [&](u64 a) { return a + 32 <= frame_lo || a >= frame_hi; };
    bool all_local = true;
    for (int i = 0; i < 6; i++) all_local = all_local && h.is_local[i];
    bool design = all_local && outside(h.leaf) && outside(h.middle) && outside(h.inner) && outside(h.rec[0]) &&
                  outside(h.rec[1]) && outside(h.rec[2]);
    printf("{\"probe\":\"local_stack\",\"device\":\"%s\",\"noinline_callee_below_caller\":%s,"
           "\"leaf\":{\"caller\":\"%#llx\",\"callee\":\"%#llx\",\"callee_below_caller\":%s,\"callee_outside_kernel_frame\":%s},"
           "\"nested\":{\"caller\":\"%#llx\",\"callee\":\"%#llx\",\"callee_below_caller\":%s,\"callee_outside_kernel_frame\":%s},"
           "\"recursive\":{\"depth2\":\"%#llx\",\"depth1\":\"%#llx\",\"depth0\":\"%#llx\",\"callee_below_caller\":%s,"
           "\"below_kernel\":%s,\"callee_outside_kernel_frame\":%s},"
           "\"all_local\":%s,\"design_holds\":%s}\n",
           p.name, b(h.leaf < h.kernel_frame), h.kernel_frame, h.leaf, b(h.leaf < h.kernel_frame), b(outside(h.leaf)),
           h.middle, h.inner, b(h.inner < h.middle), b(outside(h.inner)), h.rec[2], h.rec[1], h.rec[0],
           b(h.rec[1] < h.rec[2] && h.rec[0] < h.rec[1]), b(h.rec[2] < h.kernel_frame),
           b(outside(h.rec[0]) && outside(h.rec[1]) && outside(h.rec[2])), b(all_local), b(design));
    cudaFree(d);
    return design ? 0 : 3;
}
