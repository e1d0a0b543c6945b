// gpusan-case: check
// expect: use_after_free
// accept: kernel_fault
// expect-leak: none
// compute-sanitizer: yes
// native: may-fail
// what: a child process opens its parent's buffer through an IPC handle, closes it, then a
//       kernel sums the buffer through the stale pointer (unmapped by the close: the kernel
//       may fault after its check reported, hence kernel_fault accepted)
#include "case.h"
#include "ipc.h"
__global__ void sum_ipc(const int* p, int n, int* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(out, p[i]);
}
static int child(const char* hex) {
    void* p;
    int* out;
    CK(cudaIpcOpenMemHandle(&p, ipc_unhex(hex), cudaIpcMemLazyEnablePeerAccess));
    CK(cudaMalloc(&out, sizeof(int)));
    CK(cudaIpcCloseMemHandle(p));
    sum_ipc<<<4, 256>>>((const int*)p, 1024, out);
    cudaError_t e = cudaDeviceSynchronize();
    printf("bug kernel -> %s\n", cudaGetErrorName(e));
    cudaFree(out);
    BUG_DONE();
}
int main(int argc, char** argv) {
    if (argc == 3 && !strcmp(argv[1], "child")) return child(argv[2]);
    IPC_PARENT(argv[0], 4096, 0);
}
