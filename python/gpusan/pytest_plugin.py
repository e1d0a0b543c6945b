"""`pytest --gpusan`: the test session under gpusan, each finding named by its test.

Registered with pytest through the wheel's `pytest11` entry point (or `-p
gpusan.pytest_plugin`). With `--gpusan`, a session not yet under gpusan runs pytest again
under `gpusan run --mode check` (the same arguments without gpusan's), then prints the
findings test by test from gpusan's JSON report and ends with its exit code: 1 when gpusan
found errors, else pytest's. In that session (and its xdist workers), each test is marked through `gpusan_set_label(nodeid)` from its setup to the end of its teardown:
gpusan reads what kernels recorded before each mark changes, so each finding lands in the
test that made it.

Options: `--gpusan-mode api|count|check` (default check), `--gpusan-args "..."` (more
`gpusan run` options, split like a shell would).
"""

import json
import os
import shlex
import subprocess
import sys
import tempfile

# Set by `gpusan run` for the program it starts: the folder its runtime writes findings to.
_UNDER_GPUSAN = "GPUSAN_REPORT_DIR"
# Set by the outer session for the one it runs under gpusan (whose arguments no longer have
# `--gpusan`), and inherited by its processes (xdist workers): mark the tests.
_MARK_TESTS = "GPUSAN_PYTEST_LABELS"

try:
    from pytest import hookimpl
except ImportError:  # the module's logic is tested without pytest

    def hookimpl(**_):
        return lambda f: f


# The plugin's own options, and whether each takes a value (removed from the inner run).
_OPTIONS = {"--gpusan": False, "--gpusan-mode": True, "--gpusan-args": True}

NO_TEST = "(outside any test)"


def pytest_addoption(parser):
    group = parser.getgroup("gpusan", "memory checking of CUDA code with gpusan")
    group.addoption("--gpusan", action="store_true", default=False, help="run the session under gpusan")
    group.addoption(
        "--gpusan-mode",
        default="check",
        choices=("api", "count", "check", "canary"),
        help="gpusan run --mode (default check)",
    )
    group.addoption("--gpusan-args", default="", help='more `gpusan run` options, e.g. "--leak-check full"')


def under_gpusan(environ=None):
    return bool((os.environ if environ is None else environ).get(_UNDER_GPUSAN))


def strip_own_options(args):
    """`args` without the plugin's options (`--gpusan`, `--gpusan-mode check`,
    `--gpusan-mode=check`, …); everything after a `--` is the user's and kept."""
    out, i = [], 0
    args = list(args)
    while i < len(args):
        a = args[i]
        if a == "--":
            out.extend(args[i:])
            break
        name = a.split("=", 1)[0]
        if name in _OPTIONS:
            if _OPTIONS[name] and "=" not in a:
                i += 1
            i += 1
            continue
        out.append(a)
        i += 1
    return out


def gpusan_command(exe, mode, extra, report, pytest_args, python=None):
    """The `gpusan run` command line that runs pytest with `pytest_args` under gpusan,
    writing its JSON report to `report` (unless `extra` names a file of its own)."""
    extra = list(extra)
    cmd = [exe, "run", "--mode", mode]
    if not any(e.split("=", 1)[0] == "--error-exitcode" for e in extra):
        cmd += ["--error-exitcode", "1"]
    if not any(e.split("=", 1)[0] == "--report-json" for e in extra):
        cmd += ["--report-json", report]
    return cmd + extra + ["--", python or sys.executable, "-m", "pytest"] + list(pytest_args)


def report_path(extra, default):
    """Where the JSON report goes: the user's `--report-json` in `extra`, else `default`."""
    extra = list(extra)
    for i, e in enumerate(extra):
        if e.startswith("--report-json="):
            return e.split("=", 1)[1]
        if e == "--report-json" and i + 1 < len(extra):
            return extra[i + 1]
    return default


