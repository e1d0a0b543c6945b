#!/usr/bin/env python3
"""The Python case suite (tests/cases/python/, issue 13): kernels that reach the GPU through
NVRTC (CuPy, cuda.core, PyTorch's jiterator), a linker (numba-cuda, cuda.core's Linker),
Triton's ptxas and nvcc (torch load_inline), each with a planted out-of-bounds access, a use
after free and a clean twin. Each case runs natively, under `gpusan run --mode check` twice
(first with empty caches, then again with the caches the first left: gpusan's and the
program's own, the "cached" run) and under compute-sanitizer memcheck, and is judged against
its header like the C++ cases (tests/cases/suite.py). Runs of different cases go in parallel:
they are judged, not timed. Standard library only.

    bench/python_suite.py --gpusan DIR/gpusan --out FILE.json [--cases DIR] [--work DIR]
        [--budget S] [--jobs N] [--site DIR] [--only REGEX] [--compute-sanitizer PATH|none]

Usually called by bench/python-suite.sh (which unpacks the carried wheels into --site).

Judging. gpusan passes a bug case when every `expect:` kind is in the report's
summary.by_kind and no kind outside `expect:` + `accept:` is; a clean case when nothing is
reported and the program exits and prints its last line as natively. compute-sanitizer
(run with --report-api-errors no: gpusan judges memory accesses, not API errors; cuda.core
probes cuCtxGetDevice without a context, which memcheck would count) detects a bug case when
it prints a memory error, and is silent on a clean one when its ERROR SUMMARY is 0. A case
that prints `SKIP: reason` and exits 77 natively (framework missing) is skipped with that
reason. The JSON is rewritten after every case: a run cut short keeps what it had.
"""
import argparse
import concurrent.futures
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SKIP_RC = 77
KNOWN_KINDS = {
    "memcpy_out_of_bounds", "memset_out_of_bounds", "use_after_free_host", "unknown_device_address",
    "invalid_pitch", "device_mismatch", "double_free", "invalid_free", "mismatched_free",
    "unknown_free", "leak", "tensor_map_out_of_bounds", "tensor_map_use_after_free",
    "out_of_bounds_read", "out_of_bounds_write", "out_of_bounds_atomic",
    "use_after_free", "use_after_scope", "shared_out_of_bounds", "local_out_of_bounds",
    "misaligned_access", "kernel_fault", "unchecked_launch",
}
HEADER_KEYS = {"gpusan-case", "expect", "accept", "known-gap", "compute-sanitizer", "needs", "wheels", "env",
               "prepare", "kernel", "what"}
CONTINUED = ("what", "known-gap")
# Per run root: the folders every cache a case may fill lives in (a first run starts empty).
CACHE_VARS = {
    "HOME": "home", "XDG_CACHE_HOME": "xdg", "CUPY_CACHE_DIR": "cupy", "NUMBA_CACHE_DIR": "numba",
    "TRITON_CACHE_DIR": "triton", "PYTORCH_KERNEL_CACHE_PATH": "torch-kernels", "CUDA_CACHE_PATH": "nv",
    "TORCHINDUCTOR_CACHE_DIR": "inductor", "GPUSAN_CACHE_DIR": "gpusan",
}


# ----------------------------------------------------------------------------- case headers

def parse_header(path):
    """The `# key: value` lines at the top of a case; `#   more` lines continue `what:` and
    `known-gap:`. Raises ValueError on a malformed header."""
    fields, last = {}, None
    for line in Path(path).read_text(encoding="utf-8", errors="replace").splitlines():
        if not line.startswith("#"):
            break
        m = re.match(r"^# ([a-z-]+):\s*(.*?)\s*$", line)
        if m and m.group(1) in HEADER_KEYS:
            last = m.group(1)
            fields[last] = m.group(2)
        elif last in CONTINUED and line.startswith("#   "):
            fields[last] += " " + line[1:].strip()
        else:
            last = None
    return normalize_case(Path(path), fields)


