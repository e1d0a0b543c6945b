/* The pool-block interface of gpusan's runtime (crates/inject/include/gpusan_pools.h) as a
   recorder: each call appended as one line to $FAKE_POOL_LOG, so the tests of the Python
   hooks see exactly what the runtime would be told. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static void line(const char *text) {
  const char *path = getenv("FAKE_POOL_LOG");
  FILE *f = path ? fopen(path, "a") : NULL;
  if (f) {
    fputs(text, f);
    fclose(f);
  }
}

int gpusan_pool_block_alloc(uint64_t ptr, uint64_t size, uint64_t stream, int32_t device, uint32_t source) {
  char b[200];
  snprintf(b, sizeof b, "alloc %#llx %llu stream=%#llx device=%d source=%u\n", (unsigned long long)ptr,
           (unsigned long long)size, (unsigned long long)stream, device, source);
  line(b);
  return 0;
}

int gpusan_pool_block_free(uint64_t ptr, uint64_t stream, int32_t device, uint32_t source) {
  char b[200];
  snprintf(b, sizeof b, "free %#llx stream=%#llx device=%d source=%u\n", (unsigned long long)ptr,
           (unsigned long long)stream, device, source);
  line(b);
  return 0;
}
