"""PyTorch's CUDA caching allocator tells gpusan about its blocks.

The allocator's trace callbacks (`attachAllocatorTraceTracker`) see every block it hands out
(pointer, requested size, stream, device) and every block that returns to the pool, even
with memory history off. Their entry's layout changes between PyTorch releases, so a small
C++ shim (`_torch_shim.cpp`) is built against the PyTorch installed, the first time, with the
system's C++ compiler and PyTorch's own headers, and kept in gpusan's cache folder under the
PyTorch and gpusan versions (never rebuilt once there). The build starts when torch is
imported, in a background thread; the shim is attached when CUDA is initialized (a
`torch.cuda._lazy_call`, which waits for the build), before the program's first tensor.

Without a compiler, headers or the runtime's pool interface, one `gpusan:` line says tensor
bounds are off and why, and the program runs on, checked against whole segments.
With `PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync` (`gpusan run --torch-allocator async`)
every tensor is a stream-ordered allocation gpusan sees by itself: no shim is needed.
"""

import ctypes
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading

try:
    import fcntl  # imported here: the build thread must import nothing while CUDA initializes
except ImportError:
    fcntl = None

import gpusan
from gpusan import _pool, warn_once

SHIM_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_torch_shim.cpp")
SHIM_NAME = "libgpusan_torch_shim.so"
BUILD_TIMEOUT_S = 600
OFF = "tensor bounds are off: "
ADVICE = " (tensors are checked against their allocator's segments only; " \
    "`gpusan run --torch-allocator async` checks each tensor without the shim)"


class ShimError(Exception):
    """Why the shim cannot be had, in words for the one line said about it."""


def _trusted_dir(path):
    """Creates `path` (0700) and says whether it is the user's own and closed to others: the
    shim is code the program will run."""
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        st = os.stat(path)
    except OSError:
        return False
    return st.st_uid == os.geteuid() and not st.st_mode & 0o022


def shim_path(torch):
    """Where the shim for this PyTorch and this gpusan lives in the cache folder."""
    base = gpusan.cache_dir()
    if not base:
        raise ShimError("no cache folder (set GPUSAN_CACHE_DIR or HOME)")
    with open(SHIM_SOURCE, "rb") as f:
        source = f.read()
    h = hashlib.sha256()
    for part in (source, str(torch.__version__).encode(), os.path.abspath(torch.__file__).encode(),
                 gpusan.__version__.encode()):
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    version = "".join(c if c.isalnum() or c in ".-_" else "_" for c in str(torch.__version__))
    name = "%s-torch%s-%s" % (gpusan.__version__, version, h.hexdigest()[:16])
    return os.path.join(base, "torch-shim", name, SHIM_NAME)


def cuda_include_dirs(torch_dir):
    """Folders holding cuda_runtime_api.h (the allocator's header includes it): the CUDA
    toolkit's, and the pip CUDA packages' beside PyTorch."""
    candidates = []
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            candidates.append(os.path.join(os.environ[var], "include"))
    nvcc = shutil.which("nvcc")
    if nvcc:
        candidates.append(os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(nvcc))), "include"))
    candidates.append("/usr/local/cuda/include")
    nvidia = os.path.join(os.path.dirname(torch_dir), "nvidia")
    if os.path.isdir(nvidia):
        for entry in sorted(os.listdir(nvidia)):
            candidates.append(os.path.join(nvidia, entry, "include"))
    found = []
    for d in candidates:
        if os.path.isfile(os.path.join(d, "cuda_runtime_api.h")) and d not in found:
            found.append(d)
    return found


def compile_command(torch, output, std):
    torch_dir = os.path.dirname(os.path.abspath(torch.__file__))
    include = os.path.join(torch_dir, "include")
    lib = os.path.join(torch_dir, "lib")
    if not os.path.isfile(os.path.join(include, "c10", "cuda", "CUDACachingAllocator.h")):
        raise ShimError("PyTorch's C++ headers are not installed (%s has no c10/cuda)" % include)
    cuda = cuda_include_dirs(torch_dir)
    if not cuda:
        raise ShimError("no CUDA headers found (cuda_runtime_api.h; set CUDA_HOME)")
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if not cxx:
        raise ShimError("no C++ compiler found (g++, or set CXX)")
    abi = int(bool(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True)))
    cmd = [cxx, "-O2", "-shared", "-fPIC", std, "-w", "-D_GLIBCXX_USE_CXX11_ABI=%d" % abi,
           "-I", include, "-I", os.path.join(include, "torch", "csrc", "api", "include")]
    for d in cuda:
        cmd += ["-I", d]
    cmd += [SHIM_SOURCE, "-o", output, "-L", lib, "-Wl,-rpath," + lib, "-lc10_cuda", "-lc10", "-ldl"]
    return cmd