def normalize_case(path, h):
    name = path.stem
    if h.get("gpusan-case") != "check":
        raise ValueError(f"{path}: `gpusan-case:` must be check (the suite runs check mode), got {h.get('gpusan-case')!r}")
    expect_raw = h.get("expect", "")
    if not expect_raw:
        raise ValueError(f"{path}: missing `expect:`")
    expect = [] if expect_raw == "clean" else expect_raw.replace(",", " ").split()
    accept = h.get("accept", "").replace(",", " ").split()
    for k in expect + accept:
        if k not in KNOWN_KINDS:
            raise ValueError(f"{path}: unknown kind {k!r}")
    cs = h.get("compute-sanitizer", "")
    if cs not in ("yes", "no"):
        raise ValueError(f"{path}: `compute-sanitizer:` must be yes or no, got {cs!r}")
    env = {}
    for kv in h.get("env", "").split():
        if "=" not in kv:
            raise ValueError(f"{path}: `env:` entries are KEY=VALUE, got {kv!r}")
        k, v = kv.split("=", 1)
        env[k] = v
    prepare = h.get("prepare") or None
    if prepare and not (path.parent / prepare).is_file():
        raise ValueError(f"{path}: `prepare:` names {prepare}, which is not beside it")
    return {
        "case": name,
        "file": str(path),
        "framework": name.split("_")[0],
        "expect": expect,
        "accept": accept,
        "known_gap": h.get("known-gap") or None,
        "cs_believed": cs == "yes",
        "needs": h.get("needs", "").split(),
        "wheels": h.get("wheels", "").split(),
        "env": env,
        "prepare": prepare,
        "kernels": h.get("kernel", "").split(),
        "what": h.get("what", ""),
    }


def load_cases(cases_dir, only=""):
    cases, errors = [], []
    for p in sorted(Path(cases_dir).glob("*.py")):
        if p.name.startswith("_"):
            continue
        if only and not re.search(only, p.stem):
            continue
        try:
            cases.append(parse_header(p))
        except (ValueError, OSError) as e:
            errors.append(str(e))
    return cases, errors


# ----------------------------------------------------------------------------- running

class Clock:
    def __init__(self, budget_s):
        self.deadline = time.time() + budget_s if budget_s else 0

    def left(self):
        return self.deadline - time.time() if self.deadline else 1e9


def run(cmd, timeout, env=None, cwd=None, clock=None):
    """Runs `cmd` in its own process group (killed whole at the limit). rc: 128+N for
    signal N, 124 on timeout, 127 when it cannot start."""
    if clock is not None:
        timeout = min(timeout, clock.left())
    if timeout < 3:
        return {"skipped": "suite time budget spent", "cmd": shlex.join(cmd)}
    start = time.monotonic()
    try:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=cwd,
                             start_new_session=True)
    except OSError as e:
        return {"rc": 127, "wall_s": 0.0, "timed_out": False, "cmd": shlex.join(cmd), "stdout": "",
                "stderr": f"cannot start: {e}"}
    timed_out = False
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
        out, err = p.communicate()
    rc = 124 if timed_out else (128 - p.returncode if p.returncode < 0 else p.returncode)
    return {"rc": rc, "wall_s": round(time.monotonic() - start, 3), "timed_out": timed_out, "cmd": shlex.join(cmd),
            "stdout": out.decode("utf-8", "replace"), "stderr": err.decode("utf-8", "replace")}


def last_line(text):
    lines = [l.strip() for l in (text or "").splitlines() if l.strip()]
    return lines[-1] if lines else ""


def skip_reason(stdout):
    lines = [l.strip() for l in (stdout or "").splitlines() if l.startswith("SKIP:")]
    return lines[-1] if lines else (last_line(stdout) or "skipped (exit 77)")


def notes_of(stderr):
    """`note: key=value` lines a case wrote (_case.note)."""
    out = {}
    for line in (stderr or "").splitlines():
        m = re.match(r"^note: ([A-Za-z_]+)=(.*)$", line.strip())
        if m:
            out[m.group(1)] = m.group(2)
    return out


def slim(r, keep=1200):
    """A run for the JSON: its output's tails only (the whole of it is in the logs)."""
    if "skipped" in r:
        return dict(r)
    out = {k: r[k] for k in ("rc", "wall_s", "timed_out", "cmd")}
    out["last_line"] = last_line(r["stdout"])
    out["stdout_tail"] = r["stdout"][-keep:]
    out["stderr_tail"] = r["stderr"][-keep:]
    n = notes_of(r["stderr"])
    if n:
        out["notes"] = n
    return out


def save_log(logs, name, r):
    if not logs or "skipped" in r:
        return
    try:
        with open(os.path.join(logs, name + ".log"), "w", encoding="utf-8") as f:
            f.write(f"$ {r['cmd']}\nrc={r['rc']} wall_s={r['wall_s']} timed_out={r['timed_out']}\n")
            f.write("----- stdout\n" + r["stdout"] + "\n----- stderr\n" + r["stderr"] + "\n")
    except OSError:
        pass


