"""What the canary-mode GPU cases share (issue 17; bench/reliability/canary_*.sh and
bench/canary-overhead.sh): running a command with a limit (bench/benchproc.py's `run`),
reading a `gpusan run --mode canary --report-json` report (kinds found, the
`canary_overwrite` findings and the times they carry, the coverage and counters the
report gives about what canary mode guards), comparing a clean run's output with native's,
and the one-JSON-object result of the reliability contract, with a dry path for a machine
without a GPU (the result then says `skipped`).

Standard library only: it runs on the GPU machine.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
REPO = os.path.dirname(BENCH)
sys.path.insert(0, BENCH)

from benchproc import parse_bench, run  # noqa: E402,F401  (re-exported for the cases)

KIND = "canary_overwrite"


def gpu_present():
    """Whether this machine has a GPU the cases can use; CANARY_DRY=1 says no,
    CANARY_ASSUME_GPU=1 yes (bench/canary/test_canary.py, over fake tools)."""
    if os.environ.get("CANARY_DRY") == "1":
        return False
    if os.environ.get("CANARY_ASSUME_GPU") == "1":
        return True
    smi = shutil.which("nvidia-smi")
    if not smi:
        return False
    try:
        r = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0 and "GPU" in r.stdout


def tool_next_to(nvcc, name):
    """`name` (cuobjdump, …) beside the nvcc in use, else on PATH, else None."""
    path = shutil.which(nvcc) or nvcc
    cand = os.path.join(os.path.dirname(path), name)
    if os.access(cand, os.X_OK):
        return cand
    return shutil.which(name)


def ptx_entries(path, nvcc="nvcc"):
    """How many PTX entries `path` holds (`cuobjdump -lptx`), None without cuobjdump."""
    tool = tool_next_to(nvcc, "cuobjdump")
    if not tool:
        return None
    r = subprocess.run([tool, "-lptx", path], capture_output=True, text=True, timeout=60)
    return len([line for line in r.stdout.splitlines() if line.strip().startswith("PTX file")])


# ---------------------------------------------------------------------------- reports

def read_report(path):
    """The report at `path` as a dict, or {"problem": why} when there is none."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        return {"problem": f"{type(e).__name__}: {e}"}


def by_kind(rep):
    """summary.by_kind of a report; None when it has none (no report)."""
    s = rep.get("summary")
    return dict(s.get("by_kind") or {}) if isinstance(s, dict) else None


def canary_findings(rep):
    return [e for e in rep.get("errors") or [] if e.get("kind") == KIND]


def _numeric_leaves(obj, path=""):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _numeric_leaves(v, f"{path}.{k}" if path else k)
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
        yield path, obj


# Time fields a finding may carry: the plan (canary17-plan.md, decision 8) says "when it was
# detected (ms since start and since the last clean scan)"; its names are not fixed yet, so
# every numeric field whose name speaks of time is collected, and the latency computed from
# whichever form is there (absolute wall clock first).
TIME_KEY = re.compile(r"(detect|scan|since|unix|epoch|wall|_at|time|_ms$|_us$|_ns$)", re.I)
UNIT = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}


def _unit_us(key):
    m = re.search(r"_(ns|us|ms|s)$", key)
    return UNIT[m.group(1)] if m else None


def finding_times(finding):
    """{path: value} of the finding's time-like numeric fields."""
    return {p: v for p, v in _numeric_leaves(finding) if TIME_KEY.search(p.rsplit(".", 1)[-1]) and p != "count"}


