// gpusan-case: api
// expect: clean
// expect-leak: none
// compute-sanitizer: no
// what: 20,000 live cudaMalloc allocations (256 bytes to 4 KiB), a copy into every one ending
//       at its last byte, a read-back of some, then all freed in shuffled order
#include "case.h"
#include <vector>
int main() {
    const int count = 20000;
    std::vector<unsigned char*> p(count);
    std::vector<size_t> size(count);
    static unsigned char h[4096], back[4096];
    fill(h, sizeof h);
    for (int i = 0; i < count; i++) {
        size[i] = 256 + (size_t)(i * 97 % 3841);
        CK(cudaMalloc(&p[i], size[i]));
    }
    for (int i = 0; i < count; i++) CK(cudaMemcpy(p[i], h, size[i], cudaMemcpyHostToDevice));
    bool ok = true;
    for (int i = 0; i < count; i += 997) {
        CK(cudaMemcpy(back, p[i] + size[i] - 16, 16, cudaMemcpyDeviceToHost));
        ok &= memcmp(back, h + size[i] - 16, 16) == 0;
    }
    for (int k = 0; k < count; k++) {
        int i = (int)((k * 7919ull) % count);  // 7919 is prime: a permutation
        CK(cudaFree(p[i]));
    }
    DONE(ok);
}
