/* The doors through which PTX reaches the GPU besides a module load, for tests of gpusan's
 * NVRTC and linker stand-ins with the fake driver and the fake NVRTC (libnvrtc.c):
 *   doors_prog DOOR SCENARIO [FILE]
 * DOOR: `link` (NVRTC's functions bound at link time), `dlsym` (dlopen + dlsym on the
 * handle, as PyTorch reaches NVRTC) or `default` (dlopen, then dlsym(RTLD_DEFAULT) first and
 * the handle only where that finds nothing, as cuda-python's bindings do). Built with
 * NVRTC_LOADED_LATE, the program is not linked against NVRTC: it is loaded only when the
 * program opens it, after the driver was asked for functions (`doors_prog_late`). The `nvjitlink`
 * scenario reaches nvJitLink (libnvJitLink.so.13, names of version 13_1) the `default` way. Each scenario gets code for `checked_ptx`, loads
 * it, launches it and plays the error record its instrumented kernel `zeta` would write
 * (a 4-byte store at PTX line 11, 4 bytes past a 1024-byte allocation), then prints what
 * kind of code it was given and `SCENARIO done rc=N`. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
CUresult cuInit(unsigned);
CUresult cuDevicePrimaryCtxRetain(void **, int);
CUresult cuMemAlloc_v2(uint64_t *, size_t);
CUresult cuMemFree_v2(uint64_t);
CUresult cuModuleLoadData(void **, const void *);
CUresult cuModuleLoad(void **, const char *);
CUresult cuLibraryLoadFromFile(void **, const char *, int *, void **, unsigned, int *, void **, unsigned);
CUresult cuModuleGetGlobal_v2(uint64_t *, size_t *, void *, const char *);
CUresult cuLaunchKernel(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *, void **,
                        void **);
CUresult cuCtxSynchronize(void);
CUresult cuGetProcAddress_v2(const char *, void **, int, uint64_t, int *);
CUresult cuLinkCreate_v2(unsigned, int *, void **, void **);
CUresult cuLinkAddData_v2(void *, int, void *, size_t, const char *, unsigned, int *, void **);
CUresult cuLinkAddFile_v2(void *, int, const char *, unsigned, int *, void **);
CUresult cuLinkComplete(void *, void **, size_t *);
CUresult cuLinkDestroy(void *);
int nvrtcCreateProgram(void **, const char *, const char *, int, const char *const *, const char *const *);
int nvrtcCompileProgram(void *, int, const char *const *);
int nvrtcGetPTXSize(void *, size_t *);
int nvrtcGetPTX(void *, char *);
int nvrtcGetCUBINSize(void *, size_t *);
int nvrtcGetCUBIN(void *, char *);
int nvrtcDestroyProgram(void **);

/* Functions numbered by name: alpha 0, zeta 1. */
static const char *checked_ptx =
    ".version 9.0\n.target sm_90\n.address_size 64\n.file 1 \"checked.cu\"\n"
    ".visible .entry zeta(.param .u64 p)\n{\n\t.reg .b64 %rd<3>;\n\tld.param.u64 %rd1, [p];\n"
    "\tcvta.to.global.u64 %rd2, %rd1;\n\t.loc 1 21 5\n\tst.global.u32 [%rd2], 0;\n\tret;\n}\n"
    ".visible .entry alpha(.param .u64 p)\n{\n\t.reg .b64 %rd<3>;\n\tld.param.u64 %rd1, [p];\n"
    "\tcvta.to.global.u64 %rd2, %rd1;\n\t.loc 1 9 5\n\tst.global.u32 [%rd2], 1;\n\tret;\n}\n";

static struct {
    int (*create)(void **, const char *, const char *, int, const char *const *, const char *const *);
    int (*compile)(void *, int, const char *const *);
    int (*ptx_size)(void *, size_t *);
    int (*ptx)(void *, char *);
    int (*cubin_size)(void *, size_t *);
    int (*cubin)(void *, char *);
    int (*destroy)(void **);
} rtc;

/* `name` from the global scope first when `deflt`, else (or where that finds nothing)
 * from `h`. */
static void *find(void *h, const char *name, int deflt) {
    void *f = deflt ? dlsym(RTLD_DEFAULT, name) : 0;
    return f ? f : dlsym(h, name);
}

