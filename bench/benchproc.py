"""Running a benchmark program and reading its result, shared by the bench drivers
(bench/check_overhead.py, bench/runtime/overhead.py). Standard library only: it runs on
the GPU machine.

A benchmark prints one JSON line last: {"bench", "ok", "params", "metrics"}.
"""

import json
import os
import shlex
import signal
import subprocess
import time


def run(cmd, timeout, env=None, cwd=None):
    """Runs cmd (argv) in its own process group, killed with the whole group after timeout
    seconds (at least 1): a program that starts others leaves none behind. Returns rc (124
    on timeout, 128+N for a signal N, as shells say), timed_out, wall_s, cmd as a shell
    line, stdout and stderr."""
    start = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True, env=env, cwd=cwd)
    timed_out = False
    try:
        out, err = p.communicate(timeout=max(1, timeout))
    except subprocess.TimeoutExpired:
        timed_out = True
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
        out, err = p.communicate()
    rc = 124 if timed_out else (128 - p.returncode if p.returncode < 0 else p.returncode)
    return {"rc": rc, "timed_out": timed_out, "wall_s": round(time.monotonic() - start, 3), "cmd": shlex.join(cmd),
            "stdout": out.decode("utf-8", "replace"), "stderr": err.decode("utf-8", "replace")}


def parse_bench(stdout):
    """The benchmark's result line (the last JSON object with "metrics"), or None."""
    for line in reversed(stdout.strip().splitlines()):
        line = line.strip()
        if line.startswith("{") and '"metrics"' in line:
            try:
                return json.loads(line)
            except ValueError:
                return None
    return None
