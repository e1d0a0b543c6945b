// gpusan-case: check
// expect: clean
// expect-leak: none
// compute-sanitizer: no
// what: local addresses that stay live across calls: the kernel's array passed down to a
//       __noinline__ function and handed back (returned, and stored into the kernel's
//       variable), a loop doing that once per element, a recursive function (own local
//       array, ABI frames) returning a pointer into the kernel's array, and a global
//       address returned the same way; the results are compared with the host's
#include "case.h"
__device__ __noinline__ int* step(int* p, int k, int v) {
    p[k] += v;  // the caller's array, passed down
    return p + k;
}
__device__ __noinline__ void pick(int** out, int* p, int k) { *out = p + k; }
__device__ __noinline__ int* deep(int* p, const int* idx, int depth) {
    volatile int own[8];  // a frame of its own at every level
    for (int i = 0; i < 8; i++) own[(i * idx[0]) & 7] = depth + i;
    if (depth == 0) return p + (own[idx[1] & 7] & 7);
    return deep(p, idx, depth - 1) + 1;
}
__device__ __noinline__ int* global_slot(int* out, int t) { return out + 32 + t; }
__global__ void k(const int* idx, int* out) {
    int t = threadIdx.x;
    int a[24];
    for (int i = 0; i < 24; i++) a[(i * idx[0] + t) % 24] = i;
    int s = 0;
#pragma unroll 1
    for (int i = 0; i < 16; i++) {  // a local array in a loop, through call results
        int* p = step(a, (i * idx[2] + t) % 16, i);
        s += p[idx[3] & 7];
    }
    int* q;
    pick(&q, a, t & 15);
    s += q[idx[4] & 7];  // a loaded pointer into the kernel's own array
    int* r = deep(a, idx, idx[5] & 3);
    s += *r;  // recursion: a pointer into the kernel's array, through four frames
    int* g = global_slot(out, t);
    *g = s;  // global memory through a call result
    out[t] = a[23];
}
static int host_run(const int* h, int t, int* last) {
    int a[24];
    for (int i = 0; i < 24; i++) a[(i * h[0] + t) % 24] = i;
    int s = 0;
    for (int i = 0; i < 16; i++) {
        int k = (i * h[2] + t) % 16;
        a[k] += i;
        s += a[k + (h[3] & 7)];
    }
    s += a[(t & 15) + (h[4] & 7)];
    int own[8];
    for (int i = 0; i < 8; i++) own[(i * h[0]) & 7] = i;  // depth 0
    s += a[(own[h[1] & 7] & 7) + (h[5] & 3)];
    *last = a[23];
    return s;
}
int main() {
    const int threads = 32;
    int h[6] = {5, 6, 3, 7, 5, 3};
    int *idx, *out, res[2 * threads];
    CK(cudaMalloc(&idx, sizeof h));
    CK(cudaMalloc(&out, sizeof res));
    CK(cudaMemcpy(idx, h, sizeof h, cudaMemcpyHostToDevice));
    k<<<1, threads>>>(idx, out);
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(res, out, sizeof res, cudaMemcpyDeviceToHost));
    bool ok = true;
    for (int t = 0; t < threads; t++) {
        int last;
        int s = host_run(h, t, &last);
        ok = ok && res[32 + t] == s && res[t] == last;
    }
    CK(cudaFree(idx));
    CK(cudaFree(out));
    DONE(ok);
}
