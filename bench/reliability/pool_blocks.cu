// An RMM-style sub-allocator described through the NVTX memory API (issue 15): one 4 MiB
// cudaMalloc segment, carved into blocks by the program itself; each block is registered as
// an NVTX region of a heap over the segment (as RMM does). Block A holds 1000 floats
// (4000 B) at the segment's start, block B 1024 floats at +4096 (512-byte rounding, as
// pools do).
//   clean: a kernel writes A's 1000 floats, another reads them back into B; checked on the
//          host: prints "ok".
//   bug:   the first kernel writes 1100 floats into A: 400 bytes past A, through the
//          pool's slack into B. Natively nothing faults (the segment is one allocation),
//          compute-sanitizer without NVTX support sees one allocation too.
//   uaf:   A's region unregistered (the pool took it back), the device synchronized, then
//          the kernel reads A.
#include <cstdio>
#include <cstring>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExtMem.h>

__global__ void fill(float *p, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = (float)i;
}

__global__ void copy(const float *src, float *dst, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = src[i] * 2.0f;
}

#define CHECK(x)                                                                    \
    do {                                                                            \
        cudaError_t e = (x);                                                        \
        if (e != cudaSuccess) {                                                     \
            fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e));                 \
            return 3;                                                               \
        }                                                                           \
    } while (0)

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "clean";
    const size_t segment_bytes = 4 << 20;
    char *segment = nullptr;
    CHECK(cudaMalloc(&segment, segment_bytes));
    float *a = (float *)segment, *b = (float *)(segment + 4096);
    const int na = 1000, nb = 1024;

    nvtxDomainHandle_t domain = nvtxDomainCreateA("pool_blocks");
    nvtxMemVirtualRangeDesc_t heap_range = {segment_bytes, segment};
    nvtxMemHeapDesc_t heap_desc = {};
    heap_desc.extCompatID = NVTX_EXT_COMPATID_MEM;
    heap_desc.structSize = sizeof heap_desc;
    heap_desc.usage = NVTX_MEM_HEAP_USAGE_TYPE_SUB_ALLOCATOR;
    heap_desc.type = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
    heap_desc.typeSpecificDescSize = sizeof heap_range;
    heap_desc.typeSpecificDesc = &heap_range;
    nvtxMemHeapHandle_t heap = nvtxMemHeapRegister(domain, &heap_desc);
    nvtxMemVirtualRangeDesc_t regions[2] = {{na * sizeof(float), a}, {nb * sizeof(float), b}};
    nvtxMemRegionHandle_t handles[2] = {};
    nvtxMemRegionsRegisterBatch_t batch = {};
    batch.extCompatID = NVTX_EXT_COMPATID_MEM;
    batch.structSize = sizeof batch;
    batch.regionType = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
    batch.heap = heap;
    batch.regionCount = 2;
    batch.regionDescElementSize = sizeof regions[0];
    batch.regionDescElements = regions;
    batch.regionHandleElementsOut = handles;
    nvtxMemRegionsRegister(domain, &batch);

    if (!strcmp(mode, "uaf")) {
        nvtxMemRegionRef_t ref;
        ref.pointer = a;
        nvtxMemRegionsUnregisterBatch_t un = {};
        un.extCompatID = NVTX_EXT_COMPATID_MEM;
        un.structSize = sizeof un;
        un.refType = NVTX_MEM_REGION_REF_TYPE_POINTER;
        un.refCount = 1;
        un.refElementSize = sizeof ref;
        un.refElements = &ref;
        nvtxMemRegionsUnregister(domain, &un);
        CHECK(cudaDeviceSynchronize());
        copy<<<4, 256>>>(a, b, na);
        CHECK(cudaDeviceSynchronize());
        printf("uaf done\n");
        return 0;
    }
    int n = !strcmp(mode, "bug") ? 1100 : na;
    fill<<<(n + 255) / 256, 256>>>(a, n);
    copy<<<4, 256>>>(a, b, na);
    CHECK(cudaDeviceSynchronize());
    static float host[1024];
    CHECK(cudaMemcpy(host, b, na * sizeof(float), cudaMemcpyDeviceToHost));
    for (int i = 0; i < na; i++)
        if (host[i] != 2.0f * i && strcmp(mode, "bug")) {
            printf("wrong at %d: %f\n", i, host[i]);
            return 1;
        }
    nvtxMemHeapUnregister(domain, heap);
    CHECK(cudaFree(segment));
    printf("ok\n");
    return 0;
}
