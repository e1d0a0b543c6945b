// fork and CUDA, the two ways programs meet them (issue 12). Prints one JSON line.
//
//   fork300 busy N      the parent initialises CUDA and 4 threads allocate, set and free in
//                       a loop while it forks N children; each child calls CUDA (which it
//                       cannot use: NVIDIA leaves it undefined, the driver fails the calls)
//                       and exits. What counts: no child hangs (a 20 s alarm kills one).
//   fork300 clean N K   the parent never touches CUDA (PyTorch's `multiprocessing` fork
//                       pattern); N children, K at a time, each initialise CUDA and do real
//                       work: allocate, a kernel, copy back, verify, free. Child i with
//                       i % 10 == 3 writes one element past its buffer in the kernel, i % 10
//                       == 7 sets one byte past it with cudaMemset: both harmless natively
//                       (allocation granularity), both errors under gpusan (the memset in any
//                       mode, the kernel's in check mode). Even children leave by _exit (as
//                       multiprocessing's workers do), odd ones by exit.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cuda_runtime.h>

__global__ void fill(int *p, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = 3 * i + 1;
}

static double now() {
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

struct Tally {
    int ok = 0, failed = 0, hung = 0, crashed = 0;
    void add(int status) {
        if (WIFEXITED(status)) (WEXITSTATUS(status) == 0 ? ok : failed)++;
        else if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) hung++;
        else crashed++;
    }
};

static volatile int stop_busy;
static void *busy(void *) {
    while (!stop_busy) {
        void *p = nullptr;
        if (cudaMalloc(&p, 1 << 20) != cudaSuccess) continue;
        cudaMemset(p, 1, 1 << 20);
        cudaFree(p);
    }
    return nullptr;
}

static int busy_parent(int children) {
    void *shared = nullptr;
    if (cudaError_t e = cudaMalloc(&shared, 4096)) {
        printf("{\"phase\": \"busy\", \"error\": \"cudaMalloc: %s\"}\n", cudaGetErrorString(e));
        return 2;
    }
    const int threads = 4;
    pthread_t t[threads];
    for (int i = 0; i < threads; i++) pthread_create(&t[i], nullptr, busy, nullptr);
    usleep(50000);
    double t0 = now();
    pid_t *kids = new pid_t[children];
    for (int i = 0; i < children; i++) {
        kids[i] = fork();
        if (kids[i] == 0) {
            alarm(20);
            void *c = nullptr;
            cudaError_t e = cudaMalloc(&c, 4096);
            cudaMemset(shared, 0, 4096);  // the parent's memory: what the audit's children set
            if (e == cudaSuccess) cudaFree(c);
            _exit(e == cudaSuccess ? 0 : 1);  // 1: refused, as CUDA says it must be
        }
    }
    stop_busy = 1;
    for (int i = 0; i < threads; i++) pthread_join(t[i], nullptr);
    Tally tally;
    for (int i = 0; i < children; i++) {
        int st = 0;
        if (kids[i] < 0 || waitpid(kids[i], &st, 0) != kids[i]) tally.crashed++;
        else tally.add(st);
    }
    cudaFree(shared);
    // "failed": the child's CUDA calls were refused (expected); "hung": killed by its alarm.
    printf("{\"phase\": \"busy\", \"children\": %d, \"exited_calls_ok\": %d, \"exited_calls_refused\": %d, "
           "\"hung\": %d, \"crashed\": %d, \"seconds\": %.2f}\n",
           children, tally.ok, tally.failed, tally.hung, tally.crashed, now() - t0);
    return tally.hung || tally.crashed;
}

// One child's work; its exit status is 0 when the in-bounds results are right.
static void worker(int i) {
    alarm(20);
    const int n = 4096;
    int *d = nullptr, *h = (int *)malloc(n * sizeof(int));
    int bad = cudaMalloc(&d, n * sizeof(int)) != cudaSuccess;
    if (!bad) {
        fill<<<(n + 255) / 256 + 1, 256>>>(d, i % 10 == 3 ? n + 1 : n);
        bad |= cudaMemcpy(h, d, n * sizeof(int), cudaMemcpyDeviceToHost) != cudaSuccess;
        for (int k = 0; k < n && !bad; k++) bad |= h[k] != 3 * k + 1;
        if (i % 10 == 7) cudaMemset(d, 0, n * sizeof(int) + 1);
        bad |= cudaDeviceSynchronize() != cudaSuccess;
        bad |= cudaFree(d) != cudaSuccess;
    }
    if (i % 2) exit(bad);
    _exit(bad);
}

static int clean_parent(int children, int at_once) {
    double t0 = now();
    std::map<pid_t, int> running;
    Tally tally;
    int started = 0, kernel_bugs = 0, memset_bugs = 0;
    while (started < children || !running.empty()) {
        if (started < children && (int)running.size() < at_once) {
            int i = started++;
            kernel_bugs += i % 10 == 3;
            memset_bugs += i % 10 == 7;
            pid_t pid = fork();
            if (pid == 0) worker(i);
            if (pid < 0) tally.crashed++;
            else running[pid] = i;
            continue;
        }
        int st = 0;
        pid_t pid = wait(&st);
        if (pid < 0) break;
        running.erase(pid);
        tally.add(st);
    }
    printf("{\"phase\": \"clean\", \"children\": %d, \"at_once\": %d, \"ok\": %d, \"failed\": %d, \"hung\": %d, "
           "\"crashed\": %d, \"kernel_bugs\": %d, \"memset_bugs\": %d, \"seconds\": %.2f}\n",
           children, at_once, tally.ok, tally.failed, tally.hung, tally.crashed, kernel_bugs, memset_bugs,
           now() - t0);
    return tally.ok != children;
}

int main(int argc, char **argv) {
    setvbuf(stdout, nullptr, _IONBF, 0);  // children must not flush a copy of the parent's buffer
    if (argc >= 3 && !strcmp(argv[1], "busy")) return busy_parent(atoi(argv[2]));
    if (argc >= 4 && !strcmp(argv[1], "clean")) return clean_parent(atoi(argv[2]), atoi(argv[3]));
    fprintf(stderr, "usage: fork300 busy N | fork300 clean N K\n");
    return 2;
}
