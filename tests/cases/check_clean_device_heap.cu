// gpusan-case: check
// expect: clean
// expect-leak: none
// compute-sanitizer: no
// what: each thread mallocs 60 bytes on the device heap, fills exactly 15 ints, sums them and
//       frees; one block also hands a malloc'd buffer to a second kernel that frees it
#include "case.h"
__device__ int* handoff;
__global__ void work(int* out) {
    int* p = (int*)malloc(60);
    if (!p) { out[threadIdx.x] = -1; return; }
    for (int i = 0; i < 15; i++) p[i] = i + threadIdx.x;
    int s = 0;
    for (int i = 0; i < 15; i++) s += p[i];
    out[threadIdx.x] = s;
    free(p);
    if (threadIdx.x == 0) {
        handoff = (int*)malloc(16 * sizeof(int));
        if (handoff)
            for (int i = 0; i < 16; i++) handoff[i] = i;
    }
}
__global__ void finish(int* out) {
    if (handoff) {
        out[32] = handoff[15];
        free(handoff);
    }
}
int main() {
    int* d;
    int h[33];
    CK(cudaMalloc(&d, sizeof h));
    work<<<1, 32>>>(d);
    finish<<<1, 1>>>(d);
    CK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
    bool ok = h[32] == 15;
    for (int t = 0; t < 32; t++) ok &= h[t] == 105 + 15 * t;
    CK(cudaFree(d));
    DONE(ok);
}
