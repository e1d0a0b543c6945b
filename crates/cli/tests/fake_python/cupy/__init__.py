"""A fake `cupy` for the tests of gpusan's CuPy hook, shaped as CuPy 14: memory hooks kept
per thread (`cuda.MemoryHook`, entered to register), a device pool whose `malloc` calls the
hooks with the requested `size` and the rounded `mem_size` and whose free calls
`free_preprocess` first, and a pinned pool that calls no hook (`set_pinned_memory_allocator`,
`PooledPinnedMemory.free`)."""

import threading
import types
import weakref

_local = threading.local()


def _hooks():
    h = getattr(_local, "hooks", None)
    if h is None:
        h = _local.hooks = {}
    return h


class MemoryHook:
    name = "MemoryHook"

    def __enter__(self):
        if self.name in _hooks():
            raise KeyError(self.name)
        _hooks()[self.name] = self
        return self

    def __exit__(self, *_):
        del _hooks()[self.name]

    def malloc_postprocess(self, **kw):
        pass

    def free_preprocess(self, **kw):
        pass


class _Stream:
    ptr = 0x77


class MemoryPointer:
    def __init__(self, pool, ptr, size):
        self.ptr, self._pool, self._size = ptr, pool, size

    def free(self):
        self._pool._free(self.ptr, self._size)


class MemoryPool:
    def __init__(self):
        self._next = 0x10000
        self._free_list = []

    def malloc(self, size):
        rounded = (size + 511) // 512 * 512
        ptr = self._free_list.pop() if self._free_list else self._take(rounded)
        for h in list(_hooks().values()):
            h.malloc_postprocess(device_id=0, size=size, mem_size=rounded, mem_ptr=ptr, pmem_id=id(self))
        return MemoryPointer(self, ptr, rounded)

    def _take(self, rounded):
        ptr, self._next = self._next, self._next + rounded
        return ptr

    def _free(self, ptr, rounded):
        for h in list(_hooks().values()):
            h.free_preprocess(device_id=0, mem_size=rounded, mem_ptr=ptr, pmem_id=id(self))
        self._free_list.append(ptr)


class PinnedMemory:
    def __init__(self, ptr, size):
        self.ptr, self.size = ptr, size


class PooledPinnedMemory(PinnedMemory):
    def __init__(self, mem, pool):
        self.ptr, self.size, self.pool = mem.ptr, mem.size, pool

    def free(self):
        pool = self.pool()
        if pool and self.ptr != 0:
            pool.free(self.ptr, self.size)
        self.ptr = 0
        self.size = 0

    __del__ = free


class PinnedMemoryPointer:
    def __init__(self, mem, offset):
        self.mem, self.ptr = mem, mem.ptr + offset


class PinnedMemoryPool:
    def __init__(self):
        self._next = 0x900000
        self._weakref = weakref.ref(self)
        self.freed = []

    def malloc(self, size):
        size = (size + 511) // 512 * 512
        mem = PinnedMemory(self._next, size)
        self._next += size
        return PinnedMemoryPointer(PooledPinnedMemory(mem, self._weakref), 0)

    def free(self, ptr, size):
        self.freed.append(ptr)


_pinned_allocator = [None]


def _set_pinned(allocator=None):
    _pinned_allocator[0] = allocator


def _alloc_pinned(size):
    return _pinned_allocator[0](size)


pinned_memory = types.SimpleNamespace(
    PooledPinnedMemory=PooledPinnedMemory, set_pinned_memory_allocator=_set_pinned, alloc_pinned_memory=_alloc_pinned
)
runtime = types.SimpleNamespace(getDevice=lambda: 0)
cuda = types.SimpleNamespace(
    MemoryHook=MemoryHook,
    MemoryPool=MemoryPool,
    get_current_stream=lambda: _Stream(),
    runtime=runtime,
    pinned_memory=pinned_memory,
    set_pinned_memory_allocator=_set_pinned,
    alloc_pinned_memory=_alloc_pinned,
)

_default_pinned = PinnedMemoryPool()


def get_default_pinned_memory_pool():
    return _default_pinned


# What CuPy's import does.
_set_pinned(_default_pinned.malloc)