def count_files(root):
    n = 0
    for _, _, files in os.walk(root):
        n += len(files)
    return n


# ----------------------------------------------------------------------------- gpusan reports

def read_report(path):
    if not os.path.exists(path):
        return None, "no --report-json file written"
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        return None, f"unreadable report: {e}"
    if not isinstance(doc, dict):
        return None, "report is not a JSON object"
    return doc, None


def found_kinds(doc):
    s = doc.get("summary") if isinstance(doc, dict) else None
    kinds = {}
    if isinstance(s, dict) and isinstance(s.get("by_kind"), dict):
        kinds = {k: v for k, v in s["by_kind"].items() if isinstance(v, int) and v > 0}
    if not kinds and isinstance(doc, dict) and isinstance(doc.get("errors"), list):
        for e in doc["errors"]:
            if isinstance(e, dict) and isinstance(e.get("kind"), str):
                c = e.get("count", 1)
                kinds[e["kind"]] = kinds.get(e["kind"], 0) + (c if isinstance(c, int) and c > 0 else 1)
    return kinds


def coverage_of(doc, wanted=()):
    """The report's coverage section, read defensively (absent in older builds): totals, the
    unchecked kernels, and for each name in the case's `kernel:` header the kernels whose
    name contains it, with the route that checked them or why not."""
    cov = doc.get("coverage") if isinstance(doc, dict) else None
    if not isinstance(cov, dict):
        return {"present": False}
    kernels = [k for k in cov.get("kernels") or [] if isinstance(k, dict)]

    def row(k):
        return {"name": str(k.get("name", ""))[:160], "launches": k.get("launches"),
                "checked_by": k.get("checked_by"), "unchecked": k.get("unchecked")}

    out = {"present": True, "totals": cov.get("totals") if isinstance(cov.get("totals"), dict) else None,
           "unchecked": [row(k) for k in kernels if k.get("unchecked")][:10]}
    planted = {}
    for w in wanted:
        planted[w] = [row(k) for k in kernels if w in str(k.get("name", "")) or w in str(k.get("mangled", ""))][:4]
    out["planted"] = planted
    out["planted_checked"] = bool(planted) and all(
        rows and all(r["checked_by"] and not r["unchecked"] for r in rows) for rows in planted.values())
    return out


def judge_gpusan(case, r, doc, problem, native):
    """One gpusan run against the case's header (see the module's doc)."""
    res = slim(r)
    if "skipped" in r:
        res.update(verdict="skipped", **{"pass": None})
        return res
    expected = list(case["expect"])
    is_bug = bool(expected)
    res["expected"] = expected
    if doc is None:
        res.update(report=False, report_problem=problem, kinds={}, missing=expected, extra=[], verdict="no_report")
        res["pass"] = False
        return res
    kinds = found_kinds(doc)
    res["report"] = True
    res["kinds"] = kinds
    s = doc.get("summary") if isinstance(doc.get("summary"), dict) else {}
    res["total"] = s.get("total")
    res["messages"] = [str(e.get("message", ""))[:200] for e in (doc.get("errors") or [])[:6] if isinstance(e, dict)]
    res["coverage"] = coverage_of(doc, case["kernels"])
    missing = [k for k in expected if k not in kinds]
    allowed = set(expected) | set(case["accept"])
    extra = sorted(k for k in kinds if k not in allowed)
    res["missing"], res["extra"] = missing, extra
    native_ran = bool(native) and "skipped" not in native
    if native_ran:
        res["rc_passthrough"] = r["rc"] == native["rc"]
    if extra:
        verdict = "false_positive"
    elif is_bug:
        verdict = "detected" if not missing else ("missed_known_gap" if case["known_gap"] else "missed")
    else:
        verdict = "clean"
    ok = not missing and not extra
    if not is_bug:
        # Silent, and the program behaves as natively: same exit code, same last line.
        if native_ran:
            res["behaviour_preserved"] = (r["rc"] == native["rc"]
                                          and last_line(r["stdout"]) == last_line(native["stdout"]))
            if not res["behaviour_preserved"] and not extra:
                verdict = "behaviour_changed"
            ok = ok and res["behaviour_preserved"]
        else:
            res["behaviour_preserved"] = None
    res["verdict"] = verdict
    res["pass"] = ok
    return res