static int bind_nvrtc(const char *door) {
#ifndef NVRTC_LOADED_LATE
    if (!strcmp(door, "link")) {
        rtc.create = nvrtcCreateProgram, rtc.compile = nvrtcCompileProgram, rtc.ptx_size = nvrtcGetPTXSize;
        rtc.ptx = nvrtcGetPTX, rtc.cubin_size = nvrtcGetCUBINSize, rtc.cubin = nvrtcGetCUBIN;
        rtc.destroy = nvrtcDestroyProgram;
        return 0;
    }
#endif
    int deflt = !strcmp(door, "default");
    if (deflt) {
        /* As cudart does at its start, before the program loads NVRTC. */
        void *pfn = 0;
        int status = 0;
        cuGetProcAddress_v2("cuCtxGetCurrent", &pfn, 12000, 0, &status);
    }
    void *h = dlopen("libnvrtc.so.13", RTLD_NOW | RTLD_LOCAL);
    if (!h) return 1;
    *(void **)&rtc.create = find(h, "nvrtcCreateProgram", deflt);
    *(void **)&rtc.compile = find(h, "nvrtcCompileProgram", deflt);
    *(void **)&rtc.ptx_size = find(h, "nvrtcGetPTXSize", deflt);
    *(void **)&rtc.ptx = find(h, "nvrtcGetPTX", deflt);
    *(void **)&rtc.cubin_size = find(h, "nvrtcGetCUBINSize", deflt);
    *(void **)&rtc.cubin = find(h, "nvrtcGetCUBIN", deflt);
    *(void **)&rtc.destroy = find(h, "nvrtcDestroyProgram", deflt);
    return !rtc.create || !rtc.destroy;
}

static uint64_t global_value(void *m, const char *name) {
    uint64_t addr = 0;
    size_t size = 0;
    if (cuModuleGetGlobal_v2(&addr, &size, m, name)) return 0;
    return size == 4 ? *(uint32_t *)(uintptr_t)addr : *(uint64_t *)(uintptr_t)addr;
}

/* How `load_and_run` loads: from memory, or from `file_path` with one of the file loads. */
static enum { FROM_MEMORY, MODULE_FILE, LIBRARY_FILE } loading;
static const char *file_path;

/* Loads `image`, launches, and writes the record kernel `zeta` would: 4 bytes past `a`. */
static int load_and_run(const void *image, uint64_t a) {
    void *m = 0;
    int rc = 0;
    if (loading == FROM_MEMORY) rc = cuModuleLoadData(&m, image);
    else if (loading == MODULE_FILE) rc = cuModuleLoad(&m, file_path);
    else rc = cuLibraryLoadFromFile(&m, file_path, 0, 0, 0, 0, 0, 0);
    rc |= cuLaunchKernel(0, 4, 1, 1, 32, 1, 1, 0, 0, 0, 0);
    unsigned char *errors = (unsigned char *)(uintptr_t)global_value(m, "__gpusan_errors");
    uint32_t module = (uint32_t)global_value(m, "__gpusan_module");
    if (errors && module) {
        uint32_t *count = (uint32_t *)errors, i = (*count)++;
        unsigned char *r = errors + 16 + 64 * i;
        uint64_t addr = a + 1024 + 4;
        uint32_t f[12] = {module << 16 | 1, 1, 4, 11, 2, 0, 0, 5, 0, 0, 0, 1};
        memcpy(r, &addr, 8);
        memset(r + 8, 0, 8);
        memcpy(r + 16, f, sizeof f);
        printf("instrumented kernel ran\n");
    }
    return rc | cuCtxSynchronize();
}

/* What kind of code a cubin is: the fake's own ("FAKE-NVRTC"), linked ("FAKE-LINKED"), or not
 * an ELF at all ("PTX", "PTX instrumented": every loader takes PTX where a cubin goes). */
static void say_cubin(const unsigned char *cubin) {
    if (memcmp(cubin, "\x7f" "ELF", 4)) {
        printf("cubin: PTX%s\n", strstr((const char *)cubin, "__gpusan_errors") ? " instrumented" : "");
        return;
    }
    const char *text = (const char *)cubin + 64;
    printf("cubin: %.*s\n", (int)strcspn(text, ":"), text);
}

