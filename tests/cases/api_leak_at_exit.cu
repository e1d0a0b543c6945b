// gpusan-case: api
// expect: clean
// expect-leak: leak
// compute-sanitizer: no
// what: a 1 MiB cudaMalloc buffer is never freed; the program exits without cudaDeviceReset
//       (memcheck is believed to report leaks only when the context is destroyed)
#include "case.h"
int main() {
    void* kept;
    CK(cudaMalloc(&kept, 1 << 20));
    CK(cudaMemset(kept, 0, 1 << 20));
    void* freed;
    CK(cudaMalloc(&freed, 4096));
    CK(cudaFree(freed));
    DONE(true);
}
