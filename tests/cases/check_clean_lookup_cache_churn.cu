// gpusan-case: check
// expect: clean
// expect-leak: none
// compute-sanitizer: no
// what: one kernel launched over 300 buffers, interior pointers and one-past-the-end
//       pointers, while allocations come and go between launches (the table is re-sorted and
//       the lookup cache's indices go stale, and pointers collide in the cache): every
//       access is in bounds of a live buffer, so nothing may be reported.
#include "case.h"
#include <vector>
__global__ void touch(int* p, int n, int* sum) {
    for (int i = threadIdx.x; i < n; i += blockDim.x) atomicAdd(sum, p[i]++);
}
// Reads p[-n .. -1]: p is one past the end of its buffer.
__global__ void touch_end(const int* end, int n, int* sum) {
    for (int i = threadIdx.x; i < n; i += blockDim.x) atomicAdd(sum, end[-1 - i]);
}
int main() {
    const int nbuf = 300;
    int* bufs[nbuf];
    int* sum;
    // The host's copy of every buffer and of the sum, to check the result.
    std::vector<std::vector<int>> host(nbuf);
    long long want = 0;
    CK(cudaMalloc(&sum, sizeof(int)));
    CK(cudaMemset(sum, 0, sizeof(int)));
    for (int i = 0; i < nbuf; i++) {
        CK(cudaMalloc(&bufs[i], (64 + i) * sizeof(int)));
        CK(cudaMemset(bufs[i], 0, (64 + i) * sizeof(int)));
        host[i].assign(64 + i, 0);
    }
    for (int round = 0; round < 4; round++) {
        for (int i = 0; i < nbuf; i++) {
            int n = 64 + i;
            touch<<<1, 64>>>(bufs[i], n, sum);
            touch<<<1, 32>>>(bufs[i] + n / 2, n - n / 2, sum);
            touch_end<<<1, 32>>>(bufs[i] + n, n, sum);
            for (int j = 0; j < n; j++) want += host[i][j]++;
            for (int j = n / 2; j < n; j++) want += host[i][j]++;
            for (int j = 0; j < n; j++) want += host[i][j];
        }
        // Free every third buffer and allocate it again at another size: entries leave
        // the table and new ones come in, so cached indices point at other entries.
        for (int i = round % 3; i < nbuf; i += 3) {
            CK(cudaFree(bufs[i]));
            CK(cudaMalloc(&bufs[i], (64 + i) * sizeof(int)));
            CK(cudaMemset(bufs[i], 0, (64 + i) * sizeof(int)));
            host[i].assign(64 + i, 0);
        }
    }
    int got = 0;
    CK(cudaMemcpy(&got, sum, sizeof(int), cudaMemcpyDeviceToHost));
    for (int i = 0; i < nbuf; i++) CK(cudaFree(bufs[i]));
    CK(cudaFree(sum));
    DONE(got == (int)want);
}
