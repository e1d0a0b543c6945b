// gpusan-case: api
// expect: clean
// expect-leak: none
// compute-sanitizer: no
// what: one 1 MiB allocation used as sub-allocated views: copies and sets into p + offset
//       that stay inside it, the last view ending at its last byte
#include "case.h"
int main() {
    const size_t total = 1 << 20, view = 1000;
    static unsigned char h[view], back[view];
    unsigned char* p;
    CK(cudaMalloc(&p, total));
    bool ok = true;
    for (size_t off = 0; off + view <= total; off += 65536 + 13) {
        fill(h, view, (unsigned)off);
        CK(cudaMemcpy(p + off, h, view, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(back, p + off, view, cudaMemcpyDeviceToHost));
        ok &= memcmp(h, back, view) == 0;
    }
    CK(cudaMemset(p + total - view, 9, view));
    CK(cudaMemcpy(p + 4096, p + total - view, view, cudaMemcpyDeviceToDevice));
    CK(cudaMemcpy(back, p + 4096, view, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < view; i++) ok &= back[i] == 9;
    CK(cudaFree(p));
    DONE(ok);
}
