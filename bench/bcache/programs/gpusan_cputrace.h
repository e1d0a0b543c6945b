/* The annotations a traced program may make (gpusan's CPU tracer, crates/cputrace).
 *
 * A program built without the tracer runs as before: the functions are weak, and the
 * macros call them only where the tracer is linked in.
 *
 * GPUSAN_READ_ONLY(p, n): the n bytes at p are read-only from here on (the paper's "simple
 * notation" that extracts read-only data: BCache serves them through the bounds caches).
 */
#ifndef GPUSAN_CPUTRACE_H
#define GPUSAN_CPUTRACE_H
#include <stddef.h>
#ifdef __cplusplus
extern "C" {
#endif
void gpusan_read_only(const void *p, size_t n) __attribute__((weak));
#ifdef __cplusplus
}
#endif
#define GPUSAN_READ_ONLY(p, n) do { if (gpusan_read_only) gpusan_read_only((p), (n)); } while (0)
#endif
