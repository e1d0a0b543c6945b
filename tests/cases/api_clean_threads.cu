// gpusan-case: api
// expect: clean
// expect-leak: none
// compute-sanitizer: no
// what: 8 std::threads, each 1000 rounds of cudaMalloc / H2D / D2H / cudaFree of its own
//       buffer (sizes vary per round) with the round trip checked
#include "case.h"
#include <atomic>
#include <thread>
#include <vector>
int main() {
    std::atomic<int> bad{0};
    CK(cudaFree(nullptr));  // create the context before the threads race to
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; t++)
        threads.emplace_back([t, &bad] {
            unsigned char h[4096], back[4096];
            for (int r = 0; r < 1000; r++) {
                size_t n = 64 + (size_t)((r * 37 + t * 101) % 4000);
                fill(h, n, t * 1000 + r);
                void* d;
                if (cudaMalloc(&d, n) != cudaSuccess) { bad++; return; }
                if (cudaMemcpy(d, h, n, cudaMemcpyHostToDevice) != cudaSuccess ||
                    cudaMemcpy(back, d, n, cudaMemcpyDeviceToHost) != cudaSuccess ||
                    memcmp(h, back, n) != 0)
                    bad++;
                if (cudaFree(d) != cudaSuccess) bad++;
            }
        });
    for (auto& th : threads) th.join();
    printf("thread failures %d\n", bad.load());
    DONE(bad.load() == 0);
}