# ----------------------------------------------------------------------------- compute-sanitizer

MEMORY_HEADS = ("Invalid ", "Misaligned", "Out-of-range", "Malloc/Free", "Barrier error", "Uninitialized",
                "Host API memory access error", "Cuda Memory Check", "Illegal")


def parse_cs(text):
    """compute-sanitizer's output → ERROR SUMMARY count, memory errors, API errors, first
    headlines. The whole output is read: the program's own stderr follows its lines."""
    summary = None
    memory, api, other = 0, 0, 0
    heads = []
    for line in (text or "").splitlines():
        m = re.match(r"^========= ERROR SUMMARY: (\d+) error", line)
        if m:
            summary = int(m.group(1))
            continue
        m = re.match(r"^========= (\S.*)$", line)
        if not m:
            continue
        h = m.group(1).strip()
        if h.startswith(("COMPUTE-SANITIZER", "LEAK SUMMARY", "Target application returned", "Saved host backtrace",
                         "Error: process didn't terminate", "Host Frame", "Device Frame", "Address ", "Access at",
                         "by thread", "and is ")):
            continue
        if h.startswith(MEMORY_HEADS):
            memory += 1
        elif h.startswith("Program hit"):
            api += 1
        else:
            continue
        if len(heads) < 8:
            heads.append(h[:200])
    return {"errors": summary, "memory_errors": memory, "api_errors": api, "headlines": heads}


def judge_cs(case, r):
    res = slim(r, keep=800)
    if "skipped" in r:
        res["verdict"] = "skipped"
        return res
    parsed = parse_cs(r["stdout"] + "\n" + r["stderr"])
    res.update(parsed)
    is_bug = bool(case["expect"])
    if parsed["errors"] is None:
        # No summary: it could not run the program (or ran out of time). A memory error it
        # printed before that still counts.
        res["verdict"] = "detected" if is_bug and parsed["memory_errors"] else (
            "timeout" if r.get("timed_out") else "no_summary")
    elif is_bug:
        res["verdict"] = "detected" if parsed["memory_errors"] or parsed["errors"] else "missed"
    else:
        res["verdict"] = "false_positive" if parsed["errors"] else "clean"
    if is_bug and res["verdict"] in ("detected", "missed"):
        res["matches_belief"] = (res["verdict"] == "detected") == case["cs_believed"]
    return res


# ----------------------------------------------------------------------------- one case

