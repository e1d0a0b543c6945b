// CUDA graph memory nodes as programs use them (issue 12): an allocation node whose memory
// the program frees outside the graph after each launch (cudaFree, then cudaFreeAsync),
// graph memory trimmed between launches; a graph that allocates and frees inside itself;
// a graph captured from cudaMallocAsync / cudaFreeAsync; each launched 3 times, a kernel
// writing the whole allocation and the result checked on the host. argv[1] == "bug": the
// kernel of the first graph writes one element past the end of the graph's allocation.
#include <cstdio>
#include <cstring>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    printf("%s:%d: %s -> %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); return 1; } } while (0)

__global__ void fill(int *p, int n, int extra, int round) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n + extra) p[i] = i + round;
}
__global__ void sum(const int *p, int n, unsigned long long *out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(out, (unsigned long long)p[i]);
}

static cudaMemAllocNodeParams alloc_params(size_t bytes) {
    cudaMemAllocNodeParams ap = {};
    ap.poolProps.allocType = cudaMemAllocationTypePinned;
    ap.poolProps.location.type = cudaMemLocationTypeDevice;
    ap.poolProps.location.id = 0;
    ap.bytesize = bytes;
    return ap;
}

static cudaGraphNode_t kernel_node(cudaGraph_t g, const cudaGraphNode_t *deps, size_t n, void *fn, void **args, int blocks) {
    cudaKernelNodeParams kp = {};
    kp.func = fn;
    kp.gridDim = dim3(blocks);
    kp.blockDim = dim3(256);
    kp.kernelParams = args;
    cudaGraphNode_t node;
    if (cudaGraphAddKernelNode(&node, g, deps, n, &kp) != cudaSuccess) return nullptr;
    return node;
}

int main(int argc, char **argv) {
    const int n = 1 << 16;
    const int extra = argc > 1 && strcmp(argv[1], "bug") == 0 ? 1 : 0;
    unsigned long long *total;
    CK(cudaMalloc(&total, sizeof *total));
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    const unsigned long long want_base = (unsigned long long)n * (n - 1) / 2;

    // 1. Allocation node, freed outside the graph after each launch.
    {
        cudaGraph_t g;
        CK(cudaGraphCreate(&g, 0));
        cudaMemAllocNodeParams ap = alloc_params(n * sizeof(int));
        cudaGraphNode_t an;
        CK(cudaGraphAddMemAllocNode(&an, g, nullptr, 0, &ap));
        int *buf = (int *)ap.dptr;
        int nn = n, ex = extra, round = 0;
        void *fargs[] = {&buf, &nn, &ex, &round};
        cudaGraphNode_t kn = kernel_node(g, &an, 1, (void *)fill, fargs, (n + extra + 255) / 256);
        void *sargs[] = {&buf, &nn, &total};
        if (!kn || !kernel_node(g, &kn, 1, (void *)sum, sargs, (n + 255) / 256)) { printf("kernel node failed\n"); return 1; }
        cudaGraphExec_t exec;
        CK(cudaGraphInstantiate(&exec, g, 0));
        for (int r = 0; r < 3; r++) {
            CK(cudaMemsetAsync(total, 0, sizeof *total, s));
            CK(cudaGraphLaunch(exec, s));
            CK(cudaStreamSynchronize(s));
            unsigned long long got;
            CK(cudaMemcpy(&got, total, sizeof got, cudaMemcpyDeviceToHost));
            if (got != want_base) { printf("graph 1 launch %d: sum %llu, want %llu\n", r, got, want_base); return 1; }
            if (r == 1) {
                CK(cudaFreeAsync(buf, s));
                CK(cudaStreamSynchronize(s));
                CK(cudaDeviceGraphMemTrim(0));
            } else {
                CK(cudaFree(buf));
            }
        }
        CK(cudaGraphExecDestroy(exec));
        CK(cudaGraphDestroy(g));
    }

    // 2. Allocation and free nodes inside the graph.
    {
        cudaGraph_t g;
        CK(cudaGraphCreate(&g, 0));
        cudaMemAllocNodeParams ap = alloc_params(n * sizeof(int));
        cudaGraphNode_t an, fn;
        CK(cudaGraphAddMemAllocNode(&an, g, nullptr, 0, &ap));
        int *buf = (int *)ap.dptr;
        int nn = n, ex = 0, round = 0;
        void *fargs[] = {&buf, &nn, &ex, &round};
        cudaGraphNode_t kn = kernel_node(g, &an, 1, (void *)fill, fargs, (n + 255) / 256);
        void *sargs[] = {&buf, &nn, &total};
        cudaGraphNode_t sn = kn ? kernel_node(g, &kn, 1, (void *)sum, sargs, (n + 255) / 256) : nullptr;
        if (!sn) { printf("kernel node failed\n"); return 1; }
        CK(cudaGraphAddMemFreeNode(&fn, g, &sn, 1, buf));
        cudaGraphExec_t exec;
        CK(cudaGraphInstantiate(&exec, g, 0));
        for (int r = 0; r < 3; r++) {
            CK(cudaMemsetAsync(total, 0, sizeof *total, s));
            CK(cudaGraphLaunch(exec, s));
            CK(cudaStreamSynchronize(s));
            unsigned long long got;
            CK(cudaMemcpy(&got, total, sizeof got, cudaMemcpyDeviceToHost));
            if (got != want_base) { printf("graph 2 launch %d: sum %llu\n", r, got); return 1; }
        }
        CK(cudaGraphExecDestroy(exec));
        CK(cudaGraphDestroy(g));
    }

    // 3. Captured cudaMallocAsync / cudaFreeAsync.
    {
        cudaGraph_t g;
        CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
        int *buf;
        CK(cudaMallocAsync(&buf, n * sizeof(int), s));
        fill<<<(n + 255) / 256, 256, 0, s>>>(buf, n, 0, 0);
        sum<<<(n + 255) / 256, 256, 0, s>>>(buf, n, total);
        CK(cudaFreeAsync(buf, s));
        CK(cudaStreamEndCapture(s, &g));
        cudaGraphExec_t exec;
        CK(cudaGraphInstantiate(&exec, g, 0));
        for (int r = 0; r < 3; r++) {
            CK(cudaMemsetAsync(total, 0, sizeof *total, s));
            CK(cudaGraphLaunch(exec, s));
            CK(cudaStreamSynchronize(s));
            unsigned long long got;
            CK(cudaMemcpy(&got, total, sizeof got, cudaMemcpyDeviceToHost));
            if (got != want_base) { printf("graph 3 launch %d: sum %llu\n", r, got); return 1; }
        }
        CK(cudaGraphExecDestroy(exec));
        CK(cudaGraphDestroy(g));
        CK(cudaDeviceGraphMemTrim(0));
    }
    CK(cudaFree(total));
    CK(cudaStreamDestroy(s));
    printf("ok\n");
    return 0;
}
