// Device-side allocation lookup: which structure should instrumented kernels search?
//
// Every checked root does one lookup (LOADMETA): "which allocation contains this address?".
// This benchmark times four structures over the same synthetic allocation table, laid out
// the way cudaMalloc lays memory out (512-byte aligned blocks packed into 2 MiB pages, large
// blocks on their own pages), for table sizes from 16 to 100,000 live allocations and two
// access patterns:
//   uniform    every thread of the grid looks up the same address (a kernel parameter root)
//   divergent  each thread looks up an interior address of a random allocation (pointers
//              loaded from a table)
// Structures:
//   bsearch    the runtime's table today: 32-byte entries sorted by base, binary search on
//              entry.base (crates/runtime/src/registry.rs device_lookup)
//   keys       the same search over a dense array of bases (8 bytes each: 16 per cache line),
//              then one load of the entry found
//   eytzinger  bases in breadth-first (Eytzinger) order, branch-free descent, then the entry
//   pagehash   2 MiB page -> [first, last) entry range (open addressing), then a binary search
//              inside the range (usually 1-4 entries)
// Each kernel thread does one lookup and writes one word (so the baseline is a store-only
// kernel); the number reported is the extra time per lookup, ns per 1M lookups -> ps each,
// median of 30 runs (CUDA events). Results are checked against a host search.
// Prints one JSON line: {"bench": "lookup", "ok": ..., "metrics": {...}}.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>
#include <cuda_runtime.h>