class Suite:
    def __init__(self, args, cases):
        self.args = args
        self.cases = cases
        self.clock = Clock(args.budget)
        self.work = Path(args.work)
        self.logs = str(self.work / "logs")
        os.makedirs(self.logs, exist_ok=True)
        self.prepared = {}  # prepare script -> Future of its result

    def env(self, root, case=None):
        """The environment of one run: every cache under `root` (so a first run finds
        them empty, and the cached run the ones the first left), the case's own variables,
        the unpacked wheels first on PYTHONPATH for the cases that name them."""
        env = dict(os.environ)
        for k in ("GPUSAN_PROGRAM_CACHES", "PYTHONPATH"):
            env.pop(k, None)
        for var, folder in CACHE_VARS.items():
            d = Path(root) / folder
            d.mkdir(parents=True, exist_ok=True)
            env[var] = str(d)
        os.chmod(Path(root) / "gpusan", 0o700)  # gpusan reads only a private cache folder
        env["TORCH_EXTENSIONS_DIR"] = str(self.work / "torch-extensions")
        env["PYTHONUNBUFFERED"] = "1"
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        path = []
        if case and case["wheels"] and self.args.site:
            path.append(self.args.site)
        if os.environ.get("PYTHONPATH"):
            path.append(os.environ["PYTHONPATH"])
        if path:
            env["PYTHONPATH"] = os.pathsep.join(path)
        if case:
            env.update(case["env"])
        return env

    def prepare(self, script):
        """A case's `prepare:` script, run once natively (the torch extension's build)."""
        path = Path(self.args.cases) / script
        r = run([self.args.python, str(path)], self.args.prepare_timeout, self.env(self.work / "prepare"),
                cwd=str(self.work), clock=self.clock)
        save_log(self.logs, "prepare-" + path.stem, r)
        return slim(r)

    def gpusan(self, case, root, label, timeout):
        report = str(self.work / case["case"] / f"{label}.json")
        # gpusan's own --timeout, under the suite's: the program is stopped and the report
        # still written.
        inner = max(5, int(timeout) - 10)
        cmd = [self.args.gpusan, "run", "--mode", "check", "--timeout", str(inner), "--report-json", report, "--",
               self.args.python, case["file"]]
        r = run(cmd, timeout, self.env(root, case), cwd=str(self.work), clock=self.clock)
        save_log(self.logs, f"{case['case']}.{label}", r)
        doc, problem = read_report(report) if "skipped" not in r else (None, "skipped")
        return r, doc, problem

    def one(self, case):
        name = case["case"]
        row = {k: case[k] for k in ("case", "framework", "file", "expect", "accept", "known_gap", "cs_believed",
                                     "needs", "kernels", "what")}
        row["wheel_site"] = (self.args.site or "missing") if case["wheels"] else None
        if case["prepare"]:
            prep = self.prepared[case["prepare"]].result()
            if prep.get("rc") == SKIP_RC:
                row["skipped"] = skip_reason(prep.get("stdout_tail", ""))
                return row
            if prep.get("rc") != 0:
                row["skipped"] = f"prepare step {case['prepare']} failed: rc {prep.get('rc')} {prep.get('skipped', '')}"
                row["prepare"] = prep
                return row
        base = self.work / name
        timeout = self.args.timeout
        native = run([self.args.python, case["file"]], timeout, self.env(base / "native", case), cwd=str(self.work),
                     clock=self.clock)
        save_log(self.logs, f"{name}.native", native)
        row["native"] = slim(native)
        if native.get("rc") == SKIP_RC:
            row["skipped"] = skip_reason(native["stdout"])
            return row
        if "skipped" not in native:
            is_bug = bool(case["expect"])
            row["native"]["ok"] = native["rc"] == 0 and " done " in last_line(native["stdout"])
            if not row["native"]["ok"] and not is_bug:
                row["native"]["problem"] = "the clean program fails natively: its gpusan runs cannot be judged"
        for label in ("gpusan_first", "gpusan_cached"):
            r, doc, problem = self.gpusan(case, base / "gpusan", label, timeout)
            row[label] = judge_gpusan(case, r, doc, problem, native)
            row[label]["cache_files"] = count_files(base / "gpusan")
        if self.args.compute_sanitizer == "none":
            row["compute_sanitizer"] = {"verdict": "skipped", "skipped": "--compute-sanitizer none"}
        else:
            cmd = [self.args.compute_sanitizer, "--tool", "memcheck", "--report-api-errors", "no", "--print-limit",
                   "20", self.args.python, case["file"]]
            r = run(cmd, self.args.cs_timeout, self.env(base / "cs", case), cwd=str(self.work), clock=self.clock)
            save_log(self.logs, f"{name}.compute-sanitizer", r)
            row["compute_sanitizer"] = judge_cs(case, r)
        return row


# ----------------------------------------------------------------------------- summary

def summarize(rows):
    """Found / missed / false positives per column, over the cases that ran."""
    out = {}
    ran = [r for r in rows if "skipped" not in r and "error" not in r]
    for col in ("gpusan_first", "gpusan_cached", "compute_sanitizer"):
        s = {"bug_cases": 0, "found": 0, "missed": [], "false_positive_cases": [], "clean_cases": 0,
             "clean_silent": 0, "not_judged": []}
        if col != "compute_sanitizer":
            s.update(passed=0, failed=0, no_report=[], behaviour_changed=[])
        for r in ran:
            res = r.get(col) or {}
            v = res.get("verdict")
            if v in (None, "skipped", "timeout", "no_summary"):
                s["not_judged"].append(f"{r['case']} ({v or 'not run'})")
                if col != "compute_sanitizer" and v not in (None, "skipped"):
                    s["failed"] += 1
                continue
            if col != "compute_sanitizer":
                s["passed" if res.get("pass") else "failed"] += 1
                if v == "no_report":
                    s["no_report"].append(r["case"])
                if v == "behaviour_changed":
                    s["behaviour_changed"].append(r["case"])
            if r["expect"]:
                s["bug_cases"] += 1
                if v == "detected":
                    s["found"] += 1
                else:
                    s["missed"].append(r["case"])
            else:
                s["clean_cases"] += 1
                if v == "clean":
                    s["clean_silent"] += 1
            if v == "false_positive" or (col != "compute_sanitizer" and res.get("extra")):
                s["false_positive_cases"].append(r["case"])
        out[col] = s
    out["skipped"] = {r["case"]: r["skipped"] for r in rows if "skipped" in r}
    out["errors"] = [r for r in rows if "error" in r]
    frameworks = {}
    for r in ran:
        f = frameworks.setdefault(r["framework"], {"cases": 0, "gpusan_first_pass": 0, "gpusan_cached_pass": 0,
                                                   "cs_right": 0})
        f["cases"] += 1
        f["gpusan_first_pass"] += bool((r.get("gpusan_first") or {}).get("pass"))
        f["gpusan_cached_pass"] += bool((r.get("gpusan_cached") or {}).get("pass"))
        f["cs_right"] += (r.get("compute_sanitizer") or {}).get("verdict") in ("detected", "clean")
    out["by_framework"] = frameworks
    return out


