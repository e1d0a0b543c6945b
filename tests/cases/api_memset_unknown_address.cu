// gpusan-case: api
// expect: unknown_device_address
// expect-leak: none
// compute-sanitizer: yes
// native: may-fail
// what: cudaMemset on a device-looking address 16 GiB past a live buffer, in no allocation
//       (CUDA is expected to refuse it: the suite records what it returns)
#include "case.h"
int main() {
    char* d;
    CK(cudaMalloc(&d, 4096));
    TRY(cudaMemset(d + (16ull << 30), 0, 256));
    CK(cudaFree(d));
    BUG_DONE();
}
