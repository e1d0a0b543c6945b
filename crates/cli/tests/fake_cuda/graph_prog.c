/* CUDA graph memory nodes against the fake driver, for tests/graph_memory.rs.
 * usage: graph_prog DOOR SCENARIO, DOOR = link (the driver's exported names) | getproc
 * (what cudart does: dlsym for cuGetProcAddress_v2, then every function through it by its
 * base name). Prints "SCENARIO done rc=N": N (and the exit status) is 0 unless a driver
 * call failed that the scenario did not expect, or the allocation table a graph's kernels
 * saw at a launch lacked the graph's allocation (check mode). */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef int CUresult;
struct mem_alloc_node_params { unsigned char pool_props[88]; void *access; size_t access_count; size_t bytesize; uint64_t dptr; };
/* CUgraphNodeParams: type, 12 reserved bytes, the type's parameters, 8 reserved bytes. */
struct node_params {
    int type, reserved0[3];
    union { long long reserved1[29]; struct mem_alloc_node_params alloc; uint64_t free_dptr; } u;
    long long reserved2;
};
enum { KERNEL_NODE = 0, MEM_ALLOC_NODE = 10, MEM_FREE_NODE = 11 };

/* The driver functions, found through the door. */
static struct {
    CUresult (*mem_alloc)(uint64_t *, size_t);
    CUresult (*mem_free)(uint64_t);
    CUresult (*mem_free_async)(uint64_t, void *);
    CUresult (*mem_alloc_async)(uint64_t *, size_t, void *);
    CUresult (*mem_alloc_from_pool)(uint64_t *, size_t, void *, void *);
    CUresult (*htod)(uint64_t, const void *, size_t);
    CUresult (*dtoh)(void *, uint64_t, size_t);
    CUresult (*graph_create)(void **, unsigned);
    CUresult (*add_alloc_node)(void **, void *, const void **, size_t, struct mem_alloc_node_params *);
    CUresult (*add_free_node)(void **, void *, const void **, size_t, uint64_t);
    CUresult (*add_node)(void **, void *, const void **, const void *, size_t, struct node_params *);
    CUresult (*instantiate)(void **, void *, unsigned long long);
    CUresult (*launch)(void *, void *);
    CUresult (*exec_destroy)(void *);
    CUresult (*exec_update)(void *, void *, void *);
    CUresult (*graph_destroy)(void *);
    CUresult (*trim)(int);
    CUresult (*stream_create)(void **, unsigned);
    CUresult (*begin_capture)(void *, int);
    CUresult (*end_capture)(void *, void **);
    CUresult (*stream_sync)(void *);
    CUresult (*launch_kernel)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *, void **, void **);
    CUresult (*module_load)(void **, const void *);
    CUresult (*module_global)(uint64_t *, size_t *, void *, const char *);
} cu;

static int find_driver(const char *door) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) return 1;
    typedef CUresult (*getproc_t)(const char *, void **, int, uint64_t, int *);
    getproc_t gp = !strcmp(door, "getproc") ? (getproc_t)dlsym(h, "cuGetProcAddress_v2") : 0;
    if (strcmp(door, "link") && !gp) return 1;
    int missing = 0;
    /* cudart's name and version for each (what libcudart 13 asks cuGetProcAddress for),
     * else the exported name. */