def table(doc):
    lines = [f"{'case':30s} {'expect':22s} {'native':7s} {'gpusan first':22s} {'cached':22s} {'c-s':9s}"]
    for r in doc["cases"]:
        if "error" in r:
            lines.append(f"{r.get('case', '?'):30s} ERROR {r['error'][:80]}")
            continue
        if "skipped" in r:
            lines.append(f"{r['case']:30s} SKIPPED {r['skipped'][:90]}")
            continue
        exp = ",".join(r["expect"]) or "clean"

        def g(col):
            res = r.get(col) or {}
            mark = {True: "PASS", False: "FAIL", None: "-"}[res.get("pass")]
            return f"{mark} {','.join(sorted(res.get('kinds') or {})) or res.get('verdict', '')}"[:22]

        nat = r.get("native", {})
        lines.append(f"{r['case']:30s} {exp[:22]:22s} {('rc ' + str(nat.get('rc', '-'))):7s} {g('gpusan_first'):22s} "
                     f"{g('gpusan_cached'):22s} {(r.get('compute_sanitizer') or {}).get('verdict', '-'):9s}")
    s = doc["summary"]
    for col in ("gpusan_first", "gpusan_cached", "compute_sanitizer"):
        c = s[col]
        lines.append(f"{col}: bugs found {c['found']}/{c['bug_cases']}, clean silent {c['clean_silent']}/"
                     f"{c['clean_cases']}, false-positive cases {len(c['false_positive_cases'])}, missed {c['missed']}, "
                     f"not judged {len(c['not_judged'])}")
    if s["skipped"]:
        lines.append(f"skipped: {len(s['skipped'])} ({', '.join(sorted(s['skipped']))})")
    return "\n".join(lines)


