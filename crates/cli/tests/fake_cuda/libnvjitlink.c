/* A fake nvJitLink (libnvJitLink.so.13) for tests of gpusan's nvJitLink door. Its entry
 * points carry version 13_1, as a newer nvJitLink's header names them, so that gpusan's
 * stand-ins (13_0) are found for them by `dlsym`. Inputs are appended as text; the linked
 * "cubin" is an ELF header followed by "FAKE-LINKED:" and the text (the fake driver loads
 * it as a module that declares gpusan's ABI when the text does), and the text linked is
 * appended to $FAKE_CUDA_LINKED. LTO-IR inputs (kind 3) are "LTOIR:" followed by PTX;
 * created with "-ptx", a link makes PTX (the inputs, LTO-IR's marks dropped) and no cubin.
 * Internal helpers are static. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct link { char text[65536]; size_t len; unsigned char *cubin; size_t size; int ptx; };

int __nvJitLinkCreate_13_1(void **handle, uint32_t n, const char **options) {
    struct link *l = calloc(1, sizeof(struct link));
    for (uint32_t i = 0; i < n; i++) l->ptx |= !strcmp(options[i], "-ptx");
    *handle = l;
    return 0;
}
int __nvJitLinkAddData_13_1(void *handle, int kind, const void *data, size_t size, const char *name) {
    (void)name;
    struct link *l = handle;
    size_t n = strnlen(data, size);
    if (kind == 3 && l->ptx && n >= 6 && !memcmp(data, "LTOIR:", 6)) data = (const char *)data + 6, n -= 6;
    if (l->len + n + 1 >= sizeof l->text) return 1;
    memcpy(l->text + l->len, data, n);
    l->len += n;
    l->text[l->len++] = '\n';
    return 0;
}
int __nvJitLinkComplete_13_1(void *handle) {
    struct link *l = handle;
    l->text[l->len] = 0;
    if (l->ptx) return 0;
    const char *path = getenv("FAKE_CUDA_LINKED");
    FILE *f = path ? fopen(path, "a") : 0;
    if (f) { fputs(l->text, f); fclose(f); }
    size_t body = l->len + 13;
    l->size = 64 + body;
    l->cubin = calloc(1, l->size);
    memcpy(l->cubin, "\x7f" "ELF\x02\x01\x01", 7);
    uint64_t end = l->size;
    memcpy(l->cubin + 0x28, &end, 8);
    snprintf((char *)l->cubin + 64, body, "FAKE-LINKED:%s", l->text);
    return 0;
}
int __nvJitLinkGetLinkedCubinSize_13_1(void *handle, size_t *size) {
    struct link *l = handle;
    if (!l->cubin) return 1;
    *size = l->size;
    return 0;
}
int __nvJitLinkGetLinkedCubin_13_1(void *handle, void *cubin) {
    struct link *l = handle;
    if (!l->cubin) return 1;
    memcpy(cubin, l->cubin, l->size);
    return 0;
}
int __nvJitLinkDestroy_13_1(void **handle) {
    struct link *l = *handle;
    free(l->cubin);
    free(l);
    *handle = 0;
    return 0;
}
int __nvJitLinkGetLinkedPtxSize_13_1(void *handle, size_t *size) {
    struct link *l = handle;
    if (!l->ptx) return 1;
    *size = l->len + 1;
    return 0;
}
int __nvJitLinkGetLinkedPtx_13_1(void *handle, char *ptx) {
    struct link *l = handle;
    if (!l->ptx) return 1;
    memcpy(ptx, l->text, l->len + 1);
    return 0;
}