#define FIND(field, base, version, exported)                                     \
    do {                                                                         \
        void *f = 0;                                                             \
        if (gp) gp(base, &f, version, 0, 0);                                     \
        else f = dlsym(h, exported);                                             \
        if (!f) { fprintf(stderr, "no %s\n", base); missing = 1; }               \
        memcpy(&cu.field, &f, sizeof f);                                         \
    } while (0)
    FIND(mem_alloc, "cuMemAlloc", 3020, "cuMemAlloc_v2");
    FIND(mem_free, "cuMemFree", 3020, "cuMemFree_v2");
    FIND(mem_free_async, "cuMemFreeAsync", 11020, "cuMemFreeAsync");
    FIND(mem_alloc_async, "cuMemAllocAsync", 11020, "cuMemAllocAsync");
    FIND(mem_alloc_from_pool, "cuMemAllocFromPoolAsync", 11020, "cuMemAllocFromPoolAsync");
    FIND(htod, "cuMemcpyHtoD", 3020, "cuMemcpyHtoD_v2");
    FIND(dtoh, "cuMemcpyDtoH", 3020, "cuMemcpyDtoH_v2");
    FIND(graph_create, "cuGraphCreate", 10000, "cuGraphCreate");
    FIND(add_alloc_node, "cuGraphAddMemAllocNode", 11040, "cuGraphAddMemAllocNode");
    FIND(add_free_node, "cuGraphAddMemFreeNode", 11040, "cuGraphAddMemFreeNode");
    FIND(add_node, "cuGraphAddNode", 12030, "cuGraphAddNode_v2");
    FIND(instantiate, "cuGraphInstantiateWithFlags", 11040, "cuGraphInstantiateWithFlags");
    FIND(launch, "cuGraphLaunch", 10000, "cuGraphLaunch");
    FIND(exec_destroy, "cuGraphExecDestroy", 10000, "cuGraphExecDestroy");
    FIND(exec_update, "cuGraphExecUpdate", 12000, "cuGraphExecUpdate_v2");
    FIND(graph_destroy, "cuGraphDestroy", 10000, "cuGraphDestroy");
    FIND(trim, "cuDeviceGraphMemTrim", 11040, "cuDeviceGraphMemTrim");
    FIND(stream_create, "cuStreamCreate", 2000, "cuStreamCreate");
    FIND(begin_capture, "cuStreamBeginCapture", 10010, "cuStreamBeginCapture_v2");
    FIND(end_capture, "cuStreamEndCapture", 10000, "cuStreamEndCapture");
    FIND(stream_sync, "cuStreamSynchronize", 2000, "cuStreamSynchronize");
    FIND(launch_kernel, "cuLaunchKernel", 4000, "cuLaunchKernel");
    FIND(module_load, "cuModuleLoadData", 2010, "cuModuleLoadData");
    FIND(module_global, "cuModuleGetGlobal", 3020, "cuModuleGetGlobal_v2");
#undef FIND
    return missing;
}

/* Not driver functions: the allocation table a graph's kernels read at the last launch. */
const unsigned char *fake_graph_table(uint64_t *);

/* A module with a kernel (check mode instruments it, and gpusan gives it the table). */
static const char *ptx =
    ".version 9.0\n.target sm_90\n.address_size 64\n"
    ".visible .entry k(.param .u64 p)\n{\n\t.reg .b64 %rd<3>;\n\t.reg .b32 %r<2>;\n"
    "\tld.param.u64 %rd1, [p];\n\tcvta.to.global.u64 %rd2, %rd1;\n"
    "\tld.global.u32 %r1, [%rd2];\n\tst.global.u32 [%rd2+4], %r1;\n\tret;\n}\n";

/* Whether the table the last launch's kernels read holds [base, base + size) as live
 * memory (entries of 32 bytes after a 32-byte header: base, size, id, flags; flags' low
 * byte 1 = live). Without a table (api mode) there is nothing to judge: 1. */
static int table_holds(uint64_t base, uint64_t size) {
    uint64_t len = 0;
    const unsigned char *t = fake_graph_table(&len);
    if (!t) return 1;
    for (uint64_t i = 0; i < len; i++) {
        uint64_t b, n;
        uint32_t flags;
        memcpy(&b, t + 32 + 32 * i, 8);
        memcpy(&n, t + 32 + 32 * i + 8, 8);
        memcpy(&flags, t + 32 + 32 * i + 24, 4);
        if (b == base) return n == size && (flags & 0xff) == 1;
    }
    return 0;
}

static unsigned char host[4096];
enum { BYTES = 1024 };

/* Uses graph memory the way stream work after the graph's launch may: in bounds. */
static int use(uint64_t p) { return cu.htod(p, host, BYTES) | cu.dtoh(host, p, BYTES); }

/* Launches `exec` and checks what its kernels (if any) saw: bit 256 when the table lacked
 * the allocation at `base`. */
static int launch(void *exec, uint64_t base) {
    int rc = cu.launch(exec, 0);
    if (!rc && !table_holds(base, BYTES)) {
        fprintf(stderr, "a launch's table lacks the graph's allocation %#llx\n", (unsigned long long)base);
        rc |= 256;
    }
    return rc;
}

/* A graph allocating BYTES by an allocation node (`generic`: through cuGraphAddNode), with
 * a kernel node after it; `freed`: and a free node (cuGraphAddMemFreeNode or the generic
 * one). Sets *base. */