def by_test(document):
    """The findings of a gpusan JSON report grouped by test: [(test, [(count, kind, message,
    where)])], tests in the order of their first finding, findings outside any test last."""
    groups = {}
    for e in document.get("errors", []):
        details = e.get("details", {})
        where = details.get("kernel") or details.get("api") or ""
        finding = (e.get("count", 1), e.get("kind", "?"), e.get("message", ""), where)
        groups.setdefault(e.get("label") or NO_TEST, []).append(finding)
    ordered = [(t, f) for t, f in groups.items() if t != NO_TEST]
    if NO_TEST in groups:
        ordered.append((NO_TEST, groups[NO_TEST]))
    return ordered


def summary_lines(document):
    """The per-test summary printed at the end of a `pytest --gpusan` session."""
    groups = by_test(document)
    total = document.get("summary", {}).get("total", 0)
    tests = sum(1 for t, _ in groups if t != NO_TEST)
    if not groups and not total:
        if document.get("cuda_processes", 1) == 0:
            return ["gpusan: no CUDA activity seen: nothing was checked"]
        return ["gpusan: no errors found"]
    lines = ["gpusan: %d error(s), %d distinct, in %d test(s):" % (total, sum(len(f) for _, f in groups), tests)]
    for test, findings in groups:
        lines.append("  " + test)
        for count, kind, message, where in findings:
            times = " (%d times)" % count if count > 1 else ""
            at = " in %s" % where if where else ""
            lines.append("    %s%s: %s%s" % (kind, times, message, at))
    lines.append("gpusan: the full report (stacks, allocations) is above")
    return lines


def _run_under_gpusan(config):
    from gpusan.__main__ import require

    exe = require()
    extra = shlex.split(config.getoption("gpusan_args") or "")
    scratch = tempfile.mkdtemp(prefix="gpusan-pytest-")
    report = report_path(extra, os.path.join(scratch, "report.json"))
    args = strip_own_options(config.invocation_params.args)
    cmd = gpusan_command(exe, config.getoption("gpusan_mode"), extra, report, args)
    sys.stdout.flush()
    env = dict(os.environ, **{_MARK_TESTS: "1"})
    code = subprocess.call(cmd, cwd=str(config.invocation_params.dir), env=env)
    try:
        with open(report) as f:
            lines = summary_lines(json.load(f))
    except (OSError, ValueError) as e:
        lines = ["gpusan: no report to summarize (%s)" % e]
    finally:
        if report.startswith(scratch):
            try:
                os.unlink(report)
            except OSError:
                pass
            os.rmdir(scratch)
    sys.stdout.write("\n".join(lines) + "\n")
    sys.stdout.flush()
    return code


@hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    # First: the whole session (xdist's, a looponfail's) is to run under gpusan.
    if not config.getoption("gpusan") or under_gpusan():
        return None
    return _run_under_gpusan(config)


class Labels:
    """Marks each test for gpusan through `set_label` (gpusan_set_label: bytes or None)."""

    def __init__(self, set_label):
        self.set_label = set_label

    def mark(self, label):
        self.set_label(label.encode("utf-8", "replace") if label is not None else None)

    @hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item, nextitem):
        # Setup, call and teardown, all three the test's.
        self.mark(item.nodeid)
        return None

    def pytest_runtest_logfinish(self, nodeid, location):
        self.mark(None)


def _set_label_function():
    """gpusan_set_label of the injected library, or None where it is absent."""
    import ctypes

    try:
        f = ctypes.CDLL(None).gpusan_set_label
    except (AttributeError, OSError):
        return None
    f.argtypes = [ctypes.c_char_p]
    f.restype = ctypes.c_int
    return f


def marks_tests(asked, environ=None):
    """Whether this session marks its tests: under gpusan, and asked (`--gpusan`, or the
    outer session's variable)."""
    environ = os.environ if environ is None else environ
    return under_gpusan(environ) and (asked or bool(environ.get(_MARK_TESTS)))


def pytest_configure(config):
    if not marks_tests(config.getoption("gpusan")):
        return
    set_label = _set_label_function()
    if set_label is None:
        sys.stderr.write("gpusan: gpusan_set_label not found in this process: findings will not name their tests\n")
        return
    config.pluginmanager.register(Labels(set_label), "gpusan-labels")
