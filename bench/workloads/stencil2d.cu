// 2-D stencil: one 5-point Jacobi step (out = 0.2 * (c + n + s + w + e)) on an 8192 x 8192
// float grid, boundary copied; 2-D blocks of 32 x 8, one thread per point. The whole output
// is checked on the host.
#include "workload.h"

__global__ void jacobi5(int nx, int ny, const float* __restrict__ in, float* __restrict__ out) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= nx || y >= ny) return;
    size_t i = (size_t)y * nx + x;
    if (x == 0 || y == 0 || x == nx - 1 || y == ny - 1) {
        out[i] = in[i];
        return;
    }
    out[i] = 0.2f * (in[i] + in[i - nx] + in[i + nx] + in[i - 1] + in[i + 1]);
}

int main() {
    const int nx = 8192, ny = 8192;
    const size_t n = (size_t)nx * ny;
    float *in, *out;
    CK(cudaMalloc(&in, n * sizeof(float)));
    CK(cudaMalloc(&out, n * sizeof(float)));
    fill_values<<<sm_count() * 8, 512>>>(in, n, 7);
    CK(cudaMemset(out, 0xff, n * sizeof(float)));
    dim3 block(32, 8), grid((nx + 31) / 32, (ny + 7) / 8);
    auto ms = time_runs([&] { jacobi5<<<grid, block>>>(nx, ny, in, out); });
    std::vector<float> h(n), src(n);
    CK(cudaMemcpy(h.data(), out, n * sizeof(float), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++) src[i] = value_at(i, 7);
    bool ok = true;
    for (int y = 0; y < ny && ok; y++)
        for (int x = 0; x < nx && ok; x++) {
            size_t i = (size_t)y * nx + x;
            float want = (x == 0 || y == 0 || x == nx - 1 || y == ny - 1)
                             ? src[i]
                             : 0.2f * (src[i] + src[i - nx] + src[i + nx] + src[i - 1] + src[i + 1]);
            ok = close(h[i], want, 1e-5);
        }
    Metrics m;
    add_times(m, "stencil2d.ms", ms);
    m.add("stencil2d.gpoints_per_s", n / (median(ms) * 1e-3) / 1e9);
    CK(cudaFree(in));
    CK(cudaFree(out));
    m.print("stencil2d", ok, "\"nx\": 8192, \"ny\": 8192, \"runs\": 25");
    return ok ? 0 : 1;
}
