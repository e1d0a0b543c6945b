/* A stand-in for libsanitizer-public.so, with a stand-in for cudart on top: the driver
 * stand-in (libcuda.c) calls InitializeInjection at cuInit when CUDA_INJECTION64_PATH is
 * set, gpusan subscribes here, and `fake_runtime_call` plays a runtime-API call that cudart
 * refused itself: the callback at its entry and at its exit, with the given result. */
#include <stdint.h>
#include <stddef.h>

typedef void (*callback_t)(void *, uint32_t, uint32_t, const void *);
static callback_t callback;
static void *userdata;
static int runtime_domain; /* only the runtime-API domain (2) reaches the callback */
static int all_domains;

int sanitizerSubscribe(void **handle, callback_t cb, void *user) {
    callback = cb;
    userdata = user;
    *handle = (void *)1;
    return 0;
}
int sanitizerEnableDomain(uint32_t enable, void *handle, uint32_t domain) {
    (void)handle;
    if (domain == 2) runtime_domain = enable;
    return 0;
}
int sanitizerEnableAllDomains(uint32_t enable, void *handle) {
    (void)handle;
    all_domains = enable;
    return 0;
}

struct callback_data {
    uint32_t site;
    const char *function_name;
    const void *params;
    const void *return_value;
    const char *symbol_name;
    void *context;
};

/* Returns `result`, as cudart would; -1 when gpusan did not subscribe to the runtime domain
 * alone (it must not pay for the others). */
int fake_runtime_call(uint32_t cbid, const void *params, int result) {
    if (!callback || !runtime_domain || all_domains) return -1;
    struct callback_data d = {0, "cudaFake", params, &result, 0, 0};
    callback(userdata, 2, cbid, &d);
    d.site = 1;
    callback(userdata, 2, cbid, &d);
    return result;
}
