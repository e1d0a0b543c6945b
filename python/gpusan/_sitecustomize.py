"""The `sitecustomize.py` that `gpusan run` writes first on the program's PYTHONPATH (this
file, renamed): under gpusan it starts `gpusan._autoload`; always, it then runs the
`sitecustomize` the program would have had without gpusan (the next one on `sys.path`), under
that name, so a user's or a distribution's site customization still happens.

Outside gpusan (the folder left on PYTHONPATH of a process whose environment lost gpusan's
variables) it only chains.
"""


def _gpusan_start():
    import os

    if not os.environ.get("GPUSAN_REPORT_DIR"):
        return
    try:
        from gpusan import _autoload

        _autoload.start()
    except Exception as e:
        import sys

        sys.stderr.write("gpusan: the Python hooks could not start (%s: %s)\n" % (type(e).__name__, e))


def _gpusan_chain():
    """Runs the next `sitecustomize` on sys.path as module `sitecustomize`. Its errors
    propagate, so `site` reports them as it would have without gpusan."""
    import importlib.machinery
    import importlib.util
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))

    def same(entry):
        try:
            return os.path.samefile(entry or os.getcwd(), here)
        except OSError:
            return False

    path = [p for p in sys.path if isinstance(p, str) and not same(p)]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    theirs = importlib.util.module_from_spec(spec)
    # The import of `sitecustomize` in progress returns what sys.modules holds when it ends:
    # theirs, as if gpusan's had not been there.
    sys.modules["sitecustomize"] = theirs
    spec.loader.exec_module(theirs)


_gpusan_start()
_gpusan_chain()
