// gpusan-case: api
// expect: clean
// expect-leak: none
// compute-sanitizer: no
// what: a child process opens its parent's buffer through an IPC handle, fills it whole with a
//       kernel and a copy, reads it back and closes it; the parent sees what the child wrote
#include "case.h"
#include "ipc.h"
__global__ void fill_ipc(int* p, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = i;
}
static int child(const char* hex) {
    static int back[1024];
    void* p;
    CK(cudaIpcOpenMemHandle(&p, ipc_unhex(hex), cudaIpcMemLazyEnablePeerAccess));
    fill_ipc<<<4, 256>>>((int*)p, 1024);
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(back, p, sizeof back, cudaMemcpyDeviceToHost));
    CK(cudaIpcCloseMemHandle(p));
    DONE(back[0] == 0 && back[1023] == 1023);
}
int main(int argc, char** argv) {
    if (argc == 3 && !strcmp(argv[1], "child")) return child(argv[2]);
    static int back[1024];
    void* a;
    cudaIpcMemHandle_t h;
    CK(cudaMalloc(&a, sizeof back));
    CK(cudaMemset(a, 0xff, sizeof back));
    CK(cudaIpcGetMemHandle(&h, a));
    int st = ipc_run_child(argv[0], h);
    CK(cudaMemcpy(back, a, sizeof back, cudaMemcpyDeviceToHost));
    CK(cudaFree(a));
    DONE(st == 0 && back[0] == 0 && back[1023] == 1023);
}
