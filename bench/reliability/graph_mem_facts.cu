// Facts about CUDA graph memory nodes on a driver, for gpusan (issue 12): what each call returns
// (free before the first launch, double frees, trim, relaunch, cudaGraphExecUpdate, clone,
// child graph, capture) and, with an argument, what compute-sanitizer --leak-check full calls a
// leak ("leak", "leak-destroyed", "inside", "never"). Not a case: bench/results/h100-issue12/
// graph-mem-facts.json holds what it printed on the H100.
#include <cstdio>
#include <cstring>
#include <cuda_runtime.h>
#define R(x) do { cudaError_t e_ = (x); printf("  %-60s -> %d %s\n", #x, (int)e_, e_ ? cudaGetErrorName(e_) : ""); cudaGetLastError(); } while (0)
static cudaMemAllocNodeParams ap(size_t bytes) {
  cudaMemAllocNodeParams p = {};
  p.poolProps.allocType = cudaMemAllocationTypePinned;
  p.poolProps.location.type = cudaMemLocationTypeDevice;
  p.poolProps.location.id = 0;
  p.bytesize = bytes;
  return p;
}
static void *alloc_graph(cudaGraph_t *g, size_t bytes) {
  cudaGraphCreate(g, 0);
  cudaMemAllocNodeParams p = ap(bytes);
  cudaGraphNode_t n;
  cudaError_t e = cudaGraphAddMemAllocNode(&n, *g, nullptr, 0, &p);
  if (e) printf("  alloc node: %s\n", cudaGetErrorName(e));
  return p.dptr;
}
int main(int argc, char **argv) {
  const char *what = argc > 1 ? argv[1] : "all";
  cudaFree(0);
  cudaStream_t s; cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  if (!strcmp(what, "leak") || !strcmp(what, "leak-destroyed") || !strcmp(what, "inside") || !strcmp(what, "never")) {
    cudaGraph_t g; void *p = alloc_graph(&g, 1 << 20);
    if (!strcmp(what, "inside")) { cudaGraphNode_t f, roots[8]; size_t nr = 8; cudaGraphGetRootNodes(g, roots, &nr); R(cudaGraphAddMemFreeNode(&f, g, roots, 1, p)); }
    cudaGraphExec_t x; R(cudaGraphInstantiate(&x, g, 0));
    if (strcmp(what, "never")) { R(cudaGraphLaunch(x, s)); R(cudaStreamSynchronize(s)); }
    if (!strcmp(what, "leak-destroyed")) { R(cudaGraphExecDestroy(x)); R(cudaGraphDestroy(g)); }
    void *q; R(cudaMallocAsync(&q, 4096, s)); R(cudaStreamSynchronize(s));  // reference: an unfreed stream-ordered allocation
    printf("%s: graph memory %p (1 MiB) and cudaMallocAsync %p (4 KiB) unfreed at exit\n", what, p, q);
    return 0;
  }
  printf("E1 alloc node, free outside\n");
  { cudaGraph_t g; void *p = alloc_graph(&g, 4096); printf("  dptr %p\n", p);
    cudaGraphExec_t x; R(cudaGraphInstantiate(&x, g, 0));
    R(cudaFree(p));
    R(cudaGraphLaunch(x, s)); R(cudaStreamSynchronize(s));
    R(cudaFree(p)); R(cudaFree(p));
    R(cudaDeviceGraphMemTrim(0));
    R(cudaGraphLaunch(x, s)); R(cudaStreamSynchronize(s));
    R(cudaFreeAsync(p, s)); R(cudaStreamSynchronize(s)); R(cudaFreeAsync(p, s)); R(cudaStreamSynchronize(s));
    R(cudaDeviceGraphMemTrim(0));
    void *m; R(cudaMalloc(&m, 4096)); printf("  cudaMalloc after trim %p (graph va %p)\n", m, p); cudaFree(m);
    R(cudaGraphLaunch(x, s)); R(cudaStreamSynchronize(s));
    printf("E4 relaunch without free\n");
    R(cudaGraphLaunch(x, s)); R(cudaStreamSynchronize(s));
    printf("E7 destroyed with outstanding memory\n");
    R(cudaGraphExecDestroy(x)); R(cudaGraphDestroy(g)); R(cudaFree(p)); R(cudaFree(p)); }
  printf("E4b auto free on launch\n");
  { cudaGraph_t g; void *p = alloc_graph(&g, 4096); cudaGraphExec_t x;
    R(cudaGraphInstantiate(&x, g, cudaGraphInstantiateFlagAutoFreeOnLaunch));
    R(cudaGraphLaunch(x, s)); R(cudaGraphLaunch(x, s)); R(cudaStreamSynchronize(s)); R(cudaFree(p));
    R(cudaGraphExecDestroy(x)); R(cudaGraphDestroy(g)); }
  printf("E2 alloc + free inside, then free outside\n");
  { cudaGraph_t g; void *p = alloc_graph(&g, 4096); cudaGraphNode_t roots[4], f; size_t nr = 4; cudaGraphGetRootNodes(g, roots, &nr);
    R(cudaGraphAddMemFreeNode(&f, g, roots, 1, p)); cudaGraphExec_t x; R(cudaGraphInstantiate(&x, g, 0));
    R(cudaFree(p));
    R(cudaGraphLaunch(x, s)); R(cudaGraphLaunch(x, s)); R(cudaStreamSynchronize(s));
    R(cudaFree(p)); R(cudaFreeAsync(p, s)); R(cudaStreamSynchronize(s));
    printf("E10 second instantiation\n"); cudaGraphExec_t x2; R(cudaGraphInstantiate(&x2, g, 0));
    printf("E8 clone\n"); cudaGraph_t c; R(cudaGraphClone(&c, g));
    printf("E9 child graph\n"); cudaGraph_t par; cudaGraphCreate(&par, 0); cudaGraphNode_t cn; R(cudaGraphAddChildGraphNode(&cn, par, nullptr, 0, g));
    R(cudaGraphExecDestroy(x)); R(cudaGraphDestroy(g)); }
  printf("E3 cudaGraphAddNode (generic) alloc and free\n");
  { cudaGraph_t g; cudaGraphCreate(&g, 0); cudaGraphNodeParams np = {}; np.type = cudaGraphNodeTypeMemAlloc; { cudaMemAllocNodeParams a = ap(8192); memcpy(&np.alloc, &a, sizeof a); }
    cudaGraphNode_t n, f; R(cudaGraphAddNode(&n, g, nullptr, nullptr, 0, &np)); void *p = np.alloc.dptr; printf("  dptr %p\n", p);
    cudaGraphNodeParams fp = {}; fp.type = cudaGraphNodeTypeMemFree; fp.free.dptr = p; R(cudaGraphAddNode(&f, g, &n, nullptr, 1, &fp));
    cudaGraphExec_t x; R(cudaGraphInstantiate(&x, g, 0)); R(cudaGraphLaunch(x, s)); R(cudaStreamSynchronize(s));
    R(cudaGraphExecDestroy(x)); R(cudaGraphDestroy(g)); }
  printf("E5 exec update\n");
  { cudaGraph_t g1, g2; void *a1 = alloc_graph(&g1, 4096), *a2 = alloc_graph(&g2, 4096); printf("  a1 %p a2 %p\n", a1, a2);
    cudaGraphExec_t x; R(cudaGraphInstantiate(&x, g1, 0)); R(cudaGraphLaunch(x, s)); R(cudaStreamSynchronize(s)); R(cudaFree(a1));
    cudaGraphExecUpdateResultInfo info = {}; R(cudaGraphExecUpdate(x, g2, &info)); printf("  update result %d\n", (int)info.result);
    R(cudaGraphLaunch(x, s)); R(cudaStreamSynchronize(s)); R(cudaFree(a2)); R(cudaFree(a1));
    R(cudaGraphLaunch(x, s)); R(cudaStreamSynchronize(s)); R(cudaFree(a1)); R(cudaFree(a2));
    R(cudaGraphExecDestroy(x)); R(cudaGraphDestroy(g1)); R(cudaGraphDestroy(g2)); }
  printf("E11 capture of cudaMallocAsync / cudaFreeAsync\n");
  { cudaGraph_t g; void *p = nullptr, *q = nullptr; R(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    R(cudaMallocAsync(&p, 4096, s)); R(cudaMallocAsync(&q, 4096, s)); R(cudaMemsetAsync(p, 0, 4096, s)); R(cudaFreeAsync(p, s));
    R(cudaStreamEndCapture(s, &g)); printf("  p %p q %p\n", p, q);
    size_t n = 0; cudaGraphGetNodes(g, nullptr, &n); cudaGraphNode_t nodes[16]; cudaGraphGetNodes(g, nodes, &n);
    for (size_t i = 0; i < n; i++) { cudaGraphNodeType t; cudaGraphNodeGetType(nodes[i], &t); printf("  node %zu type %d\n", i, (int)t); }
    cudaGraphExec_t x; R(cudaGraphInstantiate(&x, g, 0)); R(cudaGraphLaunch(x, s)); R(cudaStreamSynchronize(s)); R(cudaFree(q));
    R(cudaGraphLaunch(x, s)); R(cudaStreamSynchronize(s)); R(cudaFreeAsync(q, s)); R(cudaStreamSynchronize(s));
    printf("E12 a free node in another graph\n");
    cudaGraph_t gb; cudaGraphCreate(&gb, 0); cudaGraphNode_t f; R(cudaGraphAddMemFreeNode(&f, gb, nullptr, 0, q));
    cudaGraphExec_t xb; R(cudaGraphInstantiate(&xb, gb, 0));
    R(cudaGraphLaunch(x, s)); R(cudaGraphLaunch(xb, s)); R(cudaStreamSynchronize(s)); R(cudaFree(q));
    R(cudaGraphLaunch(x, s)); R(cudaGraphLaunch(xb, s)); R(cudaStreamSynchronize(s));
    R(cudaGraphExecDestroy(xb)); R(cudaGraphDestroy(gb)); R(cudaGraphExecDestroy(x)); R(cudaGraphDestroy(g)); }
  printf("E13 instantiate with params\n");
  { cudaGraph_t g; void *p = alloc_graph(&g, 4096); cudaGraphInstantiateParams ip = {}; cudaGraphExec_t x;
    R(cudaGraphInstantiateWithParams(&x, g, &ip)); R(cudaGraphLaunch(x, s)); R(cudaStreamSynchronize(s)); R(cudaFree(p));
    R(cudaGraphExecDestroy(x)); R(cudaGraphDestroy(g)); }
  printf("done\n");
  return 0;
}
