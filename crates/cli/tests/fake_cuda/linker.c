/* The fake driver's linker (cuLink*), included by libcuda.c where it stood. */
/* ---- the linker -------------------------------------------------------------------------
 *
 * cuLinkAddData_v2 (and cuLinkAddFile_v2) append their input, as text, to the link;
 * cuLinkComplete makes a "cubin" of it: an ELF header whose section-header offset says the
 * file ends after "FAKE-LINKED:" and the text linked, NUL included. The text linked is also
 * written to $FAKE_CUDA_LINKED. With $FAKE_LINK_REFUSE_ABI set, a PTX input that declares
 * gpusan's ABI is refused (CUDA_ERROR_INVALID_PTX), as a linker refuses PTX it cannot compile. */
struct fake_link { char text[65536]; size_t len; unsigned char cubin[64 + 65536 + 16]; long opt; };
CUresult cuLinkCreate_v2(unsigned n, int *options, void **values, void **state) {
    struct fake_link *l = *state = calloc(1, sizeof(struct fake_link));
    for (unsigned i = 0; i < n; i++) l->opt = options[i] == 7 ? 1 + (long)(uintptr_t)values[i] : l->opt; /* "#O<level>" */
    return current_ctx ? 0 : 201;
}
static CUresult link_add(void *state, int kind, const void *data, size_t size) {
    struct fake_link *l = state;
    size_t n = strnlen(data, size);
    if (kind == 1 && getenv("FAKE_LINK_REFUSE_ABI") && memmem(data, n, "__gpusan_errors", 15)) return 218;
    if (l->len + n + 1 >= sizeof l->text) return 2;
    memcpy(l->text + l->len, data, n);
    l->len += n;
    l->text[l->len++] = '\n';
    return 0;
}
CUresult cuLinkAddData_v2(void *state, int kind, void *data, size_t size, const char *name, unsigned n, int *o, void **v) {
    (void)name; (void)n; (void)o; (void)v;
    return link_add(state, kind, data, size);
}
CUresult cuLinkAddFile_v2(void *state, int kind, const char *path, unsigned n, int *o, void **v) {
    (void)n; (void)o; (void)v;
    static char buf[65536];
    FILE *f = fopen(path, "r");
    if (!f) return 301; /* CUDA_ERROR_FILE_NOT_FOUND */
    size_t got = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[got] = 0;
    return link_add(state, kind, buf, got + 1);
}
CUresult cuLinkComplete(void *state, void **cubin, size_t *size) {
    struct fake_link *l = state;
    l->text[l->len] = 0;
    const char *path = getenv("FAKE_CUDA_LINKED");
    FILE *f = path ? fopen(path, "a") : 0;
    if (f) { if (l->opt) fprintf(f, "#O%ld\n", l->opt - 1); fputs(l->text, f); fclose(f); }
    unsigned char *c = l->cubin;
    memset(c, 0, 64);
    memcpy(c, "\x7f" "ELF\x02\x01\x01", 7);
    int body = snprintf((char *)c + 64, sizeof l->cubin - 64, "FAKE-LINKED:%s", l->text) + 1;
    uint64_t end = 64 + (uint64_t)body;
    memcpy(c + 0x28, &end, 8); /* e_shoff: the file's end, with no section headers */
    *cubin = c;
    *size = (size_t)end;
    return 0;
}
CUresult cuLinkDestroy(void *state) { free(state); return 0; }
