// gpusan-case: api
// expect: memcpy_out_of_bounds
// expect-leak: none
// accept: unknown_device_address
// compute-sanitizer: yes
// what: inside a captured graph, cudaMemcpyAsync copies 4100 bytes (device to device) into a
//       4096-byte graph allocation (cudaMallocAsync under capture); the graph is launched once
#include "case.h"
int main() {
    const size_t n = 4096;
    static unsigned char h[n + 4];
    fill(h, sizeof h);
    void* src;
    CK(cudaMalloc(&src, n + 4));
    CK(cudaMemcpy(src, h, n + 4, cudaMemcpyHostToDevice));
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    cudaGraph_t g;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    void* tmp;
    CK(cudaMallocAsync(&tmp, n, s));
    TRY(cudaMemcpyAsync(tmp, src, n + 4, cudaMemcpyDeviceToDevice, s));
    CK(cudaFreeAsync(tmp, s));
    cudaError_t e = cudaStreamEndCapture(s, &g);
    printf("end capture -> %s\n", cudaGetErrorName(e));
    if (e == cudaSuccess) {
        cudaGraphExec_t ge;
        if (cudaGraphInstantiate(&ge, g, 0) == cudaSuccess) {
            TRY(cudaGraphLaunch(ge, s));
            cudaStreamSynchronize(s);
            cudaGraphExecDestroy(ge);
        }
        cudaGraphDestroy(g);
    }
    cudaGetLastError();
    CK(cudaStreamDestroy(s));
    CK(cudaFree(src));
    BUG_DONE();
}
