"""Run at interpreter start under `gpusan run` (from the `sitecustomize` gpusan puts first on
PYTHONPATH): installs the pool hooks of PyTorch and CuPy when the program imports them.

Nothing is imported here but the standard library: a finder on `sys.meta_path` notices the
import of `torch` or `cupy` (it answers no other name and finds nothing itself), lets the
import run as it would, and once the package has finished importing calls its hook's
`install(module)`. A hook that fails says why in one `gpusan:` line; the program goes on.
"""

import sys
import threading

# Top-level package → the hook module that handles it (imported only when that package is).
_HOOKS = {"torch": "gpusan.torch_hook", "cupy": "gpusan.cupy_hook"}


def _run_hook(name, module):
    try:
        hook = __import__(_HOOKS[name], fromlist=["install"])
        hook.install(module)
    except Exception as e:  # a hook must never break the user's import
        from gpusan import warn_once

        warn_once("hook-" + name, "the %s hook failed (%s: %s); its blocks are not tracked" % (name, type(e).__name__, e))


class _Finder:
    """Meta-path finder that only watches: it asks the finders after it for the spec of a
    watched package and arranges for the hook to run after the package's module ran."""

    def __init__(self):
        self._pending = set(_HOOKS)
        self._busy = threading.local()

    def find_spec(self, name, path=None, target=None):
        if name not in self._pending or getattr(self._busy, "on", False):
            return None
        self._busy.on = True
        try:
            spec = _find_elsewhere(self, name, path, target)
        finally:
            self._busy.on = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        # A loader that cannot take the wrapper imports as usual, without the hook.
        _wrap_exec(spec.loader, name, self)
        return spec

    def done(self, name):
        self._pending.discard(name)
        if not self._pending:
            _uninstall(self)

    # importlib calls this on meta-path entries when caches are invalidated.
    def invalidate_caches(self):
        pass


def _find_elsewhere(me, name, path, target):
    for finder in list(sys.meta_path):
        if finder is me:
            continue
        find = getattr(finder, "find_spec", None)
        if find is None:
            continue
        spec = find(name, path, target)
        if spec is not None:
            return spec
    return None


def _wrap_exec(loader, name, finder):
    """Shadows `exec_module` on this one loader object (a file loader is made per module):
    the module keeps its own loader and spec, and the hook runs once the package imported."""
    original = loader.exec_module

    def exec_module(module):
        try:
            del loader.exec_module
        except AttributeError:
            pass
        original(module)
        finder.done(name)
        _run_hook(name, module)

    try:
        loader.exec_module = exec_module
    except (AttributeError, TypeError):
        return False
    return True


def _uninstall(finder):
    try:
        sys.meta_path.remove(finder)
    except ValueError:
        pass


_started = False


def start():
    """Installs the finder (once), or the hooks at once for packages already imported."""
    global _started
    if _started:
        return
    _started = True
    finder = _Finder()
    for name in list(_HOOKS):
        module = sys.modules.get(name)
        if module is not None:
            finder.done(name)
            _run_hook(name, module)
    if finder._pending:
        sys.meta_path.insert(0, finder)
