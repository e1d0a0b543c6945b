// gpusan-case: check
// expect: clean
// expect-leak: none
// compute-sanitizer: no
// what: pointers with several roots used in bounds: one of two buffers of different sizes
//       picked per thread (`selp`), then a list walked through pointers loaded in a loop
//       (the pointer's root changes round the back edge), each node written at its last
//       element; a null pointer on one path is never dereferenced; a gather through 64-bit
//       offsets read from memory (`base + off[i]`, two possible pointers), all in bounds
#include "case.h"
struct Node {
    Node* next;
    int value[6];
};
__global__ void pick(int* small, int* big) {
    int t = threadIdx.x;
    int* p = (t & 1) ? small : big;
    int n = (t & 1) ? 16 : 64;
    atomicAdd(&p[(t * 7) % n], 1);
}
__global__ void walk(Node* head, int steps, int* out) {
    Node* n = head;
    int sum = 0;
    for (int i = 0; i < steps; i++) {
        sum += n->value[5];
        n->value[5] = i;
        n = n->next;
    }
    Node* last = threadIdx.x == 0 ? n : nullptr;
    if (last) out[0] = sum;
}
__global__ void gather(const char* base, const size_t* off, char* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = base[off[i]];
}
int main() {
    int *small, *big, *out;
    CK(cudaMalloc(&small, 16 * sizeof(int)));
    CK(cudaMalloc(&big, 64 * sizeof(int)));
    CK(cudaMalloc(&out, sizeof(int)));
    CK(cudaMemset(small, 0, 16 * sizeof(int)));
    CK(cudaMemset(big, 0, 64 * sizeof(int)));
    pick<<<1, 32>>>(small, big);
    // A ring of 5 nodes, each its own allocation.
    const int count = 5;
    Node* nodes[count];
    for (int i = 0; i < count; i++) CK(cudaMalloc(&nodes[i], sizeof(Node)));
    for (int i = 0; i < count; i++) {
        Node h = {};
        h.next = nodes[(i + 1) % count];
        h.value[5] = 100 * i;
        CK(cudaMemcpy(nodes[i], &h, sizeof h, cudaMemcpyHostToDevice));
    }
    walk<<<1, 1>>>(nodes[0], 12, out);
    int sum = 0;
    CK(cudaMemcpy(&sum, out, sizeof sum, cudaMemcpyDeviceToHost));
    // Steps 0-4 read 0,100,...,400 (1000); steps 5-9 read 0..4 written in the first pass
    // (10); steps 10-11 read 5 and 6.
    bool ok = sum == 1000 + 10 + 11;
    static int hs[16], hb[64];
    CK(cudaMemcpy(hs, small, sizeof hs, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hb, big, sizeof hb, cudaMemcpyDeviceToHost));
    int total = 0;
    for (int v : hs) total += v;
    for (int v : hb) total += v;
    ok &= total == 32;
    // The gather: every offset inside the 1000-byte buffer, the last one its last byte.
    const int gn = 256, glen = 1000;
    char *gbase, *gout;
    size_t* goff;
    CK(cudaMalloc(&gbase, glen));
    CK(cudaMalloc(&gout, gn));
    CK(cudaMalloc(&goff, gn * sizeof(size_t)));
    static char hbase[glen];
    for (int i = 0; i < glen; i++) hbase[i] = (char)(i * 3);
    static size_t hoff[gn];
    for (int i = 0; i < gn; i++) hoff[i] = i == gn - 1 ? glen - 1 : (size_t)(i * 37) % glen;
    CK(cudaMemcpy(gbase, hbase, sizeof hbase, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(goff, hoff, sizeof hoff, cudaMemcpyHostToDevice));
    gather<<<1, gn>>>(gbase, goff, gout, gn);
    static char hout[gn];
    CK(cudaMemcpy(hout, gout, sizeof hout, cudaMemcpyDeviceToHost));
    for (int i = 0; i < gn; i++) ok &= hout[i] == hbase[hoff[i]];
    CK(cudaFree(gbase));
    CK(cudaFree(gout));
    CK(cudaFree(goff));
    for (int i = 0; i < count; i++) CK(cudaFree(nodes[i]));
    CK(cudaFree(small));
    CK(cudaFree(big));
    CK(cudaFree(out));
    DONE(ok);
}
