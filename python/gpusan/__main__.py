"""`python -m gpusan`: the gpusan command, for Python users.

    python -m gpusan run [GPUSAN OPTIONS] train.py [ARGS]   # gpusan run [OPTIONS] -- python train.py [ARGS]
    python -m gpusan run [GPUSAN OPTIONS] -m pytest [ARGS]  # any Python command line, this interpreter
    python -m gpusan run [GPUSAN OPTIONS] -- PROGRAM [ARGS] # as `gpusan run`, unchanged
    python -m gpusan ANYTHING ELSE                          # as `gpusan ANYTHING ELSE`

After `run`, gpusan's options come first (`--name value`, `--name=value`, or one of the
flags in `FLAGS`); the first word that is not one starts the Python command line, run by
the interpreter running this (`sys.executable`). The `gpusan` command the wheel installs
is `main` here too.

Where the executable is: the wheel puts the Rust binary and its injected library side by
side in `gpusan/_bin/` (the binary finds `libgpusan_inject.so` next to itself). Outside a
wheel (a checkout, the package on PYTHONPATH) it is `$GPUSAN_BIN`, else the checkout's cargo
build, else a `gpusan` on PATH that is the binary itself: the `gpusan` command a wheel
installs is a Python script that comes here, and handing it back would loop.
"""


import os
import shutil
import sys

# Set to the binary to use; wins over every other place.
BIN_VAR = "GPUSAN_BIN"

_HERE = os.path.dirname(os.path.abspath(__file__))


def _is_native(path):
    """True for an ELF executable (not a Python script standing in for one)."""
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def candidates():
    """The places looked at, in order."""
    found = []
    if os.environ.get(BIN_VAR):
        found.append(os.environ[BIN_VAR])
    found.append(os.path.join(_HERE, "_bin", "gpusan"))
    # python/gpusan/ of a checkout: its target/ is two levels up.
    root = os.path.dirname(os.path.dirname(_HERE))
    for profile in ("release", "debug"):
        found.append(os.path.join(root, "target", profile, "gpusan"))
    on_path = shutil.which("gpusan")
    if on_path:
        found.append(on_path)
    return found


def find():
    """The gpusan executable, or None. `$GPUSAN_BIN` is taken as given."""
    if os.environ.get(BIN_VAR):
        return os.environ[BIN_VAR]
    for path in candidates():
        if os.path.isfile(path) and _is_native(path):
            if not os.access(path, os.X_OK):
                # An installer that dropped the executable bit (pip keeps it): restore it.
                try:
                    os.chmod(path, os.stat(path).st_mode | 0o111)
                except OSError:
                    continue
            return path
    return None


def require():
    """The gpusan executable; exits with a message naming where it looked when none is."""
    path = find()
    if path is None:
        sys.stderr.write(
            "gpusan: the gpusan executable was not found (looked at: %s); install the gpusan wheel "
            "or set %s\n" % (", ".join(candidates()), BIN_VAR)
        )
        sys.exit(127)
    return path


# `gpusan run`'s options that take no value (crates/cli/src/run.rs; a test of this
# package keeps the list equal to the command's help).
FLAGS = ("--count-checks", "--require-checked", "--verbose", "--pool-sites", "--help", "-h")


def run_command(args, python=None):
    """The `gpusan` arguments for `run ARGS`: ARGS with `-- PYTHON` put where gpusan's
    options end, unless ARGS already has its `--`."""
    python = python or sys.executable
    if "--" in args:
        return ["run"] + list(args)
    options, i = [], 0
    while i < len(args):
        a = args[i]
        if not a.startswith("--") and a != "-h":
            break
        options.append(a)
        if a not in FLAGS and "=" not in a and i + 1 < len(args):
            options.append(args[i + 1])
            i += 1
        i += 1
    rest = list(args[i:])
    if not rest:
        # `gpusan run` says what is missing.
        return ["run"] + options
    return ["run"] + options + ["--", python] + rest


def command(argv):
    """The gpusan command line (without the executable) for `python -m gpusan ARGV`."""
    if argv and argv[0] == "run":
        return run_command(argv[1:])
    return list(argv)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    exe = require()
    args = [exe] + command(argv)
    sys.stdout.flush()
    sys.stderr.flush()
    # Replaced, not waited for: signals, the exit code and the terminal are the program's.
    os.execv(exe, args)


if __name__ == "__main__":
    main()
