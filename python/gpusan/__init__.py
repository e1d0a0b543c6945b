"""gpusan for Python programs: what `gpusan run` adds to a Python program it starts.

Under `gpusan run` the folder holding this package comes first on PYTHONPATH, with a
`sitecustomize` that calls `gpusan._autoload.start()`: when the program imports PyTorch or
CuPy, their pool allocators are made to tell gpusan about every block they hand out and take
back (`torch_hook`, `cupy_hook`), so a kernel reading past a tensor inside its allocator's
segment is caught. Outside gpusan nothing here does anything.
"""

import os

# Kept equal to the gpusan crates' version (a test of the command in crates/cli/tests and
# scripts/python-wheel.sh check it).
__version__ = "0.1.0"

# Set by `gpusan run` for the program it starts (crates/abi's env::REPORT_DIR): the folder
# its runtime writes findings to. Nothing else sets it.
_REPORT_DIR = "GPUSAN_REPORT_DIR"


def is_active():
    """True when this process runs under `gpusan run`."""
    return bool(os.environ.get(_REPORT_DIR))


_warned = set()


def warn_once(key, message):
    """Prints `gpusan: MESSAGE` on standard error, once per process for each key."""
    if key in _warned:
        return
    _warned.add(key)
    try:
        import sys

        sys.stderr.write("gpusan: " + message + "\n")
        sys.stderr.flush()
    except Exception:
        pass


def cache_dir():
    """gpusan's cache folder, as the command and the runtime find it: `$GPUSAN_CACHE_DIR`,
    else `$XDG_CACHE_HOME/gpusan` or `~/.cache/gpusan` (empty variables count as unset)."""
    d = os.environ.get("GPUSAN_CACHE_DIR")
    if d:
        return d
    base = os.environ.get("XDG_CACHE_HOME")
    if not base:
        home = os.environ.get("HOME")
        if not home:
            return None
        base = os.path.join(home, ".cache")
    return os.path.join(base, "gpusan")
