// gpusan-case: check
// expect: clean
// expect-leak: none
// compute-sanitizer: no
// what: one 1 MiB allocation carved into four views of different sizes (a sub-allocator, as
//       frameworks do); kernels get the views (interior pointers) and write each to its exact end
#include "case.h"
__global__ void fill(int* view, int n, int v) {
    for (int i = threadIdx.x; i < n; i += blockDim.x) view[i] = v;
}
int main() {
    int* arena;
    CK(cudaMalloc(&arena, 1 << 20));
    const int sizes[4] = {1000, 70000, 12345, 100000};  // ints; sum < 262144
    int* views[4];
    int at = 0;
    for (int v = 0; v < 4; v++) {
        views[v] = arena + at;
        at += sizes[v];
    }
    for (int v = 0; v < 4; v++) fill<<<1, 256>>>(views[v], sizes[v], v + 1);
    CK(cudaDeviceSynchronize());
    bool ok = true;
    for (int v = 0; v < 4; v++) {
        int last;
        CK(cudaMemcpy(&last, views[v] + sizes[v] - 1, sizeof(int), cudaMemcpyDeviceToHost));
        ok &= last == v + 1;
    }
    CK(cudaFree(arena));
    DONE(ok);
}
