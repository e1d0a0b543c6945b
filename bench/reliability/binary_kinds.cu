// The binary route's wider checks (issue 14), built machine-code only
// (`-gencode arch=compute_90,code=sm_90`: no PTX, so only the Compute Sanitizer patching
// route can check it). One program, a scenario per run, each a bug with its clean twin:
//   neighbour / neighbour_clean   4 KiB buffer y, then z allocated right after it
//       (adjacent=1 when z == y + n natively); the kernel writes y[n] (one float past the
//       end: z[0] natively) / y[n-1]. Found only through gpusan's red zone.
//   shared / shared_clean / shared_near   dynamic shared window of 8 KiB (+ 128 B static):
//       a write 2 KiB past the window / at its last float / at the first float past it
//       (shared_near: found only if the bound is exact; recorded, not required).
//   heap / heap_clean   device-side malloc, then free twice / once (one thread).
//   memcpy_async / memcpy_async_clean   cp.async (LDGSTS) of 16 bytes from src + n floats
//       (just past a buffer whose size is a multiple of 256: no alignment tail, only the
//       red zone is there) / from its last 16 bytes.
// Every scenario launches its kernel once with clean operands first (patching and loading
// happen then), then 5 timed launches with its own (1 for a bug: it may fault); prints
// `scenario=… kernel_ms=… [facts]`, and `ok` last when the program itself finished.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <cuda_pipeline.h>
#include <cuda_runtime.h>
#include <vector>

__global__ void store_at(float *y, int at) {
    if (blockIdx.x == 0 && threadIdx.x == 0) y[at] = 1.0f;
}

// `at` is a float index in the dynamic window (the static array lies before it).
__global__ void shared_at(float *out, int at) {
    __shared__ float fixed[32];
    extern __shared__ float window[];
    fixed[threadIdx.x & 31] = threadIdx.x;
    window[threadIdx.x] = 0.0f;
    __syncthreads();
    if (threadIdx.x == 0) window[at] = 2.0f;
    __syncthreads();
    out[threadIdx.x] = window[threadIdx.x] + fixed[threadIdx.x & 31];
}

__global__ void heap(int twice, int *out) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    int *p = (int *)malloc(64);
    if (!p) return;
    p[0] = 7;
    out[0] = p[0];
    free(p);
    if (twice) free(p);
}

__global__ void copy_async(const float *src, int from, float *out) {
    __shared__ __align__(16) float tile[4];
    if (threadIdx.x == 0) {
        __pipeline_memcpy_async(tile, src + from, 16);
        __pipeline_commit();
        __pipeline_wait_prior(0);
        out[0] = tile[0] + tile[3];
    }
}

#define CK(call)                                                                   \
    do {                                                                           \
        cudaError_t e_ = (call);                                                   \
        if (e_ != cudaSuccess) {                                                   \
            printf("fail: %s: %s\n", #call, cudaGetErrorString(e_));               \
            return 1;                                                              \
        }                                                                          \
    } while (0)

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    const char *s = argv[1];
    const int n = 1024;  // floats: 4 KiB, a multiple of 256 bytes
    const size_t bytes = n * sizeof(float);
    const int window = 8192;  // dynamic shared bytes
    bool bug = !strstr(s, "clean");
    float *y = 0, *z = 0, *out = 0;
    char facts[128] = "";
    CK(cudaMalloc(&out, 4096));
    CK(cudaMalloc(&y, bytes));
    CK(cudaMalloc(&z, bytes));
    CK(cudaMemset(y, 0, bytes));
    CK(cudaMemset(z, 0, bytes));
    snprintf(facts, sizeof facts, " adjacent=%d", z == y + n);
    // The launch with clean operands, then the scenario's: returns 0 or a launch error.
    auto launch = [&](bool clean) -> cudaError_t {
        if (!strncmp(s, "neighbour", 9)) {
            store_at<<<1, 32>>>(y, clean || !bug ? n - 1 : n);
        } else if (!strncmp(s, "shared", 6)) {
            int last = window / 4 - 1, at = last;
            if (!clean && !strcmp(s, "shared")) at = last + 1 + 512;
            if (!clean && !strcmp(s, "shared_near")) at = last + 1;
            shared_at<<<1, 128, window>>>(out, at);
        } else if (!strncmp(s, "heap", 4)) {
            heap<<<1, 32>>>(!clean && bug, (int *)out);
        } else if (!strncmp(s, "memcpy_async", 12)) {
            copy_async<<<1, 32>>>(y, clean || !bug ? n - 4 : n, out);
        } else {
            return cudaErrorInvalidValue;
        }
        return cudaGetLastError();
    };
    CK(launch(true));
    CK(cudaDeviceSynchronize());
    cudaEvent_t start, stop;
    CK(cudaEventCreate(&start));
    CK(cudaEventCreate(&stop));
    std::vector<float> ms;
    int reps = bug ? 1 : 5;
    for (int r = 0; r < reps; r++) {
        CK(cudaEventRecord(start));
        CK(launch(false));
        CK(cudaEventRecord(stop));
        CK(cudaEventSynchronize(stop));
        float t = 0;
        CK(cudaEventElapsedTime(&t, start, stop));
        ms.push_back(t);
    }
    CK(cudaDeviceSynchronize());
    std::sort(ms.begin(), ms.end());
    printf("scenario=%s kernel_ms=%.4f%s\n", s, ms[ms.size() / 2], facts);
    CK(cudaFree(y));
    CK(cudaFree(z));
    CK(cudaFree(out));
    printf("ok\n");
    return 0;
}
