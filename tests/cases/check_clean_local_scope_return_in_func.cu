// gpusan-case: check
// expect: clean
// expect-leak: none
// compute-sanitizer: no
// what: the twin of check_bug_local_scope_return_in_func: __noinline__ functions that return
//       what may be returned from a function with a frame of its own: a pointer into
//       their caller's array (passed down), a value read from their own local array, and
//       the distance between two pointers into it; a second function reads through the
//       returned pointer. The results are compared with the host's
#include "case.h"
__device__ __host__ __noinline__ int* slot(int* caller, const int* idx, int n) {
    volatile int own[16];
    for (int i = 0; i < 16; i++) own[(i * idx[0]) & 15] = i * n;
    return caller + (own[idx[1] & 15] & 7);  // the caller's array: live after the return
}
__device__ __host__ __noinline__ int last(const int* idx, int n) {
    int own[16];
    for (int i = 0; i < 16; i++) own[(i * idx[0] + n) & 15] = i + n;
    return own[idx[2]];  // idx[2] == 15: its own array's last element, by value
}
__device__ __host__ __noinline__ long span(const int* idx, int n) {
    int own[16];
    for (int i = 0; i < 16; i++) own[(i * idx[0] + n) & 15] = i;
    int* a = &own[own[idx[1] & 15] & 15];
    int* b = &own[idx[2]];
    return b - a;  // a distance, not an address
}
__device__ __host__ __noinline__ int relay(const int* idx, int n) {
    int mine[8];
    for (int i = 0; i < 8; i++) mine[(i * idx[0] + n) & 7] = 3 * i;
    int* p = slot(mine, idx, n);
    return *p + last(idx, n) + (int)span(idx, n);
}
__global__ void k(const int* idx, int* out) { out[threadIdx.x] = relay(idx, threadIdx.x); }
int main() {
    const int threads = 32;
    int h[3] = {3, 5, 15};
    int *idx, *out, res[threads];
    CK(cudaMalloc(&idx, sizeof h));
    CK(cudaMalloc(&out, sizeof res));
    CK(cudaMemcpy(idx, h, sizeof h, cudaMemcpyHostToDevice));
    k<<<1, threads>>>(idx, out);
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(res, out, sizeof res, cudaMemcpyDeviceToHost));
    bool ok = true;
    for (int t = 0; t < threads; t++) ok = ok && res[t] == relay(h, t);
    CK(cudaFree(idx));
    CK(cudaFree(out));
    DONE(ok);
}
