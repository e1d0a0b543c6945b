// Where the binary route's time goes (issue 14): kernels of different access densities,
// built machine-code-only by bench/binary-speed.sh and run natively, under
// compute-sanitizer and under gpusan's binary route with its empty and its full patch.
//
//   binary_speed KERNEL...   kernels: saxpy compute gemm reduce tiny (or all)
//
// Per kernel one line: `KERNEL first_ms=F kernel_ms=M accesses=A`: the first launch's
// wall time (with its synchronization: lazy module load, patching, params block), the median
// of 9 launches by CUDA events, and the global accesses one launch makes (the patch calls).
// `tiny` is 4000 launches of a one-thread kernel: `kernel_ms` is then the wall time per
// launch (the API's launch callback and sanitizerSetCallbackData, gpusan's launch path).
// Prints `ok` at the end, `checksum=` lines to compare runs.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#define CK(x)                                                                     \
    do {                                                                          \
        cudaError_t e_ = (x);                                                     \
        if (e_ != cudaSuccess) {                                                  \
            fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
            return 1;                                                             \
        }                                                                         \
    } while (0)

// Memory bound: three global accesses per thread and two flops.
__global__ void saxpy(int n, float a, const float *x, float *y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

// Compute bound: two global accesses per thread, 2 x 4096 dependent FMAs.
__global__ void compute(int n, const float *x, float *y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i], w = 1.0f;
    for (int k = 0; k < 4096; k++) {
        v = fmaf(v, 0.999f, 0.001f);
        w = fmaf(w, v, -0.5f);
    }
    y[i] = v + w;
}

// Tiled SGEMM through shared memory (16 x 16 tiles): two global loads per thread per tile,
// 32 shared loads per thread per tile (not patched: shared accesses are another kind).
#define TILE 16
__global__ void gemm(int n, const float *a, const float *b, float *c) {
    __shared__ float as[TILE][TILE], bs[TILE][TILE];
    int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0;
    for (int t = 0; t < n; t += TILE) {
        as[threadIdx.y][threadIdx.x] = a[row * n + t + threadIdx.x];
        bs[threadIdx.y][threadIdx.x] = b[(t + threadIdx.y) * n + col];
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TILE; k++) acc += as[threadIdx.y][k] * bs[k][threadIdx.x];
        __syncthreads();
    }
    c[row * n + col] = acc;
}

// Reduction: each thread sums 8 elements (grid-stride), a block reduces in shared memory,
// one atomic per block.
__global__ void reduce(int n, const float *x, float *sum) {
    __shared__ float part[256];
    float s = 0;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) s += x[i];
    part[threadIdx.x] = s;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w /= 2) {
        if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicAdd(sum, part[0]);
}

__global__ void tiny(int *p) { p[0] += 1; }

struct Timer {
    cudaEvent_t a, b;
    Timer() { cudaEventCreate(&a), cudaEventCreate(&b); }
};

static double now_ms() {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// First launch (wall, synchronized), then the median of 9 by events.
template <class F>
static int measure(const char *name, double accesses, F launch) {
    double t0 = now_ms();
    launch();
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    double first = now_ms() - t0;
    Timer t;
    std::vector<float> ms;
    for (int r = 0; r < 9; r++) {
        cudaEventRecord(t.a);
        launch();
        cudaEventRecord(t.b);
        CK(cudaEventSynchronize(t.b));
        float m;
        cudaEventElapsedTime(&m, t.a, t.b);
        ms.push_back(m);
    }
    CK(cudaGetLastError());
    std::sort(ms.begin(), ms.end());
    printf("%s first_ms=%.3f kernel_ms=%.4f accesses=%.0f\n", name, first, ms[ms.size() / 2], accesses);
    return 0;
}

static float checksum(const float *d, int n) {
    std::vector<float> h(n);
    cudaMemcpy(h.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost);
    double s = 0;
    for (int i = 0; i < n; i += 97) s += h[i];
    return (float)s;
}

int main(int argc, char **argv) {
    std::vector<const char *> want(argv + 1, argv + argc);
    auto wanted = [&](const char *k) {
        for (auto w : want)
            if (!strcmp(w, k) || !strcmp(w, "all")) return true;
        return false;
    };
    const int n = 1 << 24;
    float *x, *y, *z;
    CK(cudaMalloc(&x, n * sizeof(float)));
    CK(cudaMalloc(&y, n * sizeof(float)));
    CK(cudaMalloc(&z, n * sizeof(float)));
    {
        std::vector<float> h(n);
        for (int i = 0; i < n; i++) h[i] = (float)(((long long)i * 7919) % 1000) / 1000.0f;
        CK(cudaMemcpy(x, h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
        CK(cudaMemcpy(y, h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    }
    int blocks = (n + 255) / 256;
    if (wanted("saxpy")) {
        if (measure("saxpy", 3.0 * n, [&] { saxpy<<<blocks, 256>>>(n, 1.0001f, x, y); })) return 1;
        printf("checksum saxpy=%g\n", checksum(y, n));
    }
    if (wanted("compute")) {
        const int m = 1 << 20;
        if (measure("compute", 2.0 * m, [&] { compute<<<m / 256, 256>>>(m, x, z); })) return 1;
        printf("checksum compute=%g\n", checksum(z, m));
    }
    if (wanted("gemm")) {
        const int g = 1024;  // 3 matrices of 1024 x 1024 inside x, y, z
        dim3 grid(g / TILE, g / TILE), block(TILE, TILE);
        double accesses = 2.0 * g * g * (g / TILE) + (double)g * g;
        if (measure("gemm", accesses, [&] { gemm<<<grid, block>>>(g, x, y, z); })) return 1;
        printf("checksum gemm=%g\n", checksum(z, g * g));
    }
    if (wanted("reduce")) {
        float *sum;
        CK(cudaMalloc(&sum, sizeof(float)));
        CK(cudaMemset(sum, 0, sizeof(float)));
        const int rb = n / 256 / 8;
        if (measure("reduce", (double)n + rb, [&] { reduce<<<rb, 256>>>(n, x, sum); })) return 1;
        float h;
        CK(cudaMemcpy(&h, sum, sizeof h, cudaMemcpyDeviceToHost));
        printf("checksum reduce=%g\n", h);
        CK(cudaFree(sum));
    }
    if (wanted("tiny")) {
        int *p;
        CK(cudaMalloc(&p, sizeof(int)));
        CK(cudaMemset(p, 0, sizeof(int)));
        tiny<<<1, 1>>>(p);  // first launch: module load, patching, params block
        CK(cudaDeviceSynchronize());
        const int launches = 4000;
        double t0 = now_ms();
        for (int i = 0; i < launches; i++) tiny<<<1, 1>>>(p);
        CK(cudaDeviceSynchronize());
        double per = (now_ms() - t0) / launches;
        int h;
        CK(cudaMemcpy(&h, p, sizeof h, cudaMemcpyDeviceToHost));
        printf("tiny first_ms=0 kernel_ms=%.5f accesses=2\n", per);
        printf("checksum tiny=%d\n", h);
        CK(cudaFree(p));
    }
    CK(cudaFree(x));
    CK(cudaFree(y));
    CK(cudaFree(z));
    printf("ok\n");
    return 0;
}
