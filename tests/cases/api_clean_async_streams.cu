// gpusan-case: api
// expect: clean
// expect-leak: none
// compute-sanitizer: no
// also-cudart-shared: yes
// what: cudaMallocAsync / cudaFreeAsync on two streams, copies and a kernel in between, an
//       event ordering the streams; 200 rounds
#include "case.h"
__global__ void add1(int* p, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] += 1;
}
int main() {
    const int n = 5000;
    static int h[n], back[n];
    for (int i = 0; i < n; i++) h[i] = i;
    cudaStream_t s1, s2;
    cudaEvent_t ev;
    CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    bool ok = true;
    for (int r = 0; r < 200 && ok; r++) {
        int* d;
        CK(cudaMallocAsync(&d, n * sizeof(int), s1));
        CK(cudaMemcpyAsync(d, h, n * sizeof(int), cudaMemcpyHostToDevice, s1));
        add1<<<(n + 255) / 256, 256, 0, s1>>>(d, n);
        CK(cudaEventRecord(ev, s1));
        CK(cudaStreamWaitEvent(s2, ev, 0));
        CK(cudaMemcpyAsync(back, d, n * sizeof(int), cudaMemcpyDeviceToHost, s2));
        CK(cudaFreeAsync(d, s2));
        CK(cudaStreamSynchronize(s2));
        for (int i = 0; i < n; i++) ok &= back[i] == i + 1;
    }
    CK(cudaEventDestroy(ev));
    CK(cudaStreamDestroy(s1));
    CK(cudaStreamDestroy(s2));
    DONE(ok);
}
