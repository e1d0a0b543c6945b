// Shared by the overhead microbenchmarks of bench/runtime/ (see README.md there): error
// checks, medians, a host clock, and the one-line JSON each benchmark prints last.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>
#include <cuda_runtime.h>

#define CK(x)                                                                              \
    do {                                                                                   \
        cudaError_t ck_e = (x);                                                            \
        if (ck_e != cudaSuccess) {                                                         \
            fprintf(stderr, "FAIL %s:%d %s -> %s\n", __FILE__, __LINE__, #x,               \
                    cudaGetErrorName(ck_e));                                               \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

static inline double now_ns() {
    return (double)std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

static inline double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Flat metrics, printed as {"bench": ..., "ok": ..., "metrics": {...}} on one line.
struct Metrics {
    std::string body;
    void add(const std::string& name, double value) {
        char buf[64];
        snprintf(buf, sizeof buf, "%.6g", value);
        body += (body.empty() ? "\"" : ", \"") + name + "\": " + buf;
    }
    void print(const char* bench, bool ok, const std::string& params) {
        printf("{\"bench\": \"%s\", \"ok\": %s, \"params\": {%s}, \"metrics\": {%s}}\n", bench,
               ok ? "true" : "false", params.c_str(), body.c_str());
    }
};
