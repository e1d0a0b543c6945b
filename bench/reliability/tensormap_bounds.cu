// Tensor maps made through the driver API and used by a TMA kernel (issue 14), for
// bench/reliability/tensormap_bounds.sh. A is 16 rows of 16 floats (1024 bytes, all 1.0), B
// another 1024 bytes of 7.0 allocated right after it. `tensormap_bounds SCENARIO [DOOR]`:
//   clean   a map of A exactly (dims [16, 16], rows 64 bytes apart); a 16 × 16 box at (0, 0)
//           loaded by TMA: sum 256
//   clip    the same map; the box at (8, 8): TMA clips it to the tensor (zeros past it),
//           nothing outside A is read: sum 64
//   over    dims [16, 17] on A (a row too many); the box at (0, 1): TMA reads row 16, the 64
//           bytes after A (natively B's 7.0 where B follows A: sum 352, not 240)
//   freed   A freed, then a map of it made (no kernel runs)
// DOOR: how the program gets cuTensorMapEncodeTiled: `entry` (cudaGetDriverEntryPointByVersion,
// as CUTLASS and PyTorch do; the default) or `dlsym` (dlopen libcuda.so.1, as Triton does).
// Prints one JSON line: {"scenario", "door", "encode_rc", "sum", "adjacent", "a_to_b"}.
#include <cuda.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstring>

typedef CUresult (*encode_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
                              const cuuint64_t *, const cuuint32_t *, const cuuint32_t *, CUtensorMapInterleave,
                              CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

constexpr int W = 16, H = 16;

__device__ static inline uint32_t smem(const void *p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

// One 16 × 16 float box at (x, y) loaded by TMA into shared memory, summed by thread 0.
__global__ void tma_sum(const __grid_constant__ CUtensorMap map, int x, int y, float *out) {
    __shared__ alignas(128) float tile[H][W];
    __shared__ alignas(8) uint64_t bar;
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem(&bar)));
        asm volatile("fence.proxy.async.shared::cta;");
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem(&bar)), "r"(W * H * 4));
        asm volatile(
            "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], "
            "[%4];" ::"r"(smem(tile)),
            "l"(reinterpret_cast<uint64_t>(&map)), "r"(x), "r"(y), "r"(smem(&bar))
            : "memory");
        uint32_t done = 0;
        while (!done)
            asm volatile(
                "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0; selp.u32 %0, 1, 0, p; }"
                : "=r"(done)
                : "r"(smem(&bar))
                : "memory");
        float s = 0;
        for (int i = 0; i < H; i++)
            for (int j = 0; j < W; j++) s += tile[i][j];
        *out = s;
    }
}

static encode_fn resolve(const char *door) {
    void *f = nullptr;
    if (!strcmp(door, "dlsym")) {
        void *h = dlopen("libcuda.so.1", RTLD_NOW);
        return h ? reinterpret_cast<encode_fn>(dlsym(h, "cuTensorMapEncodeTiled")) : nullptr;
    }
    cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
        return nullptr;
    return reinterpret_cast<encode_fn>(f);
}

int main(int argc, char **argv) {
    const char *scenario = argc > 1 ? argv[1] : "clean";
    const char *door = argc > 2 ? argv[2] : "entry";
    float *a = nullptr, *b = nullptr, *out = nullptr;
    cudaMalloc(&a, W * H * 4);
    cudaMalloc(&b, W * H * 4);
    cudaMalloc(&out, 4);
    float ones[W * H], sevens[W * H];
    for (int i = 0; i < W * H; i++) ones[i] = 1, sevens[i] = 7;
    cudaMemcpy(a, ones, sizeof ones, cudaMemcpyHostToDevice);
    cudaMemcpy(b, sevens, sizeof sevens, cudaMemcpyHostToDevice);
    encode_fn encode = resolve(door);
    if (!encode) {
        printf("{\"scenario\": \"%s\", \"door\": \"%s\", \"error\": \"no cuTensorMapEncodeTiled\"}\n", scenario, door);
        return 3;
    }
    bool over = !strcmp(scenario, "over"), freed = !strcmp(scenario, "freed");
    if (freed) cudaFree(a);
    alignas(64) CUtensorMap map;
    const cuuint64_t dims[2] = {W, static_cast<cuuint64_t>(over ? H + 1 : H)}, strides[1] = {W * 4};
    const cuuint32_t box[2] = {W, H}, estrides[2] = {1, 1};
    CUresult r = encode(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, a, dims, strides, box, estrides,
                        CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    float sum = -1;
    if (r == CUDA_SUCCESS && !freed) {
        int x = !strcmp(scenario, "clip") ? 8 : 0, y = over ? 1 : (x ? 8 : 0);
        tma_sum<<<1, 32>>>(map, x, y, out);
        cudaMemcpy(&sum, out, 4, cudaMemcpyDeviceToHost);
    }
    cudaError_t e = cudaDeviceSynchronize();
    long long gap = reinterpret_cast<char *>(b) - reinterpret_cast<char *>(a);
    printf("{\"scenario\": \"%s\", \"door\": \"%s\", \"encode_rc\": %d, \"sum\": %g, \"adjacent\": %s, \"a_to_b\": %lld, "
           "\"cuda\": \"%s\"}\n",
           scenario, door, static_cast<int>(r), sum, gap == W * H * 4 ? "true" : "false", gap, cudaGetErrorName(e));
    return e == cudaSuccess ? 0 : 1;
}
