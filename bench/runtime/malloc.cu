// Allocation overhead: cudaMalloc + cudaFree of 256 B ... 64 MiB (x4 steps), 1000 rounds per
// size, host time of each call (median ns); the same for cudaMallocAsync + cudaFreeAsync on a
// stream; and a batch of 1000 live 4 KiB allocations made then freed (the registry holding
// many entries).
#include "bench.h"

int main() {
    const int iters = 1000;
    Metrics m;
    CK(cudaFree(nullptr));  // context
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    // warm-up: the driver's first allocations of each size class
    for (size_t size = 256; size <= (64u << 20); size *= 4) {
        void* p;
        CK(cudaMalloc(&p, size));
        CK(cudaFree(p));
    }
    for (size_t size = 256; size <= (64u << 20); size *= 4) {
        std::vector<double> ma, fr, ama, afr;
        for (int i = 0; i < iters; i++) {
            void* p;
            double t0 = now_ns();
            CK(cudaMalloc(&p, size));
            double t1 = now_ns();
            CK(cudaFree(p));
            double t2 = now_ns();
            ma.push_back(t1 - t0);
            fr.push_back(t2 - t1);
        }
        for (int i = 0; i < iters; i++) {
            void* p;
            double t0 = now_ns();
            CK(cudaMallocAsync(&p, size, s));
            double t1 = now_ns();
            CK(cudaFreeAsync(p, s));
            double t2 = now_ns();
            ama.push_back(t1 - t0);
            afr.push_back(t2 - t1);
            if (i % 100 == 99) CK(cudaStreamSynchronize(s));
        }
        CK(cudaStreamSynchronize(s));
        std::string k = "size_" + std::to_string(size);
        m.add(k + ".malloc_ns", median(ma));
        m.add(k + ".free_ns", median(fr));
        m.add(k + ".malloc_async_ns", median(ama));
        m.add(k + ".free_async_ns", median(afr));
    }
    std::vector<void*> live(iters);
    std::vector<double> ma, fr;
    for (int i = 0; i < iters; i++) {
        double t0 = now_ns();
        CK(cudaMalloc(&live[i], 4096));
        ma.push_back(now_ns() - t0);
    }
    for (int i = 0; i < iters; i++) {
        double t0 = now_ns();
        CK(cudaFree(live[(i * 7) % iters]));  // 7 is prime to 1000: every one once
        fr.push_back(now_ns() - t0);
    }
    m.add("batch_4096x1000.malloc_ns", median(ma));
    m.add("batch_4096x1000.free_ns", median(fr));
    CK(cudaStreamDestroy(s));
    m.print("malloc", true, "\"iters_per_size\": 1000, \"sizes\": \"256 B to 64 MiB, x4\"");
    return 0;
}