def latency(finding, t_overflow_us, t_main_us=None, bad_store_gpu_ns=None):
    """Detection latency of `finding`, in ms.

    - `latency_ms`, GPU clock to GPU clock when it can be: the finding's `scan_gpu_ns` (the
      scan kernel's %globaltimer when it saw the bad bytes) minus `bad_store_gpu_ns` (the
      overflowing thread's %globaltimer just before its store): GMOD's measure, from the
      overflow to its detection (`basis` says which measure it is).
    - `host_latency_ms`: the finding's `detected_unix_us` (CLOCK_REALTIME when gpusan's host
      read the scan's records) minus `t_overflow_us` (the program's CLOCK_REALTIME right after
      it saw the overflowing kernel's completion event): when the host had the finding in
      hand (negative when found while the kernel still ran); `scan_read_after_launch_ms`, the
      host's time from the scan's launch to reading it. Without `scan_gpu_ns`, `latency_ms`
      is this one (or any other absolute field, …unix…/…epoch…/…wall…, unit by suffix).
    - a relative field (detected … since start) gives only `latency_estimate_ms`, anchored
      at the program's main (`t_main_us`): its zero is gpusan's.
    - the time since the last clean scan: an upper bound of the time from the bad write to
      its detection (the write came after that scan).
    Returns {} when the finding carries no time."""
    times = finding_times(finding)
    out = {"fields": times} if times else {}
    d = finding.get("details") or {}
    scan = d.get("scan")
    if scan:
        out["scan"] = scan
    gpu, det, launched = d.get("scan_gpu_ns"), d.get("detected_unix_us"), d.get("scan_launched_unix_us")
    if isinstance(det, int) and det and t_overflow_us:
        out["host_latency_ms"] = round((det - t_overflow_us) / 1e3, 4)
    if isinstance(det, int) and isinstance(launched, int) and det and launched:
        out["scan_read_after_launch_ms"] = round((det - launched) / 1e3, 4)
    if isinstance(gpu, int) and gpu and isinstance(bad_store_gpu_ns, int) and bad_store_gpu_ns:
        out["latency_ms"] = round((gpu - bad_store_gpu_ns) / 1e6, 6)
        out["basis"] = "gpu %globaltimer: scan_gpu_ns - the overflowing thread's just before its store"
    for p, v in times.items():
        if "latency_ms" in out:
            break
        leaf = p.rsplit(".", 1)[-1]
        unit = _unit_us(leaf)
        if unit is None:
            continue
        if re.search(r"unix|epoch|wall|realtime", leaf, re.I) and not re.search(r"launch", leaf) and t_overflow_us:
            out["latency_ms"] = round((v * unit - t_overflow_us) / 1e3, 4)
            out["basis"] = f"absolute field {p}"
            break
    if t_overflow_us and t_main_us:
        for p, v in times.items():
            leaf = p.rsplit(".", 1)[-1]
            unit = _unit_us(leaf)
            if unit and re.search(r"detect", leaf, re.I) and not re.search(r"clean|scan|unix|epoch|wall", leaf, re.I):
                # Not the latency: the field's zero is gpusan's, not known to the program
                # (canary17's guard takes it when it is first used, not at process start).
                out["latency_estimate_ms"] = round((v * unit - (t_overflow_us - t_main_us)) / 1e3, 4)
                out["estimate_basis"] = (f"relative field {p} anchored at the program's main: off by the time "
                                         "between main and the field's zero (either way)")
                break
    for p, v in times.items():
        leaf = p.rsplit(".", 1)[-1]
        unit = _unit_us(leaf)
        if unit and re.search(r"clean", leaf, re.I):
            out["since_last_clean_scan_ms"] = round(v * unit / 1e3, 4)
            break
    return out


def canary_detail(f):
    """The facts of a canary finding a case judges (canary17's CanaryDetails: the allocation,
    the next one when the canary is also its head, the first bad byte's offset past the end,
    bad and canary bytes, which scan found it, when, the kernels since the last clean scan)."""
    d = f.get("details") or {}
    alloc, nxt = d.get("allocation") or {}, d.get("next") or {}
    return {"scan": d.get("scan"), "allocation_size": alloc.get("size"), "allocation_kind": alloc.get("kind"),
            "next_size": nxt.get("size") if nxt else None, "offset_past_end": d.get("offset_past_end"),
            "bad_bytes": d.get("bad_bytes"), "canary_bytes": d.get("canary_bytes"),
            "detected_ms": d.get("detected_ms"), "since_clean_scan_ms": d.get("since_clean_scan_ms"),
            "detected_unix_us": d.get("detected_unix_us"), "scan_launched_unix_us": d.get("scan_launched_unix_us"),
            "scan_gpu_ns": d.get("scan_gpu_ns"),
            "kernels": [k.get("kernel") or k.get("name") for k in d.get("kernels") or [] if isinstance(k, dict)][-4:]}


def slim_finding(f, keep=1500):
    """A finding cut to a readable size for the result JSON."""
    s = json.dumps(f)
    if len(s) <= keep:
        return f
    return {"kind": f.get("kind"), "message": f.get("message"), "truncated_json": s[:keep]}


def canary_facts(rep):
    """The report's coverage and counters that speak of canaries, guards, scans, drops
    (what canary mode says it guards), cut to what matters."""
    facts = {}
    # canary17's own section (`Document::canary`: guarded by kind, unguarded by reason, scans).
    if rep.get("canary") is not None:
        c = json.dumps(rep["canary"])
        facts["canary_section"] = rep["canary"] if len(c) <= 3000 else {"truncated_json": c[:3000]}
    cov = rep.get("coverage")
    if isinstance(cov, dict):
        keep = {k: v for k, v in cov.items() if re.search(r"canar|guard|alloc|scan|summary", k, re.I)}
        facts["coverage"] = json.loads(json.dumps(keep)[:3000]) if len(json.dumps(keep)) <= 3000 else \
            {"truncated_json": json.dumps(keep)[:3000]}
    ctr = rep.get("counters")
    if isinstance(ctr, dict):
        facts["counters"] = {k: v for k, v in ctr.items() if re.search(r"canar|guard|scan|drop|arm|entr", k, re.I)}
    notes = rep.get("notes")
    if notes:
        facts["notes"] = [n for n in (notes if isinstance(notes, list) else [notes])
                          if re.search(r"canar|guard|heap|not guarded", json.dumps(n), re.I)][:6]
    return facts


