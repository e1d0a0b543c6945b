// A/B of where check-mode time goes in two kernels, without the runtime: each variant is a
// PTX file, JIT-compiled two ways (`load`: cuModuleLoadData of the PTX, as the driver does for
// a program; `link`: cuLinkCreate/AddData/Complete, then the cubin loaded, as gpusan's
// runtime did to keep the cubin for its cache) (made by bench/probes/prologue_ab.sh: native, instrumented, instrumented with the
// block-wide lookup taken out, ...), loaded with the driver API, given a real allocation
// table (lookup cache, header, one live entry per buffer) and an error buffer, and timed
// with CUDA events: median of 30 launches after 3 warm-ups. Prints one JSON object.
//
//   nvcc -O2 -o prologue_ab prologue_ab.cu -lcuda && ./prologue_ab DIR
//
// DIR holds stencil_<variant>.ptx (kernel _Z7jacobi5iiPKfPf, 8192 x 8192 floats, 32 x 8
// blocks), gemm_<variant>.ptx (kernel _Z11gemm_kerneliiiffPfS_S_, 512^3, 32 x 8 blocks) and
// sgemm_<variant>.ptx (bench/workloads/sgemm.cu's _Z11sgemm_tilediPKfS0_Pf, 2048^3, 32 x 32).
#include <cuda.h>
#include <dirent.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#define CK(x)                                                                          \
    do {                                                                               \
        CUresult r = (x);                                                              \
        if (r != CUDA_SUCCESS) {                                                       \
            const char* s = nullptr;                                                   \
            cuGetErrorString(r, &s);                                                   \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, s ? s : "?");    \
            return false;                                                              \
        }                                                                              \
    } while (0)

static const size_t CACHE = 1 << 20;  // gpusan_abi::table::LOOKUP_CACHE_BYTES

struct Entry {
    unsigned long long base, size, id;
    unsigned flags;
    int device;
};

// Table: [cache][header 32 B][entries], __gpusan_table = header.
static bool make_table(std::vector<std::pair<CUdeviceptr, size_t>> bufs, CUdeviceptr* table) {
    std::sort(bufs.begin(), bufs.end());
    std::vector<unsigned char> bytes(CACHE + 32 + 32 * bufs.size(), 0);
    unsigned long long* h = (unsigned long long*)&bytes[CACHE];
    h[0] = 0x54415347ull | (2ull << 32);  // "GSAT", layout 2
    h[1] = bufs.size();
    for (size_t i = 0; i < bufs.size(); i++) {
        Entry* e = (Entry*)&bytes[CACHE + 32 + 32 * i];
        *e = Entry{bufs[i].first, bufs[i].second, i + 1, 1u | (1u << 8), 0};
    }
    CUdeviceptr p;
    CK(cuMemAlloc(&p, bytes.size()));
    CK(cuMemcpyHtoD(p, bytes.data(), bytes.size()));
    *table = p + CACHE;
    return true;
}

static bool set_abi(CUmodule m, CUdeviceptr table, CUdeviceptr errors) {
    CUdeviceptr v;
    size_t n;
    if (cuModuleGetGlobal(&v, &n, m, "__gpusan_table") == CUDA_SUCCESS) {
        CK(cuMemcpyHtoD(v, &table, 8));
        CK(cuModuleGetGlobal(&v, &n, m, "__gpusan_errors"));
        CK(cuMemcpyHtoD(v, &errors, 8));
    }
    return true;
}

