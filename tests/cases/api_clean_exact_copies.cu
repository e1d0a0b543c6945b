// gpusan-case: api
// expect: clean
// expect-leak: none
// compute-sanitizer: no
// also-cudart-shared: yes
// what: H2D, D2D, D2H and cudaMemcpyDefault copies of exactly the buffer size; round trip checked
#include "case.h"
int main() {
    const size_t n = 1000;  // not a multiple of the allocation granularity
    static unsigned char h[n], back[n];
    fill(h, n);
    void *a, *b;
    CK(cudaMalloc(&a, n));
    CK(cudaMalloc(&b, n));
    CK(cudaMemcpy(a, h, n, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(b, a, n, cudaMemcpyDeviceToDevice));
    CK(cudaMemcpy(back, b, n, cudaMemcpyDeviceToHost));
    bool ok = memcmp(h, back, n) == 0;
    memset(back, 0, n);
    CK(cudaMemcpy(a, b, n, cudaMemcpyDefault));
    CK(cudaMemcpy(back, a, n, cudaMemcpyDefault));
    ok = ok && memcmp(h, back, n) == 0;
    CK(cudaFree(a));
    CK(cudaFree(b));
    DONE(ok);
}