def report_summary(path):
    """What a case records of one gpusan run's report."""
    rep = read_report(path)
    if "problem" in rep:
        return {"report": rep["problem"], "by_kind": None}
    fs = canary_findings(rep)
    r = {"by_kind": by_kind(rep), "canary_findings": len(fs), **canary_facts(rep)}
    if fs:
        r["first_finding"] = slim_finding(fs[0])
        r["canary"] = canary_detail(fs[0])
    others = [e for e in rep.get("errors") or [] if e.get("kind") != KIND]
    if others:
        r["other_findings"] = [slim_finding(e, 600) for e in others[:3]]
    return r


# ---------------------------------------------------------------------------- outputs

def deterministic(text, drop=(r"^time:", r"^info:")):
    """A program's output without the lines allowed to differ between runs."""
    pats = [re.compile(d) for d in drop]
    return [line for line in text.splitlines() if not any(p.search(line) for p in pats)]


def fields(text, prefix="time:"):
    """key=value numbers from the lines starting with `prefix`; integers stay exact (a
    %globaltimer in ns has more digits than a float keeps)."""
    out = {}
    for line in text.splitlines():
        if line.startswith(prefix):
            for k, v in re.findall(r"(\w+)=(-?[0-9.]+(?:e[-+]?\d+)?)(?![\w.])", line):
                out[k] = int(v) if re.fullmatch(r"-?\d+", v) else float(v)
    return out


def scans_of(summary):
    """How many scans the guard ran, from a report_summary (canary17's `canary` section or
    its counters); None when the report says nothing of it."""
    sec = summary.get("canary_section") or {}
    if isinstance(sec.get("scans"), int):
        return sec["scans"]
    ctr = summary.get("counters") or {}
    return ctr.get("canary_scans")


def guarded_of(summary, pattern):
    """Allocations guarded whose kind matches `pattern` (canary17's `canary.guarded`)."""
    g = (summary.get("canary_section") or {}).get("guarded") or {}
    return sum(v for k, v in g.items() if re.search(pattern, k, re.I) and isinstance(v, int))


def silent(by):
    return by == {}


# ---------------------------------------------------------------------------- results

class Clock:
    """The case's time: it must finish well under the reliability contract's 60 s."""

    def __init__(self, budget_s):
        self.t0 = time.monotonic()
        self.budget = budget_s

    def left(self):
        return self.budget - (time.monotonic() - self.t0)

    def elapsed(self):
        return round(time.monotonic() - self.t0, 2)


def write_result(path, doc):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(tmp, path)


def skipped_result(path, case, expected, why, **extra):
    """The dry path: no GPU (or no gpusan) here. Not a pass: `ok` is false and `skipped` says why."""
    write_result(path, {"case": case, "ok": False, "skipped": why, "expected": expected, "native": {}, "gpusan": {},
                        "notes": f"skipped: {why}", **extra})


def save_log(work, label, r):
    with open(os.path.join(work, f"{label}.log"), "w") as f:
        f.write(f"$ {r.get('cmd')}\nrc={r.get('rc')} wall={r.get('wall_s')}s\n--- stdout\n{r.get('stdout', '')}\n"
                f"--- stderr\n{r.get('stderr', '')}\n")


def brief(r, keep=600):
    """A run as the result JSON records it."""
    d = {"rc": r["rc"], "wall_s": r["wall_s"]}
    if r.get("timed_out"):
        d["timed_out"] = True
    if r["rc"] != 0:
        d["stdout_tail"] = r["stdout"][-keep:]
        d["stderr_tail"] = r["stderr"][-keep:]
    return d


def gpusan_cmd(gpusan, report, argv, interval_ms=None, extra=()):
    cmd = [gpusan, "run", "--mode", "canary"]
    if interval_ms is not None:
        cmd += ["--canary-interval-ms", str(interval_ms)]
    return [*cmd, *extra, "--report-json", report, "--", *argv]


def interval_accepts(gpusan, value, work):
    """Whether `gpusan run --mode canary --canary-interval-ms VALUE` is accepted (tried on
    /bin/true, no GPU work)."""
    rep = os.path.join(work, f"probe-interval-{value}.json")
    r = run(gpusan_cmd(gpusan, rep, ["true"], interval_ms=value), 30)
    return r["rc"] == 0, (r["stderr"] or r["stdout"])[-300:]
