// gpusan-case: api
// expect: memcpy_out_of_bounds
// expect-leak: none
// compute-sanitizer: yes
// also-cudart-shared: yes
// what: cudaMemcpyAsync host(pinned)->device on a stream writes 4 bytes past a 4096-byte buffer
#include "case.h"
int main() {
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    unsigned char* h;
    CK(cudaMallocHost(&h, 8192));
    fill(h, 8192);
    void* d;
    CK(cudaMalloc(&d, 4096));
    TRY(cudaMemcpyAsync(d, h, 4100, cudaMemcpyHostToDevice, s));
    CK(cudaStreamSynchronize(s));
    CK(cudaFree(d));
    CK(cudaFreeHost(h));
    CK(cudaStreamDestroy(s));
    BUG_DONE();
}
