// GMOD's Table 3 (the three overflow experiments of its §6.6: single kernel, sequential
// kernels, concurrent kernels; coarse allocations from cudaMalloc and fine ones from device
// `malloc`), as one program with a scenario per run, for `gpusan run --mode canary` (issue 17;
// bench/reliability/canary_gmod.sh runs it, built with PTX and as machine code only).
//
//   gmod_table3 SCENARIO [--hold-ms N]
//
// SCENARIO is GRAIN_SHAPE_VARIANT: GRAIN `coarse` | `fine`, SHAPE `single` | `seq` | `conc`,
// VARIANT `over` (an off-by-one loop writes one float past the end of a 4000-byte buffer),
// `under` (coarse only: the loop starts one float before the start of the higher of two
// buffers, into the bytes after its lower neighbour) or `clean` (the same loop in bounds).
//   single  the attacked kernel is the overflowing one: it writes, then runs ~1 ms;
//   seq     kernel 1 overflows A and ends; kernel 2, the victim, reads B for ~1.2 ms;
//   conc    the victim runs ~10 ms on stream 1 reading B; the attacker overflows A on
//           stream 2 meanwhile.
// `under` sizes both buffers --under-bytes (default 4064): 4064 + canary mode's default pad of
// 32 bytes is 4096, a multiple of the driver's 512-byte packing, so the float before the
// higher buffer is the last of its lower neighbour's tail canary (natively: the neighbour's
// rounding slack, harmless). With another pad P, pass 4096 - P (a multiple of 4).
// Fine-grained scenarios allocate with device `malloc` (not guarded by this version of
// canary mode: a known gap); their bug variants do not free the overflowed buffer, so the
// device heap's own bookkeeping is not made to trip over it.
//
// Output: deterministic lines (`scenario=`, `result=`) that a clean run under gpusan must
// print exactly as natively; `time:` lines (host CLOCK_REALTIME in microseconds since the
// epoch: at main, right after the overflowing kernel's completion event was seen, at exit;
// the attacked kernel's time by CUDA events; device globaltimer from the bad write to the
// end of its kernel; `bad_store_gpu_ns`, the %globaltimer the out-of-bounds thread read just
// before its store, 0 when none) and `info:` lines (addresses' layout, %globaltimer's update
// period `globaltimer_step_ns`), which may differ; `done` last.
// After the last kernel the allocations stay live --hold-ms (default 40) before they are
// freed, so that a concurrent guard, not only the check before the free, can find them.
// --at-once (coarse): the attacker runs right after the cudaMallocs, no memset or copy
// between: canary mode writes a device allocation's canary at once but on its own stream,
// so an overflow that races the write is the plan's known window (recorded, not judged).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>
#include <string>
#include <time.h>
#include <unistd.h>

#define CK(call)                                                                                 \
    do {                                                                                         \
        cudaError_t e_ = (call);                                                                 \
        if (e_ != cudaSuccess) {                                                                 \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            exit(2);                                                                             \
        }                                                                                        \
    } while (0)

static double now_us() {
    timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

__device__ __forceinline__ uint64_t gtimer() {
    uint64_t t;
    // A memory clobber: the compiler keeps it before the bad store that follows it.
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t) : : "memory");
    return t;
}

__device__ void spin_ns(uint64_t ns) {
    uint64_t t0 = gtimer();
    while (gtimer() - t0 < ns) {
    }
}

// The off-by-one loop every attacker runs: elements first..last of p (n elements), one per
// thread. The thread whose element is out of bounds reads %globaltimer just before its store
// into *bad_ns: no scan can see the store earlier, so a finding's scan_gpu_ns minus it is the
// detection latency on one clock (GMOD's "from the occurrence of buffer overflow to
// detection").
__device__ void fill_range(float *p, int first, int last, int n, uint64_t *bad_ns) {
    for (int i = first + (int)threadIdx.x; i <= last; i += blockDim.x) {
        if (i < 0 || i >= n) *(volatile uint64_t *)bad_ns = gtimer();
        p[i] = 1.0f + (float)(i & 7);
    }
}

