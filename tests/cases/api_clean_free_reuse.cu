// gpusan-case: api
// expect: clean
// expect-leak: none
// compute-sanitizer: no
// what: 2000 rounds of cudaMalloc / copy / cudaFree of the same size (the driver hands the same
//       address out again), copies always through the newest pointer; cudaFree(nullptr)
#include "case.h"
int main() {
    static unsigned char h[8192], back[8192];
    bool ok = true;
    void* last = nullptr;
    int same = 0;
    for (int r = 0; r < 2000; r++) {
        void* d;
        CK(cudaMalloc(&d, 8192));
        same += d == last;
        last = d;
        fill(h, 8192, r);
        CK(cudaMemcpy(d, h, 8192, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(back, d, 8192, cudaMemcpyDeviceToHost));
        ok &= memcmp(h, back, 8192) == 0;
        CK(cudaFree(d));
    }
    CK(cudaFree(nullptr));
    printf("address reused %s\n", same > 0 ? "yes" : "no");
    DONE(ok);
}
