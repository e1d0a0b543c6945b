"""The pool-block interface of gpusan's injected library, reached through ctypes.

`libgpusan_inject.so` (preloaded by `gpusan run`) exports `gpusan_pool_block_alloc` and
`gpusan_pool_block_free` (crates/inject/include/gpusan_pools.h): a pool allocator's block
becomes an allocation of gpusan's table, nested inside the segment it was cut from, and
freed when the pool takes it back. The symbols are looked up once; a runtime without them
(an older gpusan, or none) leaves tensor bounds off, said once on standard error.
"""

import ctypes

# The `source` argument: which allocator a block came from (the header's numbering).
TORCH = 1
CUPY = 2
CUPY_PINNED = 3

ALLOC_SYMBOL = "gpusan_pool_block_alloc"
FREE_SYMBOL = "gpusan_pool_block_free"

_functions = None
_looked = False


def functions():
    """`(alloc, free)` callables of the injected library, or None when it has none."""
    global _functions, _looked
    if _looked:
        return _functions
    _looked = True
    try:
        # dlsym(RTLD_DEFAULT): the preloaded library's symbols are the process's.
        lib = ctypes.CDLL(None)
        alloc = getattr(lib, ALLOC_SYMBOL)
        free = getattr(lib, FREE_SYMBOL)
    except (OSError, AttributeError):
        return None
    alloc.argtypes = [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int32, ctypes.c_uint32]
    alloc.restype = ctypes.c_int
    free.argtypes = [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int32, ctypes.c_uint32]
    free.restype = ctypes.c_int
    _functions = (alloc, free)
    return _functions


def missing_reason():
    """Why the interface is absent, for the one line said about it."""
    return (
        "the gpusan runtime in this process has no %s (an older libgpusan_inject.so?)" % ALLOC_SYMBOL
    )
