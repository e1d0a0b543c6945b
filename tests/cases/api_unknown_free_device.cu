// gpusan-case: api
// expect: unknown_free
// expect-leak: none
// compute-sanitizer: yes
// what: cudaFree of a device-looking value 1 GiB past a live buffer, in no allocation
#include "case.h"
int main() {
    char* d;
    CK(cudaMalloc(&d, 4096));
    TRY(cudaFree(d + (1ull << 30)));
    CK(cudaFree(d));
    BUG_DONE();
}
