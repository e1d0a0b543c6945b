// gpusan-case: api
// expect: clean
// expect-leak: none
// compute-sanitizer: no
// what: a CUDA graph built by hand with a kernel node and a memcpy node (device->device,
//       whole buffer), then a captured graph (memset, kernel, copy); each launched 10 times
#include "case.h"
__global__ void inc(int* p, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] += 1;
}
int main() {
    int n = 4096;
    int *a, *b;
    CK(cudaMalloc(&a, n * sizeof(int)));
    CK(cudaMalloc(&b, n * sizeof(int)));
    CK(cudaMemset(a, 0, n * sizeof(int)));
    cudaGraph_t g;
    CK(cudaGraphCreate(&g, 0));
    cudaKernelNodeParams kp = {};
    void* args[] = {&a, &n};
    kp.func = (void*)inc;
    kp.gridDim = dim3((n + 255) / 256);
    kp.blockDim = dim3(256);
    kp.kernelParams = args;
    cudaGraphNode_t kn, cn;
    CK(cudaGraphAddKernelNode(&kn, g, nullptr, 0, &kp));
    CK(cudaGraphAddMemcpyNode1D(&cn, g, &kn, 1, b, a, n * sizeof(int), cudaMemcpyDeviceToDevice));
    cudaGraphExec_t ge;
    CK(cudaGraphInstantiate(&ge, g, 0));
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    for (int r = 0; r < 10; r++) CK(cudaGraphLaunch(ge, s));
    CK(cudaStreamSynchronize(s));
    static int h[4096];
    CK(cudaMemcpy(h, b, n * sizeof(int), cudaMemcpyDeviceToHost));
    bool ok = true;
    for (int i = 0; i < n; i++) ok &= h[i] == 10;
    // Stream capture.
    cudaGraph_t cg;
    cudaGraphExec_t cge;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CK(cudaMemsetAsync(a, 0, n * sizeof(int), s));
    inc<<<(n + 255) / 256, 256, 0, s>>>(a, n);
    CK(cudaMemcpyAsync(b, a, n * sizeof(int), cudaMemcpyDeviceToDevice, s));
    CK(cudaStreamEndCapture(s, &cg));
    CK(cudaGraphInstantiate(&cge, cg, 0));
    for (int r = 0; r < 10; r++) CK(cudaGraphLaunch(cge, s));
    CK(cudaStreamSynchronize(s));
    CK(cudaMemcpy(h, b, n * sizeof(int), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) ok &= h[i] == 1;
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphExecDestroy(cge));
    CK(cudaGraphDestroy(g));
    CK(cudaGraphDestroy(cg));
    CK(cudaStreamDestroy(s));
    CK(cudaFree(a));
    CK(cudaFree(b));
    DONE(ok);
}
