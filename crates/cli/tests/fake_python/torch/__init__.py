"""A fake `torch` for the tests of gpusan's PyTorch hook: the surface the hook uses
(`__version__`, `version.cuda`, `_C._GLIBCXX_USE_CXX11_ABI`, `cuda._lazy_call`,
`cuda.get_allocator_backend`), headers under include/ and a libc10_cuda.so under lib/ (built
by the test) whose allocator events the test fires with `cuda._fake`."""

import ctypes
import os
import types

__version__ = "2.11.0+fake"

version = types.SimpleNamespace(cuda="13.0", hip=None)
_C = types.SimpleNamespace(_GLIBCXX_USE_CXX11_ABI=True)

_here = os.path.dirname(os.path.abspath(__file__))
_lib = ctypes.CDLL(os.path.join(_here, "lib", "libc10_cuda.so"), mode=ctypes.RTLD_GLOBAL)


class _Cuda(types.ModuleType):
    def __init__(self):
        super().__init__("torch.cuda")
        self._queued = []
        self._initialized = False
        self._fake = _lib

    def _lazy_call(self, fn, **kw):
        if self._initialized:
            fn()
        else:
            self._queued.append(fn)

    def _lazy_init(self):
        if self._initialized:
            return
        for fn in self._queued:
            fn()
        self._initialized = True

    def get_allocator_backend(self):
        conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
        return "cudaMallocAsync" if "backend:cudaMallocAsync" in conf else "native"


cuda = _Cuda()