// The smallest step of %globaltimer seen by one thread (its update period on this GPU: the
// resolution of the latency above).
__global__ void timer_step(uint64_t *out) {
    uint64_t best = ~0ull, t = gtimer();
    for (int k = 0; k < 16; k++) {
        uint64_t u;
        while ((u = gtimer()) == t) {
        }
        if (u - t < best) best = u - t;
        t = u;
    }
    *out = best;
}

// single: the attacked kernel writes (out of bounds in the bug variants), then works ~ns.
// stamp[0..1]: globaltimer after the write and at the end; stamp[2]: just before the bad store.
__global__ void attacked(float *p, int first, int last, int n, uint64_t ns, uint64_t *stamp) {
    fill_range(p, first, last, n, stamp + 2);
    __syncthreads();
    if (threadIdx.x == 0) stamp[0] = gtimer();
    if (threadIdx.x == 0) spin_ns(ns);
    __syncthreads();
    if (threadIdx.x == 0) stamp[1] = gtimer();
}

__global__ void attacker(float *p, int first, int last, int n, uint64_t *stamp) {
    fill_range(p, first, last, n, stamp + 2);
    __syncthreads();
    if (threadIdx.x == 0) stamp[0] = stamp[1] = gtimer();
}

// The victim: sums b (deterministically, one partial per thread), then works ~ns.
__global__ void victim(const float *b, int n, uint64_t ns, float *out) {
    float acc = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) acc += b[i];
    out[threadIdx.x] = acc;
    if (threadIdx.x == 0) spin_ns(ns);
}

// Fine grain: the device heap. slots[0], slots[1]: A and B.
__global__ void heap_alloc(float **slots, int bytes) {
    if (threadIdx.x == 0) {
        slots[0] = (float *)malloc(bytes);
        slots[1] = (float *)malloc(bytes);
    }
}
__global__ void heap_fill(float **slots, int which, int first, int last, uint64_t *stamp) {
    float *p = slots[which];
    if (p) fill_range(p, first, last, last + 1, stamp + 2);
}
__global__ void heap_attacked(float **slots, int first, int last, int n, uint64_t ns, uint64_t *stamp) {
    float *p = slots[0];
    if (!p) return;
    fill_range(p, first, last, n, stamp + 2);
    __syncthreads();
    if (threadIdx.x == 0) stamp[0] = gtimer();
    if (threadIdx.x == 0) spin_ns(ns);
    __syncthreads();
    if (threadIdx.x == 0) stamp[1] = gtimer();
}
__global__ void heap_attacker(float **slots, int first, int last, int n, uint64_t *stamp) {
    float *p = slots[0];
    if (p) fill_range(p, first, last, n, stamp + 2);
    __syncthreads();
    if (threadIdx.x == 0) stamp[0] = stamp[1] = gtimer();
}
__global__ void heap_victim(float **slots, int n, uint64_t ns, float *out) {
    const float *b = slots[1];
    float acc = 0;
    if (b)
        for (int i = threadIdx.x; i < n; i += blockDim.x) acc += b[i];
    out[threadIdx.x] = acc;
    if (threadIdx.x == 0) spin_ns(ns);
}
__global__ void heap_free(float **slots, int free_a) {
    if (threadIdx.x == 0) {
        if (free_a) free(slots[0]);
        free(slots[1]);
    }
}

constexpr int kThreads = 256;
constexpr uint64_t kMs = 1000000;  // ns

struct Scenario {
    bool fine = false;
    std::string shape, variant;
};

static bool parse(const char *s, Scenario &sc) {
    std::string v(s);
    size_t a = v.find('_'), b = v.rfind('_');
    if (a == std::string::npos || a == b) return false;
    std::string grain = v.substr(0, a);
    sc.shape = v.substr(a + 1, b - a - 1);
    sc.variant = v.substr(b + 1);
    if (grain != "coarse" && grain != "fine") return false;
    sc.fine = grain == "fine";
    if (sc.shape != "single" && sc.shape != "seq" && sc.shape != "conc") return false;
    if (sc.variant != "over" && sc.variant != "clean" && !(sc.variant == "under" && !sc.fine)) return false;
    return true;
}

// Polls `ev` until it completes and returns the host time right after: the moment the
// overflowing kernel is known to be done.
static double wait_event_us(cudaEvent_t ev) {
    cudaError_t e;
    while ((e = cudaEventQuery(ev)) == cudaErrorNotReady) {
    }
    CK(e);
    return now_us();
}

