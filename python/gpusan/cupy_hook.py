"""CuPy's pools tell gpusan about their blocks.

- `MemoryPool` (device memory): a `cupy.cuda.MemoryHook` whose `malloc_postprocess`
  registers each block handed out with the size the program asked for (`size`, not the
  rounded `mem_size`: the rounding slack is out of bounds) and whose `free_preprocess`
  marks it freed before the pool can hand it out again. CuPy keeps memory hooks per thread,
  so the hook is put on the thread that imported CuPy and on every thread started after
  (threads already running then cannot be reached: their blocks stay whole-segment).
- `PinnedMemoryPool` (host memory) calls no memory hooks: the pinned allocator CuPy
  installs is wrapped instead, and `PooledPinnedMemory.free` reports before the block goes
  back to the pool.

The stream given with a block is the current stream when it was handed out: CuPy's pool
reuses a block only on the stream (arena) it was allocated on, so a free is ordered on it.
"""

import threading

from gpusan import _pool, is_active, warn_once

HOOK_NAME = "gpusan"

_state = {"alloc": None, "free": None, "cupy": None}
# ptr → (stream, device) of the live blocks, so a free names the stream its block lived on.
_streams = {}
_thread_local = threading.local()


def _current_stream(cupy):
    try:
        return int(cupy.cuda.get_current_stream().ptr)
    except Exception:
        return 0


def _current_device(cupy):
    # Pinned host memory belongs to no device: the current one is named, as cudaHostAlloc's
    # context is.
    try:
        return int(cupy.cuda.runtime.getDevice())
    except Exception:
        return 0


def _make_hook_class(cupy):
    base = cupy.cuda.MemoryHook

    class GpusanMemoryHook(base):
        """Reports MemoryPool blocks to gpusan (one instance per thread)."""

        name = HOOK_NAME

        def malloc_postprocess(self, **kw):
            ptr = kw.get("mem_ptr", 0)
            if not ptr:
                return
            device = int(kw.get("device_id", 0))
            stream = _current_stream(cupy)
            _streams[ptr] = (stream, device)
            _state["alloc"](ptr, int(kw.get("size", kw.get("mem_size", 0))), stream, device, _pool.CUPY)

        def free_preprocess(self, **kw):
            ptr = kw.get("mem_ptr", 0)
            if not ptr:
                return
            stream, device = _streams.pop(ptr, (0, int(kw.get("device_id", 0))))
            _state["free"](ptr, stream, device, _pool.CUPY)

    return GpusanMemoryHook


def install_on_this_thread():
    """Puts gpusan's memory hook on the calling thread (once)."""
    cls = _state.get("hook_class")
    if cls is None or getattr(_thread_local, "installed", False):
        return
    _thread_local.installed = True
    try:
        hook = cls()
        hook.__enter__()
        # Kept alive (and registered) as long as the thread lives.
        _thread_local.hook = hook
    except KeyError:
        pass  # a hook of that name is already there


def _wrap_threads():
    """New threads get the hook before their target runs."""
    original = getattr(threading.Thread, "_bootstrap_inner", None)
    if original is None or getattr(original, "_gpusan", False):
        return

    def _bootstrap_inner(self):
        try:
            install_on_this_thread()
        except Exception:
            pass
        return original(self)

    _bootstrap_inner._gpusan = True
    threading.Thread._bootstrap_inner = _bootstrap_inner


def _wrap_pinned(cupy):
    """The default pinned pool's blocks: its allocator wrapped (it calls no memory hook)."""
    cuda = cupy.cuda
    pinned = getattr(cuda, "pinned_memory", None)
    pooled = getattr(pinned, "PooledPinnedMemory", None)
    setter = getattr(cuda, "set_pinned_memory_allocator", None)
    get_pool = getattr(cupy, "get_default_pinned_memory_pool", None)
    if pooled is None or setter is None or get_pool is None:
        return

    def wrap_allocator(malloc):
        def allocate(size):
            p = malloc(size)
            ptr = int(getattr(p, "ptr", 0) or 0)
            if ptr and isinstance(getattr(p, "mem", None), pooled):
                _state["alloc"](ptr, int(size), 0, _current_device(cupy), _pool.CUPY_PINNED)
            return p

        allocate._gpusan = True
        return allocate

    original_free = pooled.free

    def free(self):
        ptr = getattr(self, "ptr", 0)
        if ptr:
            _state["free"](int(ptr), 0, _current_device(cupy), _pool.CUPY_PINNED)
        return original_free(self)

    pooled.free = free
    pooled.__del__ = free

    def set_pinned_memory_allocator(allocator=None):
        if allocator is not None and not getattr(allocator, "_gpusan", False):
            allocator = wrap_allocator(allocator)
        return setter(allocator)

    cuda.set_pinned_memory_allocator = set_pinned_memory_allocator
    if pinned is not None:
        pinned.set_pinned_memory_allocator = set_pinned_memory_allocator
    # What cupy's import set: the default pool's malloc.
    setter(wrap_allocator(get_pool().malloc))


def install(cupy):
    """Called once CuPy has been imported, in the importing thread."""
    if not is_active() or _state["cupy"] is not None:
        return
    fns = _pool.functions()
    if fns is None:
        warn_once("pool-abi", "CuPy array bounds are off: " + _pool.missing_reason())
        return
    _state["alloc"], _state["free"] = fns
    _state["cupy"] = cupy
    _state["hook_class"] = _make_hook_class(cupy)
    install_on_this_thread()
    _wrap_threads()
    _wrap_pinned(cupy)