static int alloc_graph(void **g, uint64_t *base, int generic, int freed) {
    int rc = cu.graph_create(g, 0);
    void *n = 0;
    struct node_params np;
    if (generic) {
        memset(&np, 0, sizeof np);
        np.type = MEM_ALLOC_NODE;
        np.u.alloc.bytesize = BYTES;
        rc |= cu.add_node(&n, *g, 0, 0, 0, &np);
        *base = np.u.alloc.dptr;
    } else {
        struct mem_alloc_node_params p = {{0}, 0, 0, BYTES, 0};
        rc |= cu.add_alloc_node(&n, *g, 0, 0, &p);
        *base = p.dptr;
    }
    memset(&np, 0, sizeof np);
    np.type = KERNEL_NODE;
    rc |= cu.add_node(&n, *g, 0, 0, 0, &np);
    if (freed && generic) {
        memset(&np, 0, sizeof np);
        np.type = MEM_FREE_NODE;
        np.u.free_dptr = *base;
        rc |= cu.add_node(&n, *g, 0, 0, 0, &np);
    } else if (freed) {
        rc |= cu.add_free_node(&n, *g, 0, 0, *base);
    }
    return rc;
}

/* The program frees graph memory outside the graph after each of 3 launches: how (cuMemFree,
 * cuMemFreeAsync, or alternating), whether graph memory is trimmed after each free, and
 * whether the allocation node is the generic one. */
static int free_outside(const char *how, int trim, int generic) {
    void *g = 0, *exec = 0;
    uint64_t p = 0;
    int rc = alloc_graph(&g, &p, generic, 0) | cu.instantiate(&exec, g, 0);
    for (int r = 0; r < 3 && !rc; r++) {
        rc |= launch(exec, p) | use(p);
        int async = !strcmp(how, "async") || (!strcmp(how, "both") && r == 1);
        rc |= async ? cu.mem_free_async(p, 0) : cu.mem_free(p);
        if (trim) rc |= cu.trim(0);
    }
    return rc | cu.exec_destroy(exec) | cu.graph_destroy(g);
}

/* Allocated and freed inside the graph, launched 3 times. The graph is destroyed right
 * after its instantiation (the executable graph lives on), or both stay to the exit. */
static int free_inside(int generic, int keep) {
    void *g = 0, *exec = 0;
    uint64_t p = 0;
    int rc = alloc_graph(&g, &p, generic, 1) | cu.instantiate(&exec, g, 0);
    if (!keep) rc |= cu.graph_destroy(g);
    for (int r = 0; r < 3 && !rc; r++) rc |= launch(exec, p);
    return keep ? rc : rc | cu.exec_destroy(exec);
}

/* cudaMallocAsync (or cudaMallocFromPoolAsync) and a kernel captured from a stream, and
 * cudaFreeAsync too unless `free_after`: then the program frees the memory after each of
 * the 3 launches (cuMemFree). */
static int captured(int pool, int free_after) {
    void *st = 0, *g = 0, *exec = 0;
    uint64_t p = 0;
    int rc = cu.stream_create(&st, 1) | cu.begin_capture(st, 0);
    rc |= pool ? cu.mem_alloc_from_pool(&p, BYTES, (void *)0x6000, st) : cu.mem_alloc_async(&p, BYTES, st);
    void *args[] = {&p};
    rc |= cu.launch_kernel(0, 4, 1, 1, 64, 1, 1, 0, st, args, 0);
    if (!free_after) rc |= cu.mem_free_async(p, st);
    rc |= cu.end_capture(st, &g) | cu.instantiate(&exec, g, 0);
    for (int r = 0; r < 3 && !rc; r++) {
        rc |= cu.launch(exec, st) | cu.stream_sync(st);
        if (!table_holds(p, BYTES)) rc |= 256;
        if (free_after) rc |= use(p) | cu.mem_free(p);
    }
    return rc | cu.exec_destroy(exec) | cu.graph_destroy(g);
}

/* A genuine double free: launched twice, freed after each, then freed once more, graph
 * memory trimmed before it. The driver refuses the last free: so must gpusan. */