def build(torch, path):
    """Compiles the shim to `path` (atomically: a reader never sees half a file)."""
    folder = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".so", dir=folder)
    os.close(fd)
    try:
        last = ""
        # PyTorch's headers need C++17 (recent releases C++20): the newest the compiler has.
        for std in ("-std=c++20", "-std=c++17"):
            cmd = compile_command(torch, tmp, std)
            try:
                done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      timeout=BUILD_TIMEOUT_S)
            except (OSError, subprocess.TimeoutExpired) as e:
                raise ShimError("the C++ compiler did not run (%s)" % e)
            if done.returncode == 0:
                os.chmod(tmp, 0o700)  # the linker's mode follows the umask; the loader checks it
                os.replace(tmp, path)
                return
            last = done.stdout.decode(errors="replace").strip().splitlines()
        detail = next((l for l in last if "error" in l), last[-1] if last else "no output")
        raise ShimError("the C++ compiler failed: %s" % detail.strip()[:300])
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _build_once(torch, path):
    """Builds under a lock in the shim's folder: the processes of a program started at once
    (one per GPU) wait for one build instead of each compiling."""
    folder = os.path.dirname(path)
    for d in (os.path.dirname(os.path.dirname(folder)), os.path.dirname(folder), folder):
        if not _trusted_dir(d):
            raise ShimError("the cache folder %s is not the user's own or is open to others" % d)
    try:
        fd = os.open(os.path.join(folder, ".lock"), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError:
        fd = None
    if fcntl is None and fd is not None:
        os.close(fd)
        fd = None
    try:
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        if not os.path.isfile(path):
            build(torch, path)
    finally:
        if fd is not None:
            os.close(fd)


def load(torch):
    """The shim for this PyTorch, built first if the cache has none."""
    path = shim_path(torch)
    if not os.path.isfile(path):
        _build_once(torch, path)
    st = os.stat(path)
    if st.st_uid != os.geteuid() or st.st_mode & 0o022:
        raise ShimError("%s is not the user's own or is writable by others" % path)
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise ShimError("%s did not load (%s)" % (path, e))
    attach = lib.gpusan_torch_shim_attach
    attach.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    attach.restype = ctypes.c_int
    pad = getattr(lib, "gpusan_torch_shim_pad", None)
    if pad is not None:
        pad.argtypes = [ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
        pad.restype = ctypes.c_int
    return attach, pad


def canary_padding():
    """The bytes each request of the caching allocator is asked for more in canary mode (the
    run's --redzone, at most 65535: the pool interface's field), so that every tensor's
    block has slack for its canary; 0 in other modes."""
    if os.environ.get("GPUSAN_MODE") != "canary":
        return 0
    try:
        pad = int(os.environ.get("GPUSAN_REDZONE", "32"))
    except ValueError:
        return 0
    return max(0, min(pad, 65535))


class _Shim:
    """The shim's build, started at import, waited for at CUDA initialization."""

    def __init__(self, torch):
        self.torch = torch
        self.attach = None
        self.pad = None
        self.error = None
        self.thread = threading.Thread(target=self._run, name="gpusan-torch-shim", daemon=True)
        # A program set to the stream-ordered allocator needs no shim: not even built.
        self.started = not _async_by_env()
        if self.started:
            self.thread.start()

    def _run(self):
        try:
            self.attach, self.pad = load(self.torch)
        except ShimError as e:
            self.error = str(e)
        except Exception as e:
            self.error = "%s: %s" % (type(e).__name__, e)

    def attach_now(self):
        """Runs at CUDA initialization (torch.cuda._lazy_call): must never raise."""
        try:
            backend = self.torch.cuda.get_allocator_backend()
        except Exception:
            backend = "native"
        if backend != "native":
            return  # cudaMallocAsync: each tensor is an allocation gpusan sees itself
        if self.started:
            self.thread.join()
        else:
            self._run()  # not started at import (the setting changed since)
        if self.attach is None:
            warn_once("torch-shim", OFF + "the PyTorch allocator shim is unavailable: " + str(self.error) + ADVICE)
            return
        why = ctypes.create_string_buffer(512)
        rc = self.attach(why, len(why))
        text = why.value.decode(errors="replace")
        if rc == 1:
            warn_once("pool-abi", OFF + _pool.missing_reason())
        elif rc != 0:
            warn_once("torch-shim", OFF + "PyTorch refused the allocator trace callback: " + text + ADVICE)
        elif canary_padding() > 0:
            if self.pad is None:
                warn_once("torch-pad", "gpusan: tensors whose size is a multiple of 512 bytes have no canary: "
                          "the allocator shim built has no padding entry")
            elif self.pad(canary_padding(), why, len(why)) != 0:
                warn_once("torch-pad", "gpusan: tensors whose size is a multiple of 512 bytes have no canary: "
                          "PyTorch refused the padding allocator: " + why.value.decode(errors="replace"))


def _async_by_env():
    return any("cudaMallocAsync" in os.environ.get(v, "") for v in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"))


_shim = None


def install(torch):
    """Called once torch has been imported."""
    global _shim
    if not gpusan.is_active() or _shim is not None:
        return
    version = getattr(torch, "version", None)
    if getattr(version, "cuda", None) is None:
        return  # a CPU (or ROCm) build: no CUDA allocator to follow
    if _pool.functions() is None:
        warn_once("pool-abi", OFF + _pool.missing_reason())
        return
    lazy_call = getattr(getattr(torch, "cuda", None), "_lazy_call", None)
    if lazy_call is None:
        warn_once("torch-shim", OFF + "this PyTorch has no torch.cuda._lazy_call to attach at" + ADVICE)
        return
    _shim = _Shim(torch)
    lazy_call(_shim.attach_now)
