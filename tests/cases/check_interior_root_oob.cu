// gpusan-case: check
// expect: out_of_bounds_write
// expect-leak: none
// compute-sanitizer: yes
// what: a kernel is given `buf + 1000` (a view into a 1024-int buffer, not its base) and writes
//       32 ints through it: the last 8 land past the buffer's end
#include "case.h"
__global__ void k(int* view) { view[threadIdx.x] = threadIdx.x; }
int main() {
    int* d;
    CK(cudaMalloc(&d, 1024 * sizeof(int)));
    k<<<1, 32>>>(d + 1000);
    CK(cudaDeviceSynchronize());
    CK(cudaFree(d));
    BUG_DONE();
}
