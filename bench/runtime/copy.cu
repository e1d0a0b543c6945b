// Copy and set overhead: 2000 calls each of a 4-byte cudaMemcpy host->device (pageable),
// device->host, device->device, a 4-byte cudaMemset, and a 4-byte cudaMemcpyAsync from pinned
// memory (host time of the call only); median ns per call. Then the H2D copy again with 10,000
// more live allocations (the bounds check looks the pointer up among them).
#include "bench.h"

int main() {
    const int iters = 2000;
    Metrics m;
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    int *a, *b, *pinned;
    int host = 7;
    CK(cudaMalloc(&a, 4096));
    CK(cudaMalloc(&b, 4096));
    CK(cudaMallocHost(&pinned, 4096));
    auto time_it = [&](const char* name, auto&& call) {
        for (int i = 0; i < 50; i++) call();
        CK(cudaDeviceSynchronize());
        std::vector<double> t;
        for (int i = 0; i < iters; i++) {
            double t0 = now_ns();
            call();
            t.push_back(now_ns() - t0);
            if (i % 256 == 255) CK(cudaStreamSynchronize(s));
        }
        CK(cudaDeviceSynchronize());
        m.add(name, median(t));
    };
    time_it("memcpy_h2d_4b_ns", [&] { CK(cudaMemcpy(a + 100, &host, 4, cudaMemcpyHostToDevice)); });
    time_it("memcpy_d2h_4b_ns", [&] { CK(cudaMemcpy(&host, a + 100, 4, cudaMemcpyDeviceToHost)); });
    time_it("memcpy_d2d_4b_ns", [&] { CK(cudaMemcpy(b + 5, a + 100, 4, cudaMemcpyDeviceToDevice)); });
    time_it("memset_4b_ns", [&] { CK(cudaMemset(a + 200, 0, 4)); });
    time_it("memcpy_async_h2d_4b_ns", [&] { CK(cudaMemcpyAsync(a + 300, pinned, 4, cudaMemcpyHostToDevice, s)); });
    std::vector<void*> live(10000);
    for (auto& p : live) CK(cudaMalloc(&p, 512));
    time_it("memcpy_h2d_4b_with_10k_live_ns", [&] { CK(cudaMemcpy(a + 100, &host, 4, cudaMemcpyHostToDevice)); });
    for (auto p : live) CK(cudaFree(p));
    int back = 0;
    CK(cudaMemcpy(&back, a + 100, 4, cudaMemcpyDeviceToHost));
    CK(cudaFree(a));
    CK(cudaFree(b));
    CK(cudaFreeHost(pinned));
    CK(cudaStreamDestroy(s));
    m.print("copy", back == 7, "\"iters\": 2000");
    return back == 7 ? 0 : 1;
}
