/* A fake NVRTC (libnvrtc.so.13) for tests of gpusan's NVRTC door: a program's "source" is
 * PTX, and compiling it gives that PTX back. Compiled for a virtual architecture
 * (`-arch=compute_90`, or no architecture) the program has PTX and no cubin; for a real one
 * (`-arch=sm_90`) a cubin and no PTX, as NVRTC 12+ does. The cubin is an ELF header followed
 * by "FAKE-NVRTC:" and the source, its size in the header's section-header offset. Each
 * compilation's options are appended to $FAKE_NVRTC_LOG, one line per compilation. A source
 * containing "fail-virtual" fails to compile for a virtual architecture. Internal helpers
 * are static: a call through an exported name would reach gpusan's stand-in. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvrtcResult;
struct program { char *src; int cubin, compiled; unsigned char *bin; size_t bin_size; };

nvrtcResult nvrtcCreateProgram(void **prog, const char *src, const char *name, int n, const char *const *headers,
                               const char *const *names) {
    (void)name; (void)n; (void)headers; (void)names;
    struct program *p = calloc(1, sizeof *p);
    p->src = strdup(src);
    *prog = p;
    return 0;
}
nvrtcResult nvrtcAddNameExpression(void *prog, const char *expr) { (void)prog; (void)expr; return 0; }
nvrtcResult nvrtcCompileProgram(void *prog, int n, const char *const *options) {
    struct program *p = prog;
    const char *path = getenv("FAKE_NVRTC_LOG");
    FILE *log = path ? fopen(path, "a") : 0;
    p->cubin = 0;
    for (int i = 0; i < n; i++) {
        if (log) fprintf(log, "%s ", options[i]);
        if (strstr(options[i], "sm_")) p->cubin = 1;
    }
    if (log) { fputc('\n', log); fclose(log); }
    if (!p->cubin && strstr(p->src, "fail-virtual")) return 6; /* NVRTC_ERROR_COMPILATION */
    p->compiled = 1;
    free(p->bin);
    p->bin = 0;
    if (p->cubin) {
        size_t body = strlen(p->src) + 12;
        p->bin_size = 64 + body;
        p->bin = calloc(1, p->bin_size);
        memcpy(p->bin, "\x7f" "ELF\x02\x01\x01", 7);
        uint64_t end = p->bin_size;
        memcpy(p->bin + 0x28, &end, 8);
        snprintf((char *)p->bin + 64, body, "FAKE-NVRTC:%s", p->src);
    }
    return 0;
}
nvrtcResult nvrtcGetPTXSize(void *prog, size_t *size) {
    struct program *p = prog;
    if (!p->compiled || p->cubin) return 4; /* NVRTC_ERROR_INVALID_PROGRAM */
    *size = strlen(p->src) + 1;
    return 0;
}
nvrtcResult nvrtcGetPTX(void *prog, char *out) {
    struct program *p = prog;
    if (!p->compiled || p->cubin) return 4;
    memcpy(out, p->src, strlen(p->src) + 1);
    return 0;
}
nvrtcResult nvrtcGetCUBINSize(void *prog, size_t *size) {
    struct program *p = prog;
    if (!p->bin) return 4;
    *size = p->bin_size;
    return 0;
}
nvrtcResult nvrtcGetCUBIN(void *prog, char *out) {
    struct program *p = prog;
    if (!p->bin) return 4;
    memcpy(out, p->bin, p->bin_size);
    return 0;
}
nvrtcResult nvrtcDestroyProgram(void **prog) {
    struct program *p = *prog;
    free(p->src);
    free(p->bin);
    free(p);
    *prog = 0;
    return 0;
}
