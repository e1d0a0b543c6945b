/* Part of the fake driver (included by libcuda.c): a graph's kernel nodes, launched or
 * uploaded, reported to the Compute Sanitizer stand-in (libsanitizer.c) one by one, as the
 * driver reports them (the graph node callback: launches of graph nodes reach no launch
 * callback). A kernel node holds the params array its launch was captured with (the
 * program keeps it alive). A patched kernel that ran with a userdata nobody set faults the
 * context, as on the GPU. */
static CUresult graph_nodes_run(void *graph, int upload) {
    int (*hook)(void *, void *, void *, const char *, void **, int) =
        (int (*)(void *, void *, void *, const char *, void **, int))dlsym(RTLD_DEFAULT, "fake_sanitizer_node_launch");
    for (int n = 0; hook && n < n_kernel_nodes; n++) {
        if (kernel_nodes[n].graph != graph) continue;
        uintptr_t p = (uintptr_t)kernel_nodes[n].f, i = ((p & 0xfff) - 0x100) / 0x10;
        int known = ((p >= 0x4100 && p < 0x4200) || (p >= 0x5100 && p < 0x5200)) && (int)i < kernel_count;
        if (known && hook((void *)current_ctx, (void *)0x4000, kernel_nodes[n].f, kernel_names[i], kernel_nodes[n].params, upload))
            sticky = 700; /* CUDA_ERROR_ILLEGAL_ADDRESS, at the next synchronization */
    }
    return 0;
}
CUresult cuGraphUpload(void *exec, void *stream) {
    (void)stream;
    return graph_nodes_run(graph_run_by(exec), 1);
}
