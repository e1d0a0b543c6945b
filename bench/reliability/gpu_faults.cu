// GPU faults as findings (issue 13), one scenario per run:  gpu_faults SCENARIO
//   sync        a kernel traps; cudaDeviceSynchronize fails; the program exits 1 (CUDA_CHECK)
//   abort       a kernel writes 4 bytes past a buffer, then another traps; the program
//               aborts on the synchronization's error (check mode must still report the write)
//   illegal     a kernel writes 1 TiB past a buffer: natively cudaErrorIllegalAddress
//   misaligned  a kernel reads an int at an odd address: natively cudaErrorMisalignedAddress
//   assert      a device-side assert fails: natively cudaErrorAssert
//   query       a kernel traps; the program learns of it only from cudaStreamQuery, exits 3
//   event_query the same through cudaEventQuery
//   unchecked   a kernel traps; the program never asks and exits 0 (after 200 ms)
// Prints `SCENARIO: <what CUDA returned>` as its last line.
#include <cassert>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>
#include <unistd.h>

__global__ void trap_if_negative(const int* n) {
    if (threadIdx.x == 3 && *n < 0) asm volatile("trap;");
}
__global__ void write_at(int* p, long long offset) {
    if (threadIdx.x == 0) p[offset] = 7;
}
__global__ void read_misaligned(const char* p, int* out) {
    if (threadIdx.x == 0) *out = *(const int*)(p + 1);
}
__global__ void assert_positive(const int* n) {
    assert(*n >= 0);
}

static int* minus_one() {
    int* n = nullptr;
    int v = -1;
    if (cudaMalloc(&n, sizeof v) != cudaSuccess || cudaMemcpy(n, &v, sizeof v, cudaMemcpyHostToDevice) != cudaSuccess) {
        printf("setup failed\n");
        exit(9);
    }
    return n;
}

static int report(const char* s, cudaError_t e, int code_on_error) {
    printf("%s: %s\n", s, cudaGetErrorName(e));
    fflush(stdout);
    return e == cudaSuccess ? 0 : code_on_error;
}

int main(int argc, char** argv) {
    if (argc < 2) return 2;
    const char* s = argv[1];
    int* n = minus_one();
    if (!strcmp(s, "sync")) {
        trap_if_negative<<<2, 32>>>(n);
        return report(s, cudaDeviceSynchronize(), 1);
    }
    if (!strcmp(s, "abort")) {
        int* buf;
        cudaMalloc(&buf, 256 * sizeof(int));
        write_at<<<1, 32>>>(buf, 256);
        trap_if_negative<<<2, 32>>>(n);
        cudaError_t e = cudaDeviceSynchronize();
        report(s, e, 1);
        if (e != cudaSuccess) abort();
        return 0;
    }
    if (!strcmp(s, "illegal")) {
        int* buf;
        cudaMalloc(&buf, 256 * sizeof(int));
        write_at<<<1, 32>>>(buf, 1LL << 38);
        return report(s, cudaDeviceSynchronize(), 1);
    }
    if (!strcmp(s, "misaligned")) {
        char* buf;
        int* out;
        cudaMalloc(&buf, 256);
        cudaMalloc(&out, sizeof(int));
        read_misaligned<<<1, 32>>>(buf, out);
        return report(s, cudaDeviceSynchronize(), 1);
    }
    if (!strcmp(s, "assert")) {
        assert_positive<<<1, 32>>>(n);
        return report(s, cudaDeviceSynchronize(), 1);
    }
    if (!strcmp(s, "query") || !strcmp(s, "event_query")) {
        cudaStream_t st;
        cudaEvent_t ev;
        cudaStreamCreate(&st);
        cudaEventCreate(&ev);
        trap_if_negative<<<2, 32, 0, st>>>(n);
        bool by_event = !strcmp(s, "event_query");
        if (by_event) cudaEventRecord(ev, st);
        cudaError_t e;
        while ((e = by_event ? cudaEventQuery(ev) : cudaStreamQuery(st)) == cudaErrorNotReady) {
        }
        return report(s, e, 3);
    }
    if (!strcmp(s, "unchecked")) {
        trap_if_negative<<<2, 32>>>(n);
        usleep(200 * 1000);
        printf("%s: never asked\n", s);
        return 0;
    }
    return 2;
}
