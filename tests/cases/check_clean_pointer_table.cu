// gpusan-case: check
// expect: clean
// expect-leak: none
// compute-sanitizer: no
// what: a device array of 16 device pointers (buffers of different sizes, each with its length
//       in a second table); a kernel follows each pointer and writes within its length
#include "case.h"
__global__ void fill_all(int** bufs, const int* lens, int count) {
    int b = blockIdx.x;
    if (b >= count) return;
    for (int i = threadIdx.x; i < lens[b]; i += blockDim.x) bufs[b][i] = b * 10000 + i;
}
int main() {
    const int count = 16;
    int* hb[count];
    int hl[count];
    for (int b = 0; b < count; b++) {
        hl[b] = 100 + 37 * b;
        CK(cudaMalloc(&hb[b], hl[b] * sizeof(int)));
    }
    int** bufs;
    int* lens;
    CK(cudaMalloc(&bufs, sizeof hb));
    CK(cudaMalloc(&lens, sizeof hl));
    CK(cudaMemcpy(bufs, hb, sizeof hb, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(lens, hl, sizeof hl, cudaMemcpyHostToDevice));
    fill_all<<<count, 64>>>(bufs, lens, count);
    bool ok = true;
    static int back[1000];
    for (int b = 0; b < count; b++) {
        CK(cudaMemcpy(back, hb[b], hl[b] * sizeof(int), cudaMemcpyDeviceToHost));
        for (int i = 0; i < hl[b]; i++) ok &= back[i] == b * 10000 + i;
        CK(cudaFree(hb[b]));
    }
    CK(cudaFree(bufs));
    CK(cudaFree(lens));
    DONE(ok);
}
