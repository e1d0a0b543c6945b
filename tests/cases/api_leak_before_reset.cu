// gpusan-case: api
// expect: clean
// expect-leak: leak
// compute-sanitizer: yes
// what: a 64 KiB cudaMalloc buffer and a 4 KiB cudaMallocHost buffer are never freed before
//       cudaDeviceReset (which releases them, so memcheck can report them as leaks)
#include "case.h"
int main() {
    void *d, *h;
    CK(cudaMalloc(&d, 64 << 10));
    CK(cudaMallocHost(&h, 4096));
    CK(cudaMemcpy(d, h, 4096, cudaMemcpyHostToDevice));
    CK(cudaDeviceSynchronize());
    CK(cudaDeviceReset());
    printf("OK\n");
    return 0;
}