#define CK(x)                                                                                  \
    do {                                                                                       \
        cudaError_t e = (x);                                                                   \
        if (e != cudaSuccess) {                                                                \
            fprintf(stderr, "FAIL %s:%d %s -> %s\n", __FILE__, __LINE__, #x, cudaGetErrorName(e)); \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

struct Entry {  // DeviceEntry: base, size, id, flags
    uint64_t base, size, id, flags;
};
struct Page {
    uint64_t page;  // page number + 1; 0 = empty slot
    uint32_t first, last;
};

struct Table {
    const Entry* entries;
    const uint64_t* keys;
    const uint64_t* eyt;       // 1-based Eytzinger order of bases; eyt[0] unused
    const uint32_t* eyt_index; // eyt position -> entry index
    const Page* pages;
    uint32_t n, page_mask;
};

__device__ __forceinline__ uint64_t miss() { return ~0ull; }

__device__ __forceinline__ uint64_t look_bsearch(const Table& t, uint64_t a) {
    uint32_t lo = 0, hi = t.n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (t.entries[mid].base <= a) lo = mid + 1; else hi = mid;
    }
    if (lo == 0) return miss();
    const Entry& e = t.entries[lo - 1];
    return a - e.base < e.size ? e.id : miss();
}

__device__ __forceinline__ uint64_t look_keys(const Table& t, uint64_t a) {
    uint32_t lo = 0, hi = t.n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (t.keys[mid] <= a) lo = mid + 1; else hi = mid;
    }
    if (lo == 0) return miss();
    const Entry& e = t.entries[lo - 1];
    return a - e.base < e.size ? e.id : miss();
}

__device__ __forceinline__ uint64_t look_eytzinger(const Table& t, uint64_t a) {
    // Find the last key <= a: descend, remembering the last node where we went right.
    uint32_t k = 1, best = 0;
    while (k <= t.n) {
        bool right = t.eyt[k] <= a;
        best = right ? k : best;
        k = 2 * k + (right ? 1 : 0);
    }
    if (best == 0) return miss();
    const Entry& e = t.entries[t.eyt_index[best]];
    return a - e.base < e.size ? e.id : miss();
}

__device__ __forceinline__ uint64_t look_pagehash(const Table& t, uint64_t a) {
    uint64_t p = (a >> 21) + 1;
    uint32_t h = (uint32_t)((p * 0x9E3779B97F4A7C15ull) >> 40) & t.page_mask;
    for (;;) {
        const Page& s = t.pages[h];
        if (s.page == 0) return miss();
        if (s.page == p) {
            uint32_t lo = s.first, hi = s.last;
            while (lo < hi) {
                uint32_t mid = lo + (hi - lo) / 2;
                if (t.keys[mid] <= a) lo = mid + 1; else hi = mid;
            }
            if (lo == 0) return miss();
            const Entry& e = t.entries[lo - 1];
            return a - e.base < e.size ? e.id : miss();
        }
        h = (h + 1) & t.page_mask;
    }
}

template <int KIND>
__global__ void lookups(Table t, const uint64_t* addrs, uint64_t uniform, int divergent, uint64_t* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    uint64_t a = divergent ? addrs[i] : uniform;
    uint64_t r;
    if (KIND == 0) r = a;  // baseline: no lookup
    else if (KIND == 1) r = look_bsearch(t, a);
    else if (KIND == 2) r = look_keys(t, a);
    else if (KIND == 3) r = look_eytzinger(t, a);
    else r = look_pagehash(t, a);
    out[i] = r;
}

static void eytzinger_fill(const std::vector<uint64_t>& sorted, std::vector<uint64_t>& eyt, std::vector<uint32_t>& idx,
                           uint32_t& i, uint32_t k) {
    if (k > sorted.size()) return;
    eytzinger_fill(sorted, eyt, idx, i, 2 * k);
    eyt[k] = sorted[i];
    idx[k] = i;
    i++;
    eytzinger_fill(sorted, eyt, idx, i, 2 * k + 1);
}

int main() {
    const char* names[] = {"baseline", "bsearch", "keys", "eytzinger", "pagehash"};
    const int sizes[] = {16, 1024, 20000, 100000};
    const int threads = 1 << 22;  // lookups per kernel
    std::string metrics;
    bool ok = true;
    std::mt19937_64 rng(42);
    uint64_t *d_addrs, *d_out;
    CK(cudaMalloc(&d_addrs, threads * sizeof(uint64_t)));
    CK(cudaMalloc(&d_out, threads * sizeof(uint64_t)));
    std::vector<uint64_t> out(threads);
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (int n : sizes) {
        // The table: cudaMalloc-like layout.
        std::vector<Entry> entries;
        uint64_t cursor = 0x7f0000000000ull;
        std::uniform_real_distribution<double> logsize(4, 22);  // 16 B .. 4 MiB
        for (int k = 0; k < n; k++) {
            uint64_t size = (uint64_t)std::pow(2.0, logsize(rng));
            uint64_t aligned = (size + 511) & ~511ull;
            if (aligned > (1u << 20)) cursor = (cursor + (2u << 20) - 1) & ~((2ull << 20) - 1);
            else if ((cursor >> 21) != ((cursor + aligned - 1) >> 21)) cursor = (cursor + (2u << 20) - 1) & ~((2ull << 20) - 1);
            entries.push_back({cursor, size, (uint64_t)k + 1, 1});
            cursor += aligned;
            if (rng() % 8 == 0) cursor += 512 * (1 + rng() % 16);  // freed holes
        }
        std::vector<uint64_t> keys(n), eyt(n + 1), addrs(threads);
        std::vector<uint32_t> eidx(n + 1);
        for (int k = 0; k < n; k++) keys[k] = entries[k].base;
        uint32_t pos = 0;
        eytzinger_fill(keys, eyt, eidx, pos, 1);
        // Page directory.
        std::vector<std::pair<uint64_t, std::pair<uint32_t, uint32_t>>> pages;
        for (int k = 0; k < n; k++) {
            uint64_t p0 = entries[k].base >> 21, p1 = (entries[k].base + entries[k].size - 1) >> 21;
            for (uint64_t p = p0; p <= p1; p++) {
                if (!pages.empty() && pages.back().first == p) pages.back().second.second = k + 1;
                else pages.push_back({p, {(uint32_t)k, (uint32_t)k + 1}});
            }
        }
        uint32_t cap = 1;
        while (cap < 2 * pages.size()) cap <<= 1;
        std::vector<Page> slots(cap, Page{0, 0, 0});
        for (auto& pg : pages) {
            uint64_t p = pg.first + 1;
            uint32_t h = (uint32_t)((p * 0x9E3779B97F4A7C15ull) >> 40) & (cap - 1);
            while (slots[h].page) h = (h + 1) & (cap - 1);
            slots[h] = Page{p, pg.second.first, pg.second.second};
        }
        for (int i = 0; i < threads; i++) {
            const Entry& e = entries[rng() % n];
            addrs[i] = e.base + rng() % e.size;
        }
        Entry* d_entries;
        uint64_t *d_keys, *d_eyt;
        uint32_t* d_eidx;
        Page* d_pages;
        CK(cudaMalloc(&d_entries, n * sizeof(Entry)));
        CK(cudaMalloc(&d_keys, n * sizeof(uint64_t)));
        CK(cudaMalloc(&d_eyt, (n + 1) * sizeof(uint64_t)));
        CK(cudaMalloc(&d_eidx, (n + 1) * sizeof(uint32_t)));
        CK(cudaMalloc(&d_pages, cap * sizeof(Page)));
        CK(cudaMemcpy(d_entries, entries.data(), n * sizeof(Entry), cudaMemcpyHostToDevice));
        CK(cudaMemcpy(d_keys, keys.data(), n * sizeof(uint64_t), cudaMemcpyHostToDevice));
        CK(cudaMemcpy(d_eyt, eyt.data(), (n + 1) * sizeof(uint64_t), cudaMemcpyHostToDevice));
        CK(cudaMemcpy(d_eidx, eidx.data(), (n + 1) * sizeof(uint32_t), cudaMemcpyHostToDevice));
        CK(cudaMemcpy(d_pages, slots.data(), cap * sizeof(Page), cudaMemcpyHostToDevice));
        CK(cudaMemcpy(d_addrs, addrs.data(), threads * sizeof(uint64_t), cudaMemcpyHostToDevice));
        Table t{d_entries, d_keys, d_eyt, d_eidx, d_pages, (uint32_t)n, cap - 1};
        const Entry& mid = entries[n / 2];
        uint64_t uniform = mid.base + mid.size / 2;
        double base_ms[2] = {0, 0};
        for (int kind = 0; kind < 5; kind++) {
            for (int div = 0; div < 2; div++) {
                auto launch = [&] {
                    int b = 256, g = (threads + b - 1) / b;
                    switch (kind) {
                        case 0: lookups<0><<<g, b>>>(t, d_addrs, uniform, div, d_out, threads); break;
                        case 1: lookups<1><<<g, b>>>(t, d_addrs, uniform, div, d_out, threads); break;
                        case 2: lookups<2><<<g, b>>>(t, d_addrs, uniform, div, d_out, threads); break;
                        case 3: lookups<3><<<g, b>>>(t, d_addrs, uniform, div, d_out, threads); break;
                        default: lookups<4><<<g, b>>>(t, d_addrs, uniform, div, d_out, threads); break;
                    }
                };
                for (int w = 0; w < 3; w++) launch();
                std::vector<float> ms;
                for (int r = 0; r < 30; r++) {
                    CK(cudaEventRecord(e0));
                    launch();
                    CK(cudaEventRecord(e1));
                    CK(cudaEventSynchronize(e1));
                    float x;
                    CK(cudaEventElapsedTime(&x, e0, e1));
                    ms.push_back(x);
                }
                CK(cudaGetLastError());
                std::sort(ms.begin(), ms.end());
                double med = ms[ms.size() / 2];
                if (kind == 0) base_ms[div] = med;
                if (kind > 0) {
                    CK(cudaMemcpy(out.data(), d_out, threads * sizeof(uint64_t), cudaMemcpyDeviceToHost));
                    for (int i = 0; i < threads; i += 997) {
                        uint64_t a = div ? addrs[i] : uniform;
                        auto it = std::upper_bound(keys.begin(), keys.end(), a);
                        uint64_t want = ~0ull;
                        if (it != keys.begin()) {
                            const Entry& e = entries[it - keys.begin() - 1];
                            if (a - e.base < e.size) want = e.id;
                        }
                        if (out[i] != want) {
                            if (ok) fprintf(stderr, "mismatch %s n=%d i=%d got %llu want %llu\n", names[kind], n, i,
                                            (unsigned long long)out[i], (unsigned long long)want);
                            ok = false;
                        }
                    }
                }
                char buf[160];
                snprintf(buf, sizeof buf, "%s\"%s.%s.n%d.ms\":%.5f,\"%s.%s.n%d.ps_per_lookup\":%.2f", metrics.empty() ? "" : ",",
                         names[kind], div ? "divergent" : "uniform", n, med, names[kind], div ? "divergent" : "uniform", n,
                         (med - base_ms[div]) * 1e9 / threads);
                metrics += buf;
            }
        }
        cudaFree(d_entries); cudaFree(d_keys); cudaFree(d_eyt); cudaFree(d_eidx); cudaFree(d_pages);
    }
    printf("{\"bench\":\"lookup\",\"ok\":%s,\"params\":{\"lookups_per_kernel\":%d,\"runs\":30},\"metrics\":{%s}}\n",
           ok ? "true" : "false", threads, metrics.c_str());
    return ok ? 0 : 1;
}
