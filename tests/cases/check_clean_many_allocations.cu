// gpusan-case: check
// expect: clean
// expect-leak: none
// compute-sanitizer: no
// what: 20,000 live allocations of 16..1024 bytes; a kernel reads and writes every one of them,
//       to its exact last byte, through a device table of pointers and lengths
#include "case.h"
#include <vector>
__global__ void touch(unsigned char** bufs, const int* lens, int count) {
    int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= count) return;
    unsigned char* p = bufs[b];
    int n = lens[b];
    unsigned s = 0;
    for (int i = 0; i < n; i++) s += p[i];
    p[0] = (unsigned char)s;
    p[n - 1] = (unsigned char)(b & 0xff);
}
int main() {
    const int count = 20000;
    std::vector<unsigned char*> hb(count);
    std::vector<int> hl(count);
    for (int b = 0; b < count; b++) {
        hl[b] = 16 + (b * 97) % 1009;
        CK(cudaMalloc(&hb[b], hl[b]));
    }
    for (int b = 0; b < count; b += 997) CK(cudaMemset(hb[b], 1, hl[b]));
    unsigned char** bufs;
    int* lens;
    CK(cudaMalloc(&bufs, count * sizeof(void*)));
    CK(cudaMalloc(&lens, count * sizeof(int)));
    CK(cudaMemcpy(bufs, hb.data(), count * sizeof(void*), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(lens, hl.data(), count * sizeof(int), cudaMemcpyHostToDevice));
    touch<<<(count + 127) / 128, 128>>>(bufs, lens, count);
    CK(cudaDeviceSynchronize());
    bool ok = true;
    for (int b = 0; b < count; b += 1999) {
        unsigned char last;
        CK(cudaMemcpy(&last, hb[b] + hl[b] - 1, 1, cudaMemcpyDeviceToHost));
        ok &= last == (unsigned char)(b & 0xff);
    }
    for (int b = 0; b < count; b++) CK(cudaFree(hb[b]));
    CK(cudaFree(bufs));
    CK(cudaFree(lens));
    DONE(ok);
}
