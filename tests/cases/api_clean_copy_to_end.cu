// gpusan-case: api
// expect: clean
// expect-leak: none
// compute-sanitizer: no
// what: copies and sets that end exactly at the end of a buffer (the last byte, the last 8
//       bytes, the second half), and zero-byte copies at the one-past-the-end pointer
#include "case.h"
int main() {
    const size_t n = 4099;
    static unsigned char h[n], back[n];
    fill(h, n);
    unsigned char* d;
    CK(cudaMalloc(&d, n));
    CK(cudaMemset(d, 0, n));
    CK(cudaMemcpy(d + n - 1, h + n - 1, 1, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d + n - 8, h + n - 8, 8, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d + n / 2, h + n / 2, n - n / 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d, h, n / 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d + n, h, 0, cudaMemcpyHostToDevice));
    CK(cudaMemset(d + n, 0, 0));
    CK(cudaMemcpy(back + n - 16, d + n - 16, 16, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(back, d, n - 16, cudaMemcpyDeviceToHost));
    bool ok = memcmp(h, back, n) == 0;
    CK(cudaFree(d));
    DONE(ok);
}
