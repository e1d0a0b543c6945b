// A driver-API program that ships its kernel as a fatbin file built with `nvcc -fatbin`
// (issue 12: under `gpusan run --mode check` such a program died with SIGSEGV). It reads the
// file into a buffer of exactly its size, loads it through one of the driver's entry points,
// launches `vadd` over N elements and checks every result.
//
//   fatbin_load FILE [data|dataex|fatbinary|library] [overflow]
//
// `overflow`: c is allocated one element short, so the kernel's last store is out of bounds
// (natively harmless: the driver rounds allocations up); only N - 1 results are compared.
// Prints "ok" and exits 0 when every result is right.
#include <cuda.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CK(x)                                                          \
    do {                                                               \
        CUresult r_ = (x);                                             \
        if (r_ != CUDA_SUCCESS) {                                      \
            const char* s_ = nullptr;                                  \
            cuGetErrorName(r_, &s_);                                   \
            printf("FAIL %s = %d (%s)\n", #x, (int)r_, s_ ? s_ : "?"); \
            return 1;                                                  \
        }                                                              \
    } while (0)

int main(int argc, char** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE [data|dataex|fatbinary|library] [overflow]\n", argv[0]);
        return 2;
    }
    const char* entry = argc > 2 ? argv[2] : "data";
    bool overflow = argc > 3 && !strcmp(argv[3], "overflow");
    FILE* f = fopen(argv[1], "rb");
    if (!f) {
        perror(argv[1]);
        return 2;
    }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    rewind(f);
    // Exactly the file's bytes, on the heap: nothing after them to lean on.
    std::vector<char> image(size);
    if (fread(image.data(), 1, size, f) != (size_t)size) return 2;
    fclose(f);

    CK(cuInit(0));
    CUdevice dev;
    CK(cuDeviceGet(&dev, 0));
    CUcontext ctx;
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    CUmodule module = nullptr;
    CUlibrary library = nullptr;
    CUfunction fn;
    if (!strcmp(entry, "data")) {
        CK(cuModuleLoadData(&module, image.data()));
    } else if (!strcmp(entry, "dataex")) {
        char log[4096] = {0};
        CUjit_option o[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
        void* v[] = {log, (void*)(size_t)sizeof log};
        CUresult r = cuModuleLoadDataEx(&module, image.data(), 2, o, v);
        if (r != CUDA_SUCCESS) printf("JIT log: %s\n", log);
        CK(r);
    } else if (!strcmp(entry, "fatbinary")) {
        CK(cuModuleLoadFatBinary(&module, image.data()));
    } else if (!strcmp(entry, "library")) {
        CK(cuLibraryLoadData(&library, image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
    } else {
        fprintf(stderr, "unknown entry point %s\n", entry);
        return 2;
    }
    // The program's buffer may go once the load returned (the driver copied what it needs).
    std::vector<char>().swap(image);
    if (library) {
        CUkernel k;
        CK(cuLibraryGetKernel(&k, library, "vadd"));
        CK(cuKernelGetFunction(&fn, k));
    } else {
        CK(cuModuleGetFunction(&fn, module, "vadd"));
    }

    const int n = 1 << 20;
    std::vector<float> a(n), b(n), c(n, -1.0f);
    for (int i = 0; i < n; i++) {
        a[i] = (float)i;
        b[i] = 2.0f * i;
    }
    size_t bytes = sizeof(float) * n, c_bytes = overflow ? bytes - sizeof(float) : bytes;
    CUdeviceptr da, db, dc;
    CK(cuMemAlloc(&da, bytes));
    CK(cuMemAlloc(&db, bytes));
    CK(cuMemAlloc(&dc, c_bytes));
    CK(cuMemcpyHtoD(da, a.data(), bytes));
    CK(cuMemcpyHtoD(db, b.data(), bytes));
    int count = n;
    void* args[] = {&da, &db, &dc, &count};
    CK(cuLaunchKernel(fn, (n + 255) / 256, 1, 1, 256, 1, 1, 0, nullptr, args, nullptr));
    CK(cuCtxSynchronize());
    CK(cuMemcpyDtoH(c.data(), dc, c_bytes));
    int wrong = 0;
    for (int i = 0; i < (int)(c_bytes / sizeof(float)); i++) wrong += c[i] != 3.0f * i;
    CK(cuMemFree(da));
    CK(cuMemFree(db));
    CK(cuMemFree(dc));
    if (library) CK(cuLibraryUnload(library));
    if (module) CK(cuModuleUnload(module));
    CK(cuDevicePrimaryCtxRelease(dev));
    printf("%s: %d wrong of %zu\n", wrong ? "WRONG" : "ok", wrong, c_bytes / sizeof(float));
    return wrong ? 1 : 0;
}