static bool time_kernel(CUfunction f, dim3 grid, dim3 block, void** args, double* median) {
    CUevent a, b;
    CK(cuEventCreate(&a, 0));
    CK(cuEventCreate(&b, 0));
    std::vector<float> ms;
    for (int i = 0; i < 33; i++) {
        CK(cuEventRecord(a, 0));
        CK(cuLaunchKernel(f, grid.x, grid.y, 1, block.x, block.y, 1, 0, 0, args, nullptr));
        CK(cuEventRecord(b, 0));
        CK(cuEventSynchronize(b));
        float t;
        CK(cuEventElapsedTime(&t, a, b));
        if (i >= 3) ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    *median = ms[ms.size() / 2];
    cuEventDestroy(a);
    cuEventDestroy(b);
    return true;
}

static std::string slurp(const std::string& p) {
    std::ifstream f(p);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}

int main(int argc, char** argv) {
    if (argc < 2) return 2;
    std::string dir = argv[1];
    if (cuInit(0) != CUDA_SUCCESS) return 1;
    CUdevice dev;
    CUcontext ctx;
    cuDeviceGet(&dev, 0);
    cuDevicePrimaryCtxRetain(&ctx, dev);
    cuCtxSetCurrent(ctx);
    char name[256];
    cuDeviceGetName(name, sizeof name, dev);

    const int nx = 8192, ny = 8192, n = 512, sn = 2048;
    CUdeviceptr in, out, a, b, c, sa, sb, sc, errors;
    size_t sbytes = (size_t)nx * ny * 4, gbytes = (size_t)n * n * 4, sgbytes = (size_t)sn * sn * 4;
    cuMemAlloc(&sa, sgbytes);
    cuMemAlloc(&sb, sgbytes);
    cuMemAlloc(&sc, sgbytes);
    cuMemsetD8(sa, 0, sgbytes);
    cuMemsetD8(sb, 0, sgbytes);
    cuMemAlloc(&in, sbytes);
    cuMemAlloc(&out, sbytes);
    cuMemAlloc(&a, gbytes);
    cuMemAlloc(&b, gbytes);
    cuMemAlloc(&c, gbytes);
    cuMemsetD8(in, 0, sbytes);
    cuMemsetD8(a, 0, gbytes);
    cuMemsetD8(b, 0, gbytes);
    cuMemsetD8(c, 0, gbytes);
    cuMemAlloc(&errors, 16 + 64 * 4096);
    unsigned hdr[4] = {0, 4096, 0, 0};
    cuMemcpyHtoD(errors, hdr, 16);
    CUdeviceptr table;
    if (!make_table({{in, sbytes}, {out, sbytes}, {a, gbytes}, {b, gbytes}, {c, gbytes}, {sa, sgbytes}, {sb, sgbytes},
                     {sc, sgbytes}, {errors, 16 + 64 * 4096}},
                    &table))
        return 1;

    std::vector<std::string> files;
    if (DIR* d = opendir(dir.c_str())) {
        while (dirent* e = readdir(d)) {
            std::string f = e->d_name;
            if (f.size() > 4 && f.substr(f.size() - 4) == ".ptx") files.push_back(f);
        }
        closedir(d);
    }
    std::sort(files.begin(), files.end());
    printf("{\"device\": \"%s\", \"what\": \"kernel time (ms, median of 30 launches, CUDA events) of PTX variants loaded with the driver API, a real table of 9 live entries\", \"results\": {", name);
    bool first = true;
    for (int how = 0; how < 2; how++)
    for (auto& f : files) {
        std::string ptx = slurp(dir + "/" + f);
        CUmodule m;
        CUresult r;
        if (how == 0) {
            r = cuModuleLoadData(&m, ptx.c_str());
        } else {
            CUlinkState ls;
            void* cubin = nullptr;
            size_t size = 0;
            r = cuLinkCreate(0, nullptr, nullptr, &ls);
            if (r == CUDA_SUCCESS) r = cuLinkAddData(ls, CU_JIT_INPUT_PTX, (void*)ptx.c_str(), ptx.size() + 1, "v", 0, nullptr, nullptr);
            if (r == CUDA_SUCCESS) r = cuLinkComplete(ls, &cubin, &size);
            if (r == CUDA_SUCCESS) r = cuModuleLoadData(&m, cubin);
            cuLinkDestroy(ls);
        }
        double med = -1;
        unsigned errs = 0;
        if (r == CUDA_SUCCESS) {
            set_abi(m, table, errors);
            CUfunction fn;
            bool stencil = f.rfind("stencil", 0) == 0;
            if (f.rfind("sgemm", 0) == 0) {
                int an = sn;
                void* args[] = {&an, &sa, &sb, &sc};
                if (cuModuleGetFunction(&fn, m, "_Z11sgemm_tilediPKfS0_Pf") == CUDA_SUCCESS)
                    time_kernel(fn, dim3(sn / 32, sn / 32), dim3(32, 32), args, &med);
            } else if (stencil) {
                int ax = nx, ay = ny;
                void* args[] = {&ax, &ay, &in, &out};
                if (cuModuleGetFunction(&fn, m, "_Z7jacobi5iiPKfPf") == CUDA_SUCCESS)
                    time_kernel(fn, dim3(nx / 32, ny / 8), dim3(32, 8), args, &med);
            } else {
                int ni = n, nj = n, nk = n;
                float alpha = 1.5f, beta = 1.2f;
                void* args[] = {&ni, &nj, &nk, &alpha, &beta, &a, &b, &c};
                if (cuModuleGetFunction(&fn, m, "_Z11gemm_kerneliiiffPfS_S_") == CUDA_SUCCESS)
                    time_kernel(fn, dim3(n / 32, n / 8), dim3(32, 8), args, &med);
            }
            cuCtxSynchronize();
            cuMemcpyDtoH(hdr, errors, 16);
            errs = hdr[0];
            cuModuleUnload(m);
        }
        printf("%s\n  \"%s %s\": {\"ms\": %.5f, \"load\": %d, \"errors_so_far\": %u}", first ? "" : ",", how ? "link" : "load", f.c_str(), med, (int)r, errs);
        first = false;
    }
    printf("\n}}\n");
    return 0;
}