static int double_free(void) {
    void *g = 0, *exec = 0;
    uint64_t p = 0;
    int rc = alloc_graph(&g, &p, 0, 0) | cu.instantiate(&exec, g, 0);
    for (int r = 0; r < 2 && !rc; r++) rc |= launch(exec, p) | cu.mem_free(p);
    rc |= cu.trim(0);
    if (cu.mem_free(p) != 1) rc |= 128;
    return rc | cu.exec_destroy(exec) | cu.graph_destroy(g);
}

/* Graph A allocates, graph B frees what A allocated (a free node of another graph). Clean:
 * A and B launched in turn twice. Bug: after B's launch the program frees it once more. */
static int other_graph_frees(int bug) {
    void *a = 0, *b = 0, *ea = 0, *eb = 0, *n = 0;
    uint64_t p = 0;
    int rc = alloc_graph(&a, &p, 0, 0) | cu.graph_create(&b, 0) | cu.add_free_node(&n, b, 0, 0, p);
    rc |= cu.instantiate(&ea, a, 0) | cu.instantiate(&eb, b, 0);
    for (int r = 0; r < 2 && !rc; r++) rc |= launch(ea, p) | use(p) | cu.launch(eb, 0);
    if (bug && cu.mem_free(p) != 1) rc |= 128;
    return rc | cu.exec_destroy(ea) | cu.exec_destroy(eb) | cu.graph_destroy(a) | cu.graph_destroy(b);
}

/* What an instrumented kernel `k` of module `m` does when it writes 4 bytes at `addr`
 * out of bounds: an error record (found at the next synchronization). 0 when written. */
static int play_overflow(void *m, uint64_t addr) {
    uint64_t errors = 0, module = 0;
    size_t size = 0;
    if (cu.module_global(&errors, &size, m, "__gpusan_errors") || cu.module_global(&module, &size, m, "__gpusan_module"))
        return 16;
    unsigned char *buffer = (unsigned char *)(uintptr_t)*(uint64_t *)(uintptr_t)errors;
    uint32_t id = *(uint32_t *)(uintptr_t)module;
    if (!buffer || !id) return 16;
    uint32_t *count = (uint32_t *)buffer, i = (*count)++;
    unsigned char *r = buffer + 16 + 64 * i;
    uint32_t f[12] = {id << 16 | 0, 1, 4, 9, 0, 0, 0, 3, 0, 0, 0, 1};
    memcpy(r, &addr, 8);
    memset(r + 8, 0, 8);
    memcpy(r + 16, f, sizeof f);
    return 0;
}

/* Check mode: the graph's kernel writes past the end of its allocation at the third launch,
 * after the program freed it outside the graph (and graph memory was trimmed) twice. */
static int overflow(void *m) {
    void *g = 0, *exec = 0;
    uint64_t p = 0;
    int rc = alloc_graph(&g, &p, 0, 0) | cu.instantiate(&exec, g, 0);
    for (int r = 0; r < 3 && !rc; r++) {
        rc |= launch(exec, p);
        if (r == 2) rc |= play_overflow(m, p + BYTES) | cu.stream_sync(0);
        rc |= cu.mem_free(p) | cu.trim(0);
    }
    return rc | cu.exec_destroy(exec) | cu.graph_destroy(g);
}

/* Graph memory at the exit: "launched" — launched once and never freed (graph and
 * executable graph destroyed; 2: its node made by cuGraphAddNode); "unlaunched" — a graph
 * never launched, kept to the exit. */
static int at_exit(int launched) {
    void *g = 0, *exec = 0;
    uint64_t p = 0;
    int rc = alloc_graph(&g, &p, launched == 2, 0);
    if (!launched) return rc;
    rc |= cu.instantiate(&exec, g, 0) | launch(exec, p) | use(p);
    return rc | cu.exec_destroy(exec) | cu.graph_destroy(g);
}

/* Bug: memory its own graph frees, freed outside the graph too (after 2 launches), which
 * the driver refuses: one double free, the graph's free node the first. */
static int freed_inside_and_outside(int generic) {
    void *g = 0, *exec = 0;
    uint64_t p = 0;
    int rc = alloc_graph(&g, &p, generic, 1) | cu.instantiate(&exec, g, 0);
    for (int r = 0; r < 2 && !rc; r++) rc |= launch(exec, p);
    if (cu.mem_free(p) != 1) rc |= 128;
    return rc | cu.exec_destroy(exec) | cu.graph_destroy(g);
}

