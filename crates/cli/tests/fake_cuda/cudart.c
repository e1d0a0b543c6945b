/* A stand-in for the CUDA runtime (`libcudart.so`): the two calls readable_prog.c makes,
 * each a frame of the runtime between the program and the driver, as the real one is.
 * Built without optimization, so each call keeps its frame. */
#include <stddef.h>
#include <stdint.h>

int cuMemAlloc_v2(uint64_t *, size_t);
int cuMemcpyHtoD_v2(uint64_t, const void *, size_t);

int cudaMalloc(void **ptr, size_t size) {
    return cuMemAlloc_v2((uint64_t *)ptr, size);
}

int cudaMemcpyToDevice(void *dst, const void *src, size_t size) {
    return cuMemcpyHtoD_v2((uint64_t)(uintptr_t)dst, src, size);
}
