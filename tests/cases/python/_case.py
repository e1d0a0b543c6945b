"""What the Python cases share (not a case: the suite skips files starting with `_`).

A case imports what it needs through `need`: a framework missing or broken on the machine
makes it print `SKIP: <reason>` and exit 77, which the suite records as skipped with that
reason instead of a failure of gpusan. It ends with `done(value)`: its one line on stdout,
`<case> done <value>`, that a clean case must print the same under gpusan as natively.
`note` writes a fact for the suite to stderr (`note: key=value`), e.g. whether a freed
address was handed out again natively, without changing that line.
"""
import importlib
import os
import sys

SKIP_RC = 77


def skip(reason):
    print("SKIP: " + " ".join(str(reason).split()), flush=True)
    sys.exit(SKIP_RC)


def need(module):
    """The module, or a skip naming why it cannot be imported (numba-cuda raises
    AttributeError, not ImportError, with a numpy it does not support)."""
    try:
        return importlib.import_module(module)
    except Exception as e:  # noqa: BLE001 (any import failure is the environment's)
        skip(f"cannot import {module}: {type(e).__name__}: {str(e)[:200]}")


def note(key, value):
    print(f"note: {key}={value}", file=sys.stderr, flush=True)


def done(value):
    name = os.path.splitext(os.path.basename(sys.argv[0]))[0]
    print(f"{name} done {value}", flush=True)