int main(int argc, char **argv) {
    double t_main = now_us();
    Scenario sc;
    int hold_ms = 40, under_bytes = 4064;
    bool at_once = false;
    if (argc < 2 || !parse(argv[1], sc)) {
        fprintf(stderr,
                "usage: gmod_table3 {coarse|fine}_{single|seq|conc}_{over|under|clean} [--hold-ms N]"
                " [--under-bytes N] [--at-once]\n"
                "       (under: coarse only)\n");
        return 64;
    }
    for (int i = 2; i < argc; i++)
        if (!strcmp(argv[i], "--hold-ms") && i + 1 < argc) hold_ms = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--at-once")) at_once = true;
        else if (!strcmp(argv[i], "--under-bytes") && i + 1 < argc) under_bytes = atoi(argv[++i]);
    if (under_bytes < 4 || under_bytes > 4096 || under_bytes % 4) {
        fprintf(stderr, "--under-bytes: a multiple of 4, at most 4096\n");
        return 64;
    }
    const bool under = sc.variant == "under";
    const int n = under ? under_bytes / 4 : 1000;  // floats: --under-bytes or 4000 bytes
    const int first = under ? -1 : 0, last = sc.variant == "over" ? n : n - 1;
    const uint64_t work_ns = sc.shape == "single" ? kMs : sc.shape == "seq" ? 1200000 : 10 * kMs;

    cudaStream_t s1, s2;
    CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    cudaEvent_t k0, k1, done;
    CK(cudaEventCreate(&k0));
    CK(cudaEventCreate(&k1));
    CK(cudaEventCreate(&done));
    uint64_t *stamp;
    float *out;
    CK(cudaMalloc(&stamp, 3 * sizeof(uint64_t)));
    CK(cudaMemset(stamp, 0, 3 * sizeof(uint64_t)));
    CK(cudaMalloc(&out, kThreads * sizeof(float)));
    CK(cudaMemset(out, 0, kThreads * sizeof(float)));
    // Warm up the module (and, under gpusan, the guard) before anything is timed.
    victim<<<1, kThreads>>>(out, 0, 0, out);
    CK(cudaDeviceSynchronize());
    timer_step<<<1, 1>>>(stamp);
    uint64_t step_ns = 0;
    CK(cudaMemcpy(&step_ns, stamp, sizeof step_ns, cudaMemcpyDeviceToHost));
    CK(cudaMemset(stamp, 0, 3 * sizeof(uint64_t)));
    printf("info: globaltimer_step_ns=%llu\n", (unsigned long long)step_ns);

    float *a = nullptr, *b = nullptr, **slots = nullptr;
    float *target = nullptr;  // the buffer the attacker's loop runs over
    float *read = nullptr;    // the buffer the victim reads
    if (!sc.fine) {
        CK(cudaMalloc(&a, n * sizeof(float)));
        CK(cudaMalloc(&b, n * sizeof(float)));
        if (!at_once) {  // else the attacker runs right after the allocations
            CK(cudaMemset(a, 0, n * sizeof(float)));
            float *h = (float *)malloc(n * sizeof(float));
            for (int i = 0; i < n; i++) h[i] = (float)(i % 13);
            CK(cudaMemcpy(b, h, n * sizeof(float), cudaMemcpyHostToDevice));
            free(h);
        }
        float *lo = a < b ? a : b, *hi = a < b ? b : a;
        long gap = (long)((char *)hi - (char *)lo);
        // under: the loop starts one float before the higher buffer; the other is the
        // victim the sequential and concurrent shapes read.
        target = under ? hi : a;
        read = under ? lo : b;
        printf("info: gap=%ld adjacent=%d lower_tail_bytes=%ld\n", gap, gap <= 8192 ? 1 : 0,
               gap - (long)(n * sizeof(float)));
    } else {
        CK(cudaMalloc(&slots, 2 * sizeof(float *)));
        heap_alloc<<<1, 1>>>(slots, n * sizeof(float));
        heap_fill<<<1, kThreads>>>(slots, 1, 0, n - 1, stamp);
        CK(cudaDeviceSynchronize());
        float *hs[2];
        CK(cudaMemcpy(hs, slots, sizeof hs, cudaMemcpyDeviceToHost));
        if (!hs[0] || !hs[1]) {
            fprintf(stderr, "device malloc returned null\n");
            return 3;
        }
        printf("info: heap_gap=%ld\n", (long)((char *)hs[1] - (char *)hs[0]));
    }

    double t_over = 0;
    if (sc.shape == "single") {
        CK(cudaEventRecord(k0, s1));
        if (sc.fine)
            heap_attacked<<<1, kThreads, 0, s1>>>(slots, first, last, n, work_ns, stamp);
        else
            attacked<<<1, kThreads, 0, s1>>>(target, first, last, n, work_ns, stamp);
        CK(cudaEventRecord(k1, s1));
        t_over = wait_event_us(k1);
    } else if (sc.shape == "seq") {
        if (sc.fine)
            heap_attacker<<<1, kThreads, 0, s1>>>(slots, first, last, n, stamp);
        else
            attacker<<<1, kThreads, 0, s1>>>(target, first, last, n, stamp);
        CK(cudaEventRecord(done, s1));
        CK(cudaEventRecord(k0, s1));
        if (sc.fine)
            heap_victim<<<1, kThreads, 0, s1>>>(slots, n, work_ns, out);
        else
            victim<<<1, kThreads, 0, s1>>>(read, n, work_ns, out);
        CK(cudaEventRecord(k1, s1));
        t_over = wait_event_us(done);
    } else {  // conc
        CK(cudaEventRecord(k0, s1));
        if (sc.fine)
            heap_victim<<<1, kThreads, 0, s1>>>(slots, n, work_ns, out);
        else
            victim<<<1, kThreads, 0, s1>>>(read, n, work_ns, out);
        CK(cudaEventRecord(k1, s1));
        usleep(1000);  // the victim is running when the attacker starts
        if (sc.fine)
            heap_attacker<<<1, kThreads, 0, s2>>>(slots, first, last, n, stamp);
        else
            attacker<<<1, kThreads, 0, s2>>>(target, first, last, n, stamp);
        CK(cudaEventRecord(done, s2));
        t_over = wait_event_us(done);
    }
    CK(cudaEventSynchronize(k1));
    double t_last_kernel = now_us();
    CK(cudaDeviceSynchronize());
    float kernel_ms = 0;
    CK(cudaEventElapsedTime(&kernel_ms, k0, k1));
    uint64_t st[3];
    CK(cudaMemcpy(st, stamp, sizeof st, cudaMemcpyDeviceToHost));

    // The result: what the victim read (or, for single, the attacked buffer's own elements),
    // rounded to integers so that it prints identically wherever it runs.
    double result = 0;
    if (sc.shape == "single") {
        if (!sc.fine) {
            float h[1024];
            CK(cudaMemcpy(h, target, n * sizeof(float), cudaMemcpyDeviceToHost));
            for (int i = 0; i < n; i++) result += h[i];
        } else {
            result = -1;  // the heap buffer is not readable from the host
        }
    } else {
        float h[kThreads];
        CK(cudaMemcpy(h, out, sizeof h, cudaMemcpyDeviceToHost));
        for (int i = 0; i < kThreads; i++) result += h[i];
    }
    if (hold_ms > 0) usleep(hold_ms * 1000);
    if (sc.fine) {
        heap_free<<<1, 1>>>(slots, sc.variant == "clean");
        CK(cudaDeviceSynchronize());
        CK(cudaFree(slots));
    } else {
        CK(cudaFree(a));
        CK(cudaFree(b));
    }
    CK(cudaFree(stamp));
    CK(cudaFree(out));
    CK(cudaStreamDestroy(s1));
    CK(cudaStreamDestroy(s2));
    CK(cudaGetLastError());
    printf("scenario=%s\nresult=%.0f\n", argv[1], result);
    printf("time: t_main_us=%.1f t_overflow_done_us=%.1f t_last_kernel_us=%.1f t_exit_us=%.1f\n", t_main, t_over,
           t_last_kernel, now_us());
    printf("time: kernel_ms=%.4f write_to_kernel_end_ms=%.4f hold_ms=%d\n", kernel_ms, (st[1] - st[0]) / 1e6, hold_ms);
    // 0 in the clean variants (no store out of bounds).
    printf("time: bad_store_gpu_ns=%llu\n", (unsigned long long)st[2]);
    printf("done\n");
    return 0;
}
