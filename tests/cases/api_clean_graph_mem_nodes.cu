// gpusan-case: api
// expect: clean
// expect-leak: none
// compute-sanitizer: no
// what: a graph built by hand with a memory allocation node, a kernel writing the allocation,
//       a memcpy node copying it out, and a free node, launched 10 times (the allocation is
//       freed at the end of each launch and comes back at the same address at the next);
//       then the same through stream capture (cudaMallocAsync / cudaFreeAsync)
#include "case.h"
__global__ void fill_idx(int* p, int n, int round) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = i + round;
}
int main() {
    const int n = 4096;
    int* out;
    CK(cudaMalloc(&out, n * sizeof(int)));
    cudaGraph_t g;
    CK(cudaGraphCreate(&g, 0));
    cudaMemAllocNodeParams ap = {};
    ap.poolProps.allocType = cudaMemAllocationTypePinned;
    ap.poolProps.location.type = cudaMemLocationTypeDevice;
    ap.poolProps.location.id = 0;
    ap.bytesize = n * sizeof(int);
    cudaGraphNode_t an, kn, cn, fn;
    CK(cudaGraphAddMemAllocNode(&an, g, nullptr, 0, &ap));
    int* buf = (int*)ap.dptr;
    int nn = n, round = 7;
    void* args[] = {&buf, &nn, &round};
    cudaKernelNodeParams kp = {};
    kp.func = (void*)fill_idx;
    kp.gridDim = dim3((n + 255) / 256);
    kp.blockDim = dim3(256);
    kp.kernelParams = args;
    CK(cudaGraphAddKernelNode(&kn, g, &an, 1, &kp));
    CK(cudaGraphAddMemcpyNode1D(&cn, g, &kn, 1, out, buf, n * sizeof(int), cudaMemcpyDeviceToDevice));
    CK(cudaGraphAddMemFreeNode(&fn, g, &cn, 1, buf));
    cudaGraphExec_t ge;
    CK(cudaGraphInstantiate(&ge, g, 0));
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    for (int r = 0; r < 10; r++) CK(cudaGraphLaunch(ge, s));
    CK(cudaStreamSynchronize(s));
    static int h[n];
    CK(cudaMemcpy(h, out, n * sizeof(int), cudaMemcpyDeviceToHost));
    bool ok = true;
    for (int i = 0; i < n; i++) ok &= h[i] == i + 7;
    // Stream capture: allocation, kernel, copy out, free, all inside the graph.
    cudaGraph_t cg;
    cudaGraphExec_t cge;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    int* tmp;
    CK(cudaMallocAsync(&tmp, n * sizeof(int), s));
    fill_idx<<<(n + 255) / 256, 256, 0, s>>>(tmp, n, 3);
    CK(cudaMemcpyAsync(out, tmp, n * sizeof(int), cudaMemcpyDeviceToDevice, s));
    CK(cudaFreeAsync(tmp, s));
    CK(cudaStreamEndCapture(s, &cg));
    CK(cudaGraphInstantiate(&cge, cg, 0));
    for (int r = 0; r < 10; r++) CK(cudaGraphLaunch(cge, s));
    CK(cudaStreamSynchronize(s));
    CK(cudaMemcpy(h, out, n * sizeof(int), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) ok &= h[i] == i + 3;
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphExecDestroy(cge));
    CK(cudaGraphDestroy(g));
    CK(cudaGraphDestroy(cg));
    CK(cudaDeviceGraphMemTrim(0));
    CK(cudaStreamDestroy(s));
    CK(cudaFree(out));
    DONE(ok);
}