/* Compiles `src` with `arch`; the cubin (when `arch` is real) or PTX in `*out`. */
static int compile(const char *src, const char *arch, char **out, size_t *size) {
    void *p = 0;
    const char *opts[] = {arch, "-lineinfo"};
    int rc = rtc.create(&p, src, "k.cu", 0, 0, 0);
    rc |= rtc.compile(p, 2, opts);
    int cubin = strstr(arch, "sm_") != 0;
    rc |= (cubin ? rtc.cubin_size : rtc.ptx_size)(p, size);
    *out = calloc(1, *size + 1);
    rc |= (cubin ? rtc.cubin : rtc.ptx)(p, *out);
    rc |= rtc.destroy(&p);
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    const char *door = argv[1], *s = argv[2], *file = argc > 3 ? argv[3] : 0;
    void *ctx = 0;
    uint64_t a = 0;
    int rc = cuInit(0) | cuDevicePrimaryCtxRetain(&ctx, 0) | cuMemAlloc_v2(&a, 1024);
    if (bind_nvrtc(door)) return 3;
    char *code = 0;
    size_t size = 0;
    if (!strcmp(s, "nvrtc-cubin") || !strcmp(s, "nvrtc-virtual-fails") || !strcmp(s, "nvrtc-refused")) {
        /* The cubin the program asked NVRTC for, kept in FILE as CuPy keeps it. */
        char src[4096];
        snprintf(src, sizeof src, "%s%s", !strcmp(s, "nvrtc-virtual-fails") ? "// fail-virtual\n" : "",
                 !strcmp(s, "nvrtc-refused") ? ".version 9.0\n.target sm_90\n.address_size 64\n.visible .entry broken(\n"
                                             : checked_ptx);
        rc |= compile(src, "-arch=sm_90", &code, &size);
        say_cubin((unsigned char *)code);
        if (file) {
            FILE *f = fopen(file, "w");
            if (!f || fwrite(code, 1, size, f) != size) rc |= 64;
            if (f) fclose(f);
        }
        rc |= load_and_run(code, a);
    } else if (!strcmp(s, "load-cubin")) {
        /* A cubin from the program's own cache, from an earlier run. */
        static unsigned char buf[1 << 16];
        FILE *f = fopen(file, "r");
        if (!f) return 4;
        fread(buf, 1, sizeof buf, f);
        fclose(f);
        say_cubin(buf);
        rc |= load_and_run(buf, a);
    } else if (!strcmp(s, "module-file") || !strcmp(s, "library-file")) {
        /* PTX kept in a file, loaded by path. */
        FILE *f = fopen(file, "w");
        if (!f) return 4;
        fputs(checked_ptx, f);
        fclose(f);
        loading = !strcmp(s, "module-file") ? MODULE_FILE : LIBRARY_FILE;
        file_path = file;
        rc |= load_and_run(0, a);
    } else if (!strcmp(s, "nvrtc-ptx")) {
        rc |= compile(checked_ptx, "-arch=compute_90", &code, &size);
        printf("ptx instrumented: %s\n", strstr(code, "__gpusan_errors") ? "yes" : "no");
        rc |= load_and_run(code, a);
    } else if (!strcmp(s, "link") || !strcmp(s, "link-refused") || !strcmp(s, "link-file")) {
        void *l = 0, *cubin = 0;
        char src[4096];
        snprintf(src, sizeof src, "%s", checked_ptx);
        if (!strcmp(s, "link-refused")) setenv("FAKE_LINK_REFUSE_ABI", "1", 1);
        rc |= cuLinkCreate_v2(0, 0, 0, &l);
        if (!strcmp(s, "link-file")) {
            FILE *f = fopen(file, "w");
            if (!f) return 4;
            fputs(src, f);
            fclose(f);
            rc |= cuLinkAddFile_v2(l, 1, file, 0, 0, 0);
        } else {
            rc |= cuLinkAddData_v2(l, 1, src, strlen(src) + 1, "k.ptx", 0, 0, 0);
        }
        rc |= cuLinkComplete(l, &cubin, &size);
        say_cubin(cubin);
        rc |= load_and_run(cubin, a);
        rc |= cuLinkDestroy(l);
    } else if (!strcmp(s, "nvjitlink") || !strcmp(s, "nvjitlink-lto")) {
        void *h = dlopen("libnvJitLink.so.13", RTLD_NOW | RTLD_LOCAL), *l = 0;
        if (!h) return 5;
        int (*create)(void **, uint32_t, const char **) = find(h, "__nvJitLinkCreate_13_1", 1);
        int (*add)(void *, int, const void *, size_t, const char *) = find(h, "__nvJitLinkAddData_13_1", 1);
        int (*complete)(void *) = find(h, "__nvJitLinkComplete_13_1", 1);
        int (*cubin_size)(void *, size_t *) = find(h, "__nvJitLinkGetLinkedCubinSize_13_1", 1);
        int (*cubin)(void *, void *) = find(h, "__nvJitLinkGetLinkedCubin_13_1", 1);
        int (*destroy)(void **) = find(h, "__nvJitLinkDestroy_13_1", 1);
        const char *opts[] = {"-arch=sm_90", "-lto"};
        int lto = !strcmp(s, "nvjitlink-lto");
        char input[4096];
        snprintf(input, sizeof input, "%s%s", lto ? "LTOIR:" : "", checked_ptx);
        rc |= create(&l, 1 + lto, opts) | add(l, lto ? 3 : 2, input, strlen(input), "k") | complete(l);
        rc |= cubin_size(l, &size);
        code = calloc(1, size + 1);
        rc |= cubin(l, code) | destroy(&l);
        say_cubin((unsigned char *)code);
        rc |= load_and_run(code, a);
    } else {
        return 2;
    }
    rc |= cuMemFree_v2(a);
    printf("%s done rc=%d\n", s, rc);
    return rc != 0;
}