/* An executable graph updated (cuGraphExecUpdate) with a second graph of the same shape
 * allocates at the second graph's address from then on: launched, used and freed outside
 * twice after the update. */
static int exec_update(void) {
    void *g = 0, *g2 = 0, *exec = 0;
    uint64_t p = 0, p2 = 0;
    unsigned char info[24] = {0};
    int rc = alloc_graph(&g, &p, 0, 0) | alloc_graph(&g2, &p2, 0, 0) | cu.instantiate(&exec, g, 0);
    rc |= launch(exec, p) | use(p) | cu.mem_free(p) | cu.exec_update(exec, g2, info);
    for (int r = 0; r < 2 && !rc; r++) rc |= launch(exec, p2) | use(p2) | cu.mem_free(p2);
    return rc | cu.exec_destroy(exec) | cu.graph_destroy(g) | cu.graph_destroy(g2);
}

/* Bug: a graph allocating twice, launched; the program frees one allocation only, so the
 * driver refuses the next launch (the other is still allocated), and frees the first once
 * more: a double free, as the refused launch allocated nothing. */
static int refused_relaunch(void) {
    void *g = 0, *exec = 0, *n = 0;
    uint64_t p = 0;
    struct mem_alloc_node_params q = {{0}, 0, 0, BYTES, 0};
    int rc = alloc_graph(&g, &p, 0, 0) | cu.add_alloc_node(&n, g, 0, 0, &q) | cu.instantiate(&exec, g, 0);
    rc |= launch(exec, p) | cu.mem_free(p);
    if (cu.launch(exec, 0) != 1) rc |= 64; /* CUDA_ERROR_INVALID_VALUE: q.dptr is not freed */
    if (cu.mem_free(p) != 1) rc |= 128;
    return rc | cu.mem_free(q.dptr) | cu.exec_destroy(exec) | cu.graph_destroy(g);
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    const char *door = argv[1], *s = argv[2];
    if (find_driver(door)) return 3;
    uint64_t other = 0;
    void *m = 0;
    /* A module whose kernels the graphs run, and some device memory of the program's own,
     * used and freed at the end. */
    int rc = cu.module_load(&m, ptx) | cu.mem_alloc(&other, BYTES);
    if (!strcmp(s, "free_outside_sync")) rc |= free_outside("sync", 0, 0);
    else if (!strcmp(s, "free_outside_async")) rc |= free_outside("async", 0, 0);
    else if (!strcmp(s, "free_outside_trimmed")) rc |= free_outside("both", 1, 0);
    else if (!strcmp(s, "free_outside_generic")) rc |= free_outside("both", 1, 1);
    else if (!strcmp(s, "free_inside")) rc |= free_inside(0, 0);
    else if (!strcmp(s, "free_inside_kept")) rc |= free_inside(0, 1);
    else if (!strcmp(s, "free_inside_generic")) rc |= free_inside(1, 0);
    else if (!strcmp(s, "captured")) rc |= captured(0, 0);
    else if (!strcmp(s, "captured_free_after")) rc |= captured(0, 1);
    else if (!strcmp(s, "captured_pool_free_after")) rc |= captured(1, 1);
    else if (!strcmp(s, "double_free")) rc |= double_free();
    else if (!strcmp(s, "other_graph_frees")) rc |= other_graph_frees(0);
    else if (!strcmp(s, "other_graph_frees_twice")) rc |= other_graph_frees(1);
    else if (!strcmp(s, "leak_launched")) rc |= at_exit(1);
    else if (!strcmp(s, "leak_unlaunched")) rc |= at_exit(0);
    else if (!strcmp(s, "overflow")) rc |= overflow(m);
    else if (!strcmp(s, "leak_launched_generic")) rc |= at_exit(2);
    else if (!strcmp(s, "freed_inside_and_outside")) rc |= freed_inside_and_outside(0);
    else if (!strcmp(s, "freed_inside_and_outside_generic")) rc |= freed_inside_and_outside(1);
    else if (!strcmp(s, "exec_update")) rc |= exec_update();
    else if (!strcmp(s, "refused_relaunch")) rc |= refused_relaunch();
    else return 2;
    rc |= use(other) | cu.mem_free(other);
    printf("%s done rc=%d\n", s, rc);
    return rc != 0; /* rc itself may be a multiple of 256 */
}
