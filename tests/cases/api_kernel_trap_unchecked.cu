// gpusan-case: api
// expect: kernel_fault
// expect-leak: none
// compute-sanitizer: yes
// native: ok
// what: a kernel traps and the program never asks: no synchronization, no error check, exit
//       code 0 natively; gpusan asks each context whose launches were never synchronized,
//       without waiting, at exit (the host sleeps 200 ms first, so the trap has happened);
//       the buffer is left unfreed (a free would synchronize and tell the program), and
//       is no leak: after the fault the context could not have freed it (the report says so)
#include <unistd.h>
#include "case.h"
__global__ void guard(const int* n) {
    if (threadIdx.x == 3 && *n < 0) asm volatile("trap;");
}
int main() {
    int* n;
    CK(cudaMalloc(&n, sizeof(int)));
    int minus = -1;
    CK(cudaMemcpy(n, &minus, sizeof(int), cudaMemcpyHostToDevice));
    guard<<<2, 32>>>(n);
    usleep(200 * 1000);
    printf("done (never asked)\n");
    return 0;
}
