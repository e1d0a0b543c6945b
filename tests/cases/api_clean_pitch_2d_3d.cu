// gpusan-case: api
// expect: clean
// expect-leak: none
// compute-sanitizer: no
// what: cudaMallocPitch + cudaMemcpy2D / cudaMemset2D of every row, and cudaMalloc3D +
//       cudaMemcpy3D of the whole volume; round trips checked
#include "case.h"
int main() {
    const size_t w = 300, rows = 37;
    static unsigned char h[w * rows], back[w * rows];
    fill(h, sizeof h);
    void* d;
    size_t pitch;
    CK(cudaMallocPitch(&d, &pitch, w, rows));
    CK(cudaMemset2D(d, pitch, 0, w, rows));
    CK(cudaMemcpy2D(d, pitch, h, w, w, rows, cudaMemcpyHostToDevice));
    CK(cudaMemcpy2D(back, w, d, pitch, w, rows, cudaMemcpyDeviceToHost));
    bool ok = memcmp(h, back, sizeof h) == 0;
    // 3-D: 40 x 6 x 5 bytes.
    cudaExtent e = make_cudaExtent(40, 6, 5);
    cudaPitchedPtr v;
    CK(cudaMalloc3D(&v, e));
    CK(cudaMemset3D(v, 1, e));
    static unsigned char h3[40 * 6 * 5], b3[40 * 6 * 5];
    fill(h3, sizeof h3, 3);
    cudaMemcpy3DParms up = {};
    up.srcPtr = make_cudaPitchedPtr(h3, 40, 40, 6);
    up.dstPtr = v;
    up.extent = e;
    up.kind = cudaMemcpyHostToDevice;
    CK(cudaMemcpy3D(&up));
    cudaMemcpy3DParms down = {};
    down.srcPtr = v;
    down.dstPtr = make_cudaPitchedPtr(b3, 40, 40, 6);
    down.extent = e;
    down.kind = cudaMemcpyDeviceToHost;
    CK(cudaMemcpy3D(&down));
    ok = ok && memcmp(h3, b3, sizeof h3) == 0;
    CK(cudaFree(d));
    CK(cudaFree(v.ptr));
    DONE(ok);
}