def environment(args):
    probe = (
        "import json, importlib\nout = {}\n"
        "for m in ('cupy', 'numba', 'numba_cuda', 'numpy', 'torch', 'triton', 'cuda.core', 'cuda.bindings'):\n"
        "    try:\n        out[m] = getattr(importlib.import_module(m), '__version__', 'present')\n"
        "    except Exception as e:\n        out[m] = f'unavailable: {type(e).__name__}: {str(e)[:120]}'\n"
        "print(json.dumps(out))\n")
    env = dict(os.environ)
    if args.site:
        env["PYTHONPATH"] = os.pathsep.join([args.site] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    info = {"python": args.python, "wheel_site": args.site or None}
    r = run([args.python, "-c", probe], 90, env)
    try:
        info["modules_with_wheel_site"] = json.loads(last_line(r.get("stdout", "")))
    except ValueError:
        info["modules_with_wheel_site"] = slim(r) if "skipped" not in r else r
    for name, cmd in (("gpusan", [args.gpusan, "--version"]), ("compute_sanitizer", [args.compute_sanitizer, "--version"])):
        if cmd[0] == "none":
            continue
        r = run(cmd, 30)
        info[name] = last_line(r.get("stdout", "")) or last_line(r.get("stderr", "")) or f"rc {r.get('rc')}"
    return info


# ----------------------------------------------------------------------------- main

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpusan", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--cases", default=str(REPO / "tests" / "cases" / "python"))
    ap.add_argument("--work", default="/tmp/gpusan-python-suite")
    ap.add_argument("--budget", type=float, default=240, help="seconds for the whole suite (0: none)")
    ap.add_argument("--jobs", type=int, default=min(8, os.cpu_count() or 4))
    ap.add_argument("--timeout", type=float, default=60, help="seconds per native or gpusan run")
    ap.add_argument("--cs-timeout", type=float, default=90)
    ap.add_argument("--prepare-timeout", type=float, default=180)
    ap.add_argument("--compute-sanitizer", default="compute-sanitizer")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--site", default="", help="unpacked wheels, first on PYTHONPATH for cases with `wheels:`")
    ap.add_argument("--only", default="", help="regex of case names")
    args = ap.parse_args(argv)
    args.cases = str(Path(args.cases).resolve())
    args.gpusan = os.path.abspath(args.gpusan) if os.sep in args.gpusan else args.gpusan
    started = time.time()
    cases, header_errors = load_cases(args.cases, args.only)
    for e in header_errors:
        print("HEADER ERROR:", e, flush=True)
    os.makedirs(args.work, exist_ok=True)
    suite = Suite(args, cases)
    lock = threading.Lock()
    state = {"rows": [], "prepare": {}, "environment": {}, "phase": "running"}

    def write():
        rows = sorted(state["rows"], key=lambda r: r.get("case", ""))
        doc = {
            "what": "gpusan's Python case suite (tests/cases/python): each case natively, under `gpusan run --mode "
                    "check` with empty caches (first) and again with the caches the first left (cached), and under "
                    "compute-sanitizer memcheck",
            "command": " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv)),
            "commands": {
                "native": "python3 CASE.py",
                "gpusan": f"{args.gpusan} run --mode check --timeout N --report-json REPORT.json -- python3 CASE.py",
                "compute_sanitizer": f"{args.compute_sanitizer} --tool memcheck --report-api-errors no --print-limit 20 "
                                     "python3 CASE.py",
            },
            "judging": {
                "gpusan": "bug case: every expect kind in summary.by_kind and no kind outside expect + accept; clean "
                          "case: no kind, same exit code and last stdout line as the native run",
                "compute_sanitizer": "bug case: a memory error printed; clean case: ERROR SUMMARY 0",
                "caches": "first and cached gpusan runs share one root of caches (HOME, CUPY_CACHE_DIR, "
                          "NUMBA_CACHE_DIR, TRITON_CACHE_DIR, PYTORCH_KERNEL_CACHE_PATH, CUDA_CACHE_PATH, "
                          "GPUSAN_CACHE_DIR), empty before the first; native and compute-sanitizer runs have their own",
            },
            "phase": state["phase"],
            "header_errors": header_errors,
            "environment": state["environment"],
            "prepare": state["prepare"],
            "summary": summarize(rows),
            "cases": rows,
            "suite_wall_s": round(time.time() - started, 1),
        }
        tmp = args.out + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1)
        os.replace(tmp, args.out)
        return doc

    def guarded(case):
        try:
            return suite.one(case)
        except Exception as e:  # noqa: BLE001 (recorded; the other cases go on)
            return {"case": case["case"], "framework": case["framework"], "expect": case["expect"],
                    "error": f"{type(e).__name__}: {e}"}

    def prep_guarded(script):
        try:
            r = suite.prepare(script)
        except Exception as e:  # noqa: BLE001
            r = {"rc": None, "error": f"{type(e).__name__}: {e}"}
        with lock:
            state["prepare"][script] = r
        return r

    write()
    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        env_future = pool.submit(environment, args)
        for script in sorted({c["prepare"] for c in cases if c["prepare"]}):
            suite.prepared[script] = pool.submit(prep_guarded, script)
        # The long ones first (PyTorch's import is the slowest), those waiting on a prepare
        # step last.
        order = sorted(cases, key=lambda c: (bool(c["prepare"]), "torch" not in c["needs"], c["case"]))
        futures = [pool.submit(guarded, c) for c in order]
        for f in concurrent.futures.as_completed(futures):
            row = f.result()
            with lock:
                state["rows"].append(row)
                write()
            g1, g2 = row.get("gpusan_first") or {}, row.get("gpusan_cached") or {}
            print(f"{row.get('case', '?'):30s} {row.get('skipped') or row.get('error') or ''}"
                  f"{'' if 'skipped' in row or 'error' in row else 'first=' + str(g1.get('verdict')) + ' cached=' + str(g2.get('verdict')) + ' cs=' + str((row.get('compute_sanitizer') or {}).get('verdict'))}",
                  flush=True)
        try:
            state["environment"] = env_future.result()
        except Exception as e:  # noqa: BLE001
            state["environment"] = {"error": repr(e)}
    state["phase"] = "done"
    doc = write()
    print(table(doc), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
