/* Part of the fake driver (included by libcuda.c): tensor maps. An encode refuses what the
 * driver refuses first (a rank of 0 or over 5, a null map or array) and otherwise writes
 * into the 128-byte map its address, data type, rank and dims, as an opaque descriptor the
 * program can print to show the call went through unchanged; cuTensorMapReplaceAddress
 * writes the new address. */
static CUresult tensor_map(uint64_t *tm, unsigned type, unsigned rank, void *address, const uint64_t *dims,
                           const uint64_t *strides) {
    if (!tm || !dims || rank == 0 || rank > 5 || (rank > 1 && !strides)) return 1; /* CUDA_ERROR_INVALID_VALUE */
    memset(tm, 0, 128);
    tm[0] = (uint64_t)(uintptr_t)address;
    tm[1] = type;
    tm[2] = rank;
    for (unsigned i = 0; i < rank; i++) tm[3 + i] = dims[i];
    return 0;
}
CUresult cuTensorMapEncodeTiled(uint64_t *tm, unsigned type, unsigned rank, void *address, const uint64_t *dims,
                                const uint64_t *strides, const unsigned *box, const unsigned *estrides, int interleave,
                                int swizzle, int l2, int oob) {
    (void)box; (void)estrides; (void)interleave; (void)swizzle; (void)l2; (void)oob;
    return tensor_map(tm, type, rank, address, dims, strides);
}
CUresult cuTensorMapEncodeIm2col(uint64_t *tm, unsigned type, unsigned rank, void *address, const uint64_t *dims,
                                 const uint64_t *strides, const int *lower, const int *upper, unsigned channels,
                                 unsigned pixels, const unsigned *estrides, int interleave, int swizzle, int l2,
                                 int oob) {
    (void)lower; (void)upper; (void)channels; (void)pixels; (void)estrides; (void)interleave; (void)swizzle;
    (void)l2; (void)oob;
    return rank < 3 ? 1 : tensor_map(tm, type, rank, address, dims, strides);
}
CUresult cuTensorMapEncodeIm2colWide(uint64_t *tm, unsigned type, unsigned rank, void *address, const uint64_t *dims,
                                     const uint64_t *strides, int lower, int upper, unsigned channels, unsigned pixels,
                                     const unsigned *estrides, int interleave, int mode, int swizzle, int l2, int oob) {
    (void)lower; (void)upper; (void)channels; (void)pixels; (void)estrides; (void)interleave; (void)mode;
    (void)swizzle; (void)l2; (void)oob;
    return rank < 3 ? 1 : tensor_map(tm, type, rank, address, dims, strides);
}
CUresult cuTensorMapReplaceAddress(uint64_t *tm, void *address) {
    if (!tm || !tm[2]) return 1;
    tm[0] = (uint64_t)(uintptr_t)address;
    return 0;
}
/* cuGetProcAddress's entries for them (libcuda.c's table). */
#define TENSORMAP_ENTRIES                                                                                            \
    {"cuTensorMapEncodeTiled", (void *)cuTensorMapEncodeTiled},                                                      \
        {"cuTensorMapEncodeIm2col", (void *)cuTensorMapEncodeIm2col},                                                \
        {"cuTensorMapEncodeIm2colWide", (void *)cuTensorMapEncodeIm2colWide},                                        \
        {"cuTensorMapReplaceAddress", (void *)cuTensorMapReplaceAddress},
