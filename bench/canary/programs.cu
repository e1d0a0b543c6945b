// Clean programs for bench/reliability/canary_programs.sh (issue 17): what `gpusan run
// --mode canary` must leave alone, with every byte of every allocation written up to its
// last one (a canary one byte too early is a false positive here), and the host behaviour
// the guard must not change.
//
//   programs fork      fork before any CUDA call (the child uses CUDA on its own: its own
//                      guard), then after (the child does host work only and exits)
//   programs graph     a stream captured in global mode (kernels, memset, copies, a memory
//                      node of an odd size) with the host idle 5 ms mid-capture (a guard that
//                      touched the device then would invalidate it), launched 50 times on
//                      two streams; then cudaDeviceReset and work after it
//   programs threads   8 threads, each its own stream: 150 rounds of allocations of odd sizes
//                      (cudaMalloc, cudaMallocAsync), kernels filling them to the last byte,
//                      memsets, stream and device synchronizations, frees
//   programs kinds     pitched 2D and 3D allocations written to the last byte of the last
//                      row's pitch, managed memory written by host and device, mapped host
//                      memory, a custom memory pool, memsets and copies of exact sizes
//
// Prints deterministic lines (checksums) and `OK` last; exit 0. Any difference from native
// output under gpusan is a change of behaviour.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#define CK(call)                                                                                 \
    do {                                                                                         \
        cudaError_t e_ = (call);                                                                 \
        if (e_ != cudaSuccess) {                                                                 \
            printf("FAIL %s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorName(e_));      \
            fflush(stdout);                                                                      \
            exit(1);                                                                             \
        }                                                                                        \
    } while (0)

// Every byte of p[0, n): a value of its index and a seed.
__global__ void fill_bytes(unsigned char *p, size_t n, unsigned seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = (unsigned char)((i * 131u + seed) & 0xff);
}

// Sum of p[0, n) into *out (atomic, order-free: deterministic for integers).
__global__ void sum_bytes(const unsigned char *p, size_t n, unsigned long long *out) {
    unsigned long long s = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        s += p[i];
    atomicAdd(out, s);
}

static unsigned long long expect_sum(size_t n, unsigned seed) {
    unsigned long long s = 0;
    for (size_t i = 0; i < n; i++) s += (unsigned char)((i * 131u + seed) & 0xff);
    return s;
}

// Fills [p, p+n) on `s` and returns its sum read back (synchronizing `s`).
static unsigned long long fill_and_sum(void *p, size_t n, unsigned seed, cudaStream_t s, unsigned long long *acc) {
    fill_bytes<<<8, 128, 0, s>>>((unsigned char *)p, n, seed);
    CK(cudaMemsetAsync(acc, 0, sizeof *acc, s));
    sum_bytes<<<8, 128, 0, s>>>((const unsigned char *)p, n, acc);
    unsigned long long h = 0;
    CK(cudaMemcpyAsync(&h, acc, sizeof h, cudaMemcpyDeviceToHost, s));
    CK(cudaStreamSynchronize(s));
    return h;
}

static const size_t kSizes[] = {1, 3, 17, 255, 511, 1000, 4000, 4096, 4099, 65537, (1 << 20) + 7};

static int cuda_work(const char *who, unsigned seed) {
    unsigned long long *acc;
    CK(cudaMalloc(&acc, sizeof *acc));
    int bad = 0;
    unsigned long long total = 0;
    for (size_t n : kSizes) {
        void *p;
        CK(cudaMalloc(&p, n));
        unsigned long long got = fill_and_sum(p, n, seed, 0, acc);
        bad += got != expect_sum(n, seed);
        total += got;
        CK(cudaMemset(p, 0x5a, n));
        CK(cudaFree(p));
    }
    CK(cudaFree(acc));
    CK(cudaDeviceSynchronize());
    printf("%s: sum=%llu bad=%d\n", who, total, bad);
    fflush(stdout);
    return bad;
}

static int mode_fork() {
    pid_t c = fork();
    if (c == 0) _exit(cuda_work("child before cuda", 3) ? 9 : 0);
    int st = 0;
    waitpid(c, &st, 0);
    printf("child before cuda exit=%d\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
    int bad = cuda_work("parent", 5);
    void *keep;
    CK(cudaMalloc(&keep, 1000));
    fflush(stdout);
    c = fork();
    if (c == 0) {
        unsigned long long s = expect_sum(1 << 20, 7);  // host work only: CUDA is the parent's
        _exit(s == expect_sum(1 << 20, 7) ? 0 : 9);
    }
    waitpid(c, &st, 0);
    printf("child after cuda exit=%d\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
    bad += cuda_work("parent after fork", 11);
    CK(cudaFree(keep));
    return bad;
}

static int mode_graph() {
    cudaStream_t s, s2;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    const size_t n = 4000, m = 65537;
    unsigned char *a, *b;
    unsigned long long *acc;
    CK(cudaMalloc(&a, n));
    CK(cudaMalloc(&b, m));
    CK(cudaMalloc(&acc, sizeof *acc));
    CK(cudaMemset(acc, 0, sizeof *acc));
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    fill_bytes<<<8, 128, 0, s>>>(a, n, 1);
    CK(cudaMemsetAsync(b, 7, m, s));
    CK(cudaMemcpyAsync(b + (m - n), a, n, cudaMemcpyDeviceToDevice, s));
    usleep(5000);  // the guard's timer fires while the capture is open
    unsigned char *tmp;
    CK(cudaMallocAsync((void **)&tmp, 1001, s));
    fill_bytes<<<4, 128, 0, s>>>(tmp, 1001, 2);
    sum_bytes<<<4, 128, 0, s>>>(tmp, 1001, acc);
    CK(cudaFreeAsync(tmp, s));
    sum_bytes<<<8, 128, 0, s>>>(b, m, acc);
    cudaGraph_t g;
    CK(cudaStreamEndCapture(s, &g));
    cudaGraphExec_t ge;
    CK(cudaGraphInstantiate(&ge, g, 0));
    for (int i = 0; i < 50; i++) CK(cudaGraphLaunch(ge, i % 2 ? s2 : s));
    CK(cudaStreamSynchronize(s));
    CK(cudaStreamSynchronize(s2));
    CK(cudaDeviceSynchronize());
    unsigned long long h = 0;
    CK(cudaMemcpy(&h, acc, sizeof h, cudaMemcpyDeviceToHost));
    unsigned long long per = expect_sum(1001, 2) + 7ull * (m - n) + expect_sum(n, 1);
    printf("graph: sum=%llu expect=%llu\n", h, 50 * per);
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(g));
    CK(cudaFree(a));
    CK(cudaFree(b));
    CK(cudaFree(acc));
    CK(cudaStreamDestroy(s));
    CK(cudaStreamDestroy(s2));
    // Events and the legacy default stream around a kernel, then a reset.
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    CK(cudaEventRecord(e0));
    int bad = cuda_work("before reset", 13);
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    printf("event query=%s\n", cudaGetErrorName(cudaEventQuery(e1)));
    CK(cudaDeviceReset());
    bad += cuda_work("after reset", 17);
    return bad + (h != 50 * per);
}

static int mode_threads() {
    const int kThreads = 8, kRounds = 150;
    std::vector<unsigned long long> sums(kThreads);
    std::vector<int> bads(kThreads);
    std::vector<std::thread> ts;
    for (int t = 0; t < kThreads; t++)
        ts.emplace_back([t, &sums, &bads] {
            cudaStream_t s;
            if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) {
                bads[t] = 1000;
                return;
            }
            unsigned long long *acc;
            cudaMalloc(&acc, sizeof *acc);
            unsigned x = 12345 + t;
            for (int r = 0; r < kRounds; r++) {
                x = x * 1103515245u + 12345u;
                size_t n = 1 + (x >> 8) % 20000;
                void *p = nullptr;
                bool async = r % 3 == 0;
                if ((async ? cudaMallocAsync(&p, n, s) : cudaMalloc(&p, n)) != cudaSuccess) {
                    bads[t]++;
                    continue;
                }
                unsigned long long got = fill_and_sum(p, n, x & 0xff, s, acc);
                bads[t] += got != expect_sum(n, x & 0xff);
                sums[t] += got;
                cudaMemsetAsync(p, 0, n, s);
                if (async)
                    cudaFreeAsync(p, s);
                else
                    cudaFree(p);
                if (r % 50 == 49) cudaDeviceSynchronize();
            }
            cudaStreamSynchronize(s);
            cudaFree(acc);
            cudaStreamDestroy(s);
        });
    for (auto &th : ts) th.join();
    int bad = 0;
    for (int t = 0; t < kThreads; t++) {
        printf("thread %d: sum=%llu bad=%d\n", t, sums[t], bads[t]);
        bad += bads[t];
    }
    return bad;
}

static int mode_kinds() {
    unsigned long long *acc;
    CK(cudaMalloc(&acc, sizeof *acc));
    int bad = 0;
    // Pitched: every byte of pitch * height (the pitch's padding is the program's to use).
    void *p2;
    size_t pitch;
    CK(cudaMallocPitch(&p2, &pitch, 1001, 37));
    unsigned long long got = fill_and_sum(p2, pitch * 37, 3, 0, acc);
    bad += got != expect_sum(pitch * 37, 3);
    CK(cudaMemset2D(p2, pitch, 1, 1001, 37));
    std::vector<unsigned char> host(1001 * 37, 9);
    CK(cudaMemcpy2D(p2, pitch, host.data(), 1001, 1001, 37, cudaMemcpyHostToDevice));
    printf("pitched: pitch_mod_256=%zu sum_ok=%d\n", pitch % 256, got == expect_sum(pitch * 37, 3));
    cudaPitchedPtr p3;
    CK(cudaMalloc3D(&p3, make_cudaExtent(999, 5, 7)));
    size_t n3 = p3.pitch * 5 * 7;
    got = fill_and_sum(p3.ptr, n3, 4, 0, acc);
    bad += got != expect_sum(n3, 4);
    CK(cudaMemset3D(p3, 2, make_cudaExtent(999, 5, 7)));
    // Managed: written by the host to its last byte, then by the device.
    unsigned char *mg;
    CK(cudaMallocManaged(&mg, 4001));
    for (int i = 0; i < 4001; i++) mg[i] = (unsigned char)i;
    got = fill_and_sum(mg, 4001, 5, 0, acc);
    bad += got != expect_sum(4001, 5) || mg[4000] != (unsigned char)((4000u * 131u + 5) & 0xff);
    // Mapped host memory, read and written by a kernel.
    unsigned char *hm, *dm;
    CK(cudaHostAlloc(&hm, 3001, cudaHostAllocMapped));
    CK(cudaHostGetDevicePointer(&dm, hm, 0));
    got = fill_and_sum(dm, 3001, 6, 0, acc);
    bad += got != expect_sum(3001, 6) || hm[3000] != (unsigned char)((3000u * 131u + 6) & 0xff);
    // A custom pool, odd sizes, stream-ordered.
    cudaMemPool_t pool;
    cudaMemPoolProps props = {};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    CK(cudaMemPoolCreate(&pool, &props));
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    unsigned long long psum = 0;
    for (int i = 0; i < 20; i++) {
        void *q;
        size_t n = 97 * (i + 1) + i;
        CK(cudaMallocFromPoolAsync(&q, n, pool, s));
        got = fill_and_sum(q, n, i, s, acc);
        bad += got != expect_sum(n, i);
        psum += got;
        CK(cudaFreeAsync(q, s));
    }
    CK(cudaStreamSynchronize(s));
    printf("pool: sum=%llu\n", psum);
    // Copies of exact sizes between device buffers, ending at the last byte of both.
    void *x, *y;
    CK(cudaMalloc(&x, 12345));
    CK(cudaMalloc(&y, 12345));
    fill_bytes<<<8, 128>>>((unsigned char *)x, 12345, 8);
    CK(cudaMemcpy(y, x, 12345, cudaMemcpyDeviceToDevice));
    got = fill_and_sum(y, 12345, 8, 0, acc);
    bad += got != expect_sum(12345, 8);
    CK(cudaFree(x));
    CK(cudaFree(y));
    CK(cudaStreamDestroy(s));
    CK(cudaMemPoolDestroy(pool));
    CK(cudaFreeHost(hm));
    CK(cudaFree(mg));
    CK(cudaFree(p3.ptr));
    CK(cudaFree(p2));
    CK(cudaFree(acc));
    printf("kinds: bad=%d\n", bad);
    return bad;
}

int main(int argc, char **argv) {
    const char *m = argc > 1 ? argv[1] : "";
    int bad;
    if (!strcmp(m, "fork"))
        bad = mode_fork();
    else if (!strcmp(m, "graph"))
        bad = mode_graph();
    else if (!strcmp(m, "threads"))
        bad = mode_threads();
    else if (!strcmp(m, "kinds"))
        bad = mode_kinds();
    else {
        fprintf(stderr, "usage: programs fork|graph|threads|kinds\n");
        return 64;
    }
    CK(cudaDeviceSynchronize());
    printf("%s\n", bad ? "WRONG" : "OK");
    return bad ? 1 : 0;
}
